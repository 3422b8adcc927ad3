import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  fingerprintKeyId,
  KeyEncryptionKey,
  parseCopy,
  UnreadableKeyCopy,
  WRAPPED_KEY_FORMAT,
} from '../../../src/core/fingerprint-key-wrap.js';
import { secretForms } from '../../helpers/secret-scan.js';

// The generated fingerprint key leaves Redis only wrapped: the copy names its deployment, prefix, key id and KEK
// id, all bound to the ciphertext; without the KEK it tells nothing of the key, and with another KEK, for another
// deployment or altered, it does not unwrap and says why without a secret.

const owner = { deployment: 'd0123456789ab', prefix: 'rb' };
const kek = new KeyEncryptionKey(Buffer.from(randomBytes(32).toString('base64')));
const secret = (): string => randomBytes(32).toString('base64');

function unreadable(unwrap: () => unknown): string {
  try {
    unwrap();
  } catch (err) {
    if (err instanceof UnreadableKeyCopy) return err.message;
    throw err;
  }
  throw new Error('expected UnreadableKeyCopy');
}

describe('a wrapped fingerprint key copy', () => {
  it('unwraps to the key under the same KEK, deployment and prefix; a new IV each time', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
        const s = Buffer.from(bytes).toString('base64');
        const a = kek.wrap(s, owner);
        expect(kek.unwrap(a, owner)).toBe(s);
        expect(parseCopy(a).iv).not.toBe(parseCopy(kek.wrap(s, owner)).iv);
      }),
      { numRuns: 50 },
    );
  });

  it('names its format, owner and ids, and holds no form of the key nor of the KEK', () => {
    const s = secret();
    const material = Buffer.from(randomBytes(48).toString('base64'));
    const k = new KeyEncryptionKey(material);
    const copy = k.wrap(s, owner);
    expect(parseCopy(copy)).toMatchObject({
      format: WRAPPED_KEY_FORMAT,
      ...owner,
      keyId: fingerprintKeyId(s),
      kekId: k.id,
    });
    const text = Buffer.from(copy);
    for (const needle of [...secretForms(Buffer.from(s, 'base64')), ...secretForms(material)]) {
      expect(text.includes(needle.bytes), needle.form).toBe(false);
    }
    // The ids are not parts of the secrets either.
    expect(Buffer.from(s, 'base64').toString('hex')).not.toContain(fingerprintKeyId(s));
    expect(material.toString('hex')).not.toContain(k.id);
  });

  it('does not unwrap under another KEK, for another deployment or prefix, and says which', () => {
    const copy = kek.wrap(secret(), owner);
    const other = new KeyEncryptionKey(randomBytes(32));
    expect(unreadable(() => other.unwrap(copy, owner))).toContain(`id ${kek.id}`);
    expect(unreadable(() => kek.unwrap(copy, { ...owner, deployment: 'dother' }))).toContain('belongs to deployment');
    expect(unreadable(() => kek.unwrap(copy, { ...owner, prefix: 'other' }))).toContain('belongs to deployment');
  });

  it('any field altered (relabelled to another owner or key id, a flipped bit) does not unwrap', () => {
    const s = secret();
    const copy = parseCopy(kek.wrap(s, owner));
    const flip = (b64: string): string => {
      const b = Buffer.from(b64, 'base64');
      b[0]! ^= 1;
      return b.toString('base64');
    };
    const altered = [
      { ...copy, deployment: 'dother' },
      { ...copy, keyId: fingerprintKeyId(secret()) },
      { ...copy, iv: flip(copy.iv) },
      { ...copy, ciphertext: flip(copy.ciphertext) },
      { ...copy, tag: flip(copy.tag) },
    ];
    for (const a of altered) {
      expect(() => kek.unwrap(JSON.stringify(a), { deployment: a.deployment, prefix: a.prefix })).toThrow(
        UnreadableKeyCopy,
      );
    }
    // Relabelled to another owner: the owner check passes for that owner, the tag does not.
    expect(
      unreadable(() =>
        kek.unwrap(JSON.stringify({ ...copy, deployment: 'dother' }), { ...owner, deployment: 'dother' }),
      ),
    ).toContain('does not authenticate');
    expect(unreadable(() => kek.unwrap('plain-base64-secret', owner))).toContain('not JSON');
    expect(unreadable(() => kek.unwrap('{"format":"x"}', owner))).toContain('not of format');
  });

  it('a KEK needs 32 bytes; its id and the key id are stable and tell keys apart', () => {
    expect(() => new KeyEncryptionKey(Buffer.alloc(31))).toThrow(/32 bytes/);
    const m = randomBytes(32);
    expect(new KeyEncryptionKey(m).id).toBe(new KeyEncryptionKey(Buffer.from(m)).id);
    expect(new KeyEncryptionKey(randomBytes(32)).id).not.toBe(new KeyEncryptionKey(m).id);
    const s = secret();
    expect(fingerprintKeyId(s)).toBe(fingerprintKeyId(s));
    expect(fingerprintKeyId(secret())).not.toBe(fingerprintKeyId(s));
  });
});
