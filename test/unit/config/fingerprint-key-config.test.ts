import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import { warnGeneratedFingerprintKey } from '../../../src/config/privacy.js';
import { errorOf, MINIMAL_ENV } from '../../helpers/config.js';

// Where the fingerprint key comes from is an explicit choice: a key file, a generated key whose changelog copy is
// wrapped with a KEK, or a generated key kept in Redis only. No choice is refused in one line naming the three;
// contradictory ones name the setting that contradicts; a start with a generated key warns every time.

const { FINGERPRINT_KEY_GENERATE: _generate, ...none } = MINIMAL_ENV;
const dir = mkdtempSync(join(tmpdir(), 'cfg-fk-'));
function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}
const keyFile = file('key', 'k'.repeat(32));
const kekFile = file('kek', 'e'.repeat(44));

describe('the fingerprint key settings', () => {
  it('refuses a start with none of the three, in one line naming them', () => {
    const err = errorOf(none);
    expect(err.message.split('\n')).toEqual([
      'invalid configuration: FINGERPRINT_KEY_FILE: required: set it (recommended), or FINGERPRINT_KEK_FILE to keep a generated key wrapped in the changelog, or FINGERPRINT_KEY_GENERATE=true to keep a generated key in Redis only',
    ]);
  });

  it('takes each of the three alone', () => {
    expect(loadConfig({ ...none, FINGERPRINT_KEY_FILE: keyFile })).toMatchObject({
      fingerprintKeyFile: keyFile,
      fingerprintKekFile: null,
    });
    expect(loadConfig({ ...none, FINGERPRINT_KEK_FILE: kekFile })).toMatchObject({
      fingerprintKeyFile: null,
      fingerprintKekFile: kekFile,
    });
    expect(loadConfig({ ...none, FINGERPRINT_KEY_GENERATE: 'true' })).toMatchObject({
      fingerprintKeyFile: null,
      fingerprintKekFile: null,
    });
    // A KEK with the opt-in: the copy is wrapped all the same.
    expect(
      loadConfig({ ...none, FINGERPRINT_KEK_FILE: kekFile, FINGERPRINT_KEY_GENERATE: 'true' }).fingerprintKekFile,
    ).toBe(kekFile);
  });

  it('names what contradicts a key file, and a short or unreadable KEK, never its content', () => {
    expect(errorOf({ ...none, FINGERPRINT_KEY_FILE: keyFile, FINGERPRINT_KEK_FILE: kekFile }).message).toBe(
      'invalid configuration: FINGERPRINT_KEK_FILE: only without FINGERPRINT_KEY_FILE (no key is generated)',
    );
    expect(errorOf({ ...none, FINGERPRINT_KEY_FILE: keyFile, FINGERPRINT_KEY_GENERATE: 'true' }).message).toBe(
      'invalid configuration: FINGERPRINT_KEY_GENERATE: only without FINGERPRINT_KEY_FILE (no key is generated)',
    );
    const short = file('short-kek', 'short-kek-content-31-bytes-long');
    const err = errorOf({ ...none, FINGERPRINT_KEK_FILE: short });
    expect(err.message).toBe(
      'invalid configuration: FINGERPRINT_KEK_FILE: the key-encryption key must be at least 32 bytes long',
    );
    expect(errorOf({ ...none, FINGERPRINT_KEK_FILE: join(dir, 'missing') }).message).toBe(
      'invalid configuration: FINGERPRINT_KEK_FILE: file cannot be read or is empty',
    );
  });

  it('a generated key is said at every start, naming the setting that chose it; a key file is not', () => {
    const lines: Array<{ setting?: string; msg: string }> = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    for (const env of [
      { FINGERPRINT_KEY_FILE: keyFile },
      { FINGERPRINT_KEK_FILE: kekFile },
      { FINGERPRINT_KEY_GENERATE: 'true' },
    ]) {
      warnGeneratedFingerprintKey(loadConfig({ ...none, ...env }), logger);
    }
    expect(lines.map((l) => l.setting)).toEqual(['FINGERPRINT_KEK_FILE', 'FINGERPRINT_KEY_GENERATE']);
    expect(lines.every((l) => l.msg.includes('set FINGERPRINT_KEY_FILE in production'))).toBe(true);
  });
});
