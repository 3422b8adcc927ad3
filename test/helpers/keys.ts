import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Key files for test bridges: what a deployment mounts from its secret store. Written once per test process, in a
// directory of its own, as random base64 text (the form `head -c 32 /dev/urandom | base64` gives).

let dir: string | null = null;
const files = new Map<string, string>();

/** A file holding `bytes` random bytes (base64), one per `name` and test process. */
export function testKeyFile(name: string, bytes = 32): string {
  let file = files.get(name);
  if (!file) {
    dir ??= mkdtempSync(join(tmpdir(), 'rb-test-keys-'));
    file = join(dir, name);
    writeFileSync(file, randomBytes(bytes).toString('base64'), { mode: 0o600 });
    files.set(name, file);
  }
  return file;
}

/**
 * The fingerprint key settings of test bridges: a generated key with its changelog copy wrapped (the mode that
 * survives a Redis loss, which the fault tests exercise).
 */
export function testFingerprintKeyEnv(): Record<string, string> {
  return { FINGERPRINT_KEK_FILE: testKeyFile('fingerprint-kek') };
}
