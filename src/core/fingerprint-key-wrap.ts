import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { z } from 'zod';

// The form in which a generated fingerprint key may leave Redis: wrapped (AES-256-GCM, node:crypto) with a
// key-encryption key (KEK) from FINGERPRINT_KEK_FILE that the topic's readers do not have. The record names the
// deployment and key prefix it belongs to, the id of the key it holds and the id of the KEK that wrapped it; all
// four are bound to the ciphertext as associated data, so a copy moved to another deployment or relabelled does
// not unwrap. The ids are HMAC/HKDF outputs of 256-bit secrets: they tell keys apart and reveal nothing of them.

/** Format tag of a wrapped copy (the value's `format`): a new scheme gets a new tag. */
export const WRAPPED_KEY_FORMAT = 'reviews-bridge.fingerprint-key.aes-256-gcm.v1';

/** The value of a wrapped copy record (JSON). */
export const WrappedKeyCopySchema = z.object({
  format: z.literal(WRAPPED_KEY_FORMAT),
  /** The deployment that wrote it (its identity, BRIDGE_DEPLOYMENT_ID or derived). */
  deployment: z.string(),
  /** The Redis key prefix whose key it is. */
  prefix: z.string(),
  /** fingerprintKeyId of the wrapped key. */
  keyId: z.string(),
  /** KeyEncryptionKey.id of the KEK that wrapped it. */
  kekId: z.string(),
  iv: z.string(),
  ciphertext: z.string(),
  tag: z.string(),
});
/** The value of a wrapped copy record. */
export type WrappedKeyCopy = z.infer<typeof WrappedKeyCopySchema>;

/** Whose copy a record is: a copy unwraps only for the deployment and prefix it was written for. */
export interface CopyOwner {
  deployment: string;
  prefix: string;
}

/** A wrapped copy that cannot be unwrapped here (another KEK, another deployment, altered): says which, no secret. */
export class UnreadableKeyCopy extends Error {
  override readonly name = 'UnreadableKeyCopy';
}

/** The public id of a fingerprint key (base64 secret): 64 bits of an HMAC under the key, never the key. */
export function fingerprintKeyId(secret: string): string {
  return createHmac('sha256', Buffer.from(secret, 'base64'))
    .update('reviews-bridge fingerprint key id')
    .digest('hex')
    .slice(0, 16);
}

/** The key-encryption key of FINGERPRINT_KEK_FILE: wraps and unwraps the generated key's copies. */
export class KeyEncryptionKey {
  /** Public id of the KEK (HKDF output, 64 bits): which KEK wrapped a copy, without revealing it. */
  readonly id: string;
  private readonly key: Buffer;

  /** `material`: the file's content, at least 32 bytes (any form: HKDF derives the AES key from it). */
  constructor(material: Buffer) {
    if (material.length < 32) throw new Error('a key-encryption key needs at least 32 bytes');
    this.key = Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), 'reviews-bridge fingerprint key wrap', 32));
    this.id = Buffer.from(
      hkdfSync('sha256', material, Buffer.alloc(0), 'reviews-bridge fingerprint kek id', 8),
    ).toString('hex');
  }

  /** The JSON value of a copy of `secret` (base64) for `owner`. */
  wrap(secret: string, owner: CopyOwner): string {
    const head = { format: WRAPPED_KEY_FORMAT, ...owner, keyId: fingerprintKeyId(secret), kekId: this.id } as const;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(associatedData(head));
    const ciphertext = Buffer.concat([cipher.update(Buffer.from(secret, 'base64')), cipher.final()]);
    const copy: WrappedKeyCopy = {
      ...head,
      iv: iv.toString('base64'),
      ciphertext: ciphertext.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
    };
    return JSON.stringify(copy);
  }

  /** The secret (base64) of a copy written for `owner` under this KEK; UnreadableKeyCopy when it is not one. */
  unwrap(value: string, owner: CopyOwner): string {
    const copy = parseCopy(value);
    if (copy.kekId !== this.id) {
      throw new UnreadableKeyCopy(
        `the fingerprint key copy is wrapped with another key-encryption key (id ${copy.kekId}) than FINGERPRINT_KEK_FILE's (id ${this.id})`,
      );
    }
    if (copy.deployment !== owner.deployment || copy.prefix !== owner.prefix) {
      throw new UnreadableKeyCopy(
        `the fingerprint key copy belongs to deployment ${copy.deployment} (prefix ${copy.prefix}), not ${owner.deployment} (prefix ${owner.prefix})`,
      );
    }
    let key: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(copy.iv, 'base64'));
      decipher.setAAD(associatedData(copy));
      decipher.setAuthTag(Buffer.from(copy.tag, 'base64'));
      key = Buffer.concat([decipher.update(Buffer.from(copy.ciphertext, 'base64')), decipher.final()]);
    } catch {
      throw new UnreadableKeyCopy('the fingerprint key copy does not authenticate under FINGERPRINT_KEK_FILE');
    }
    const secret = key.toString('base64');
    if (fingerprintKeyId(secret) !== copy.keyId) {
      throw new UnreadableKeyCopy('the fingerprint key copy holds another key than its key id names');
    }
    return secret;
  }
}

/** The header fields of a wrapped copy (its JSON value), or UnreadableKeyCopy when it is none. */
export function parseCopy(value: string): WrappedKeyCopy {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    throw new UnreadableKeyCopy('the fingerprint key copy is not JSON');
  }
  const parsed = WrappedKeyCopySchema.safeParse(json);
  if (!parsed.success) throw new UnreadableKeyCopy(`the fingerprint key copy is not of format ${WRAPPED_KEY_FORMAT}`);
  return parsed.data;
}

// What the tag authenticates beside the key: every field a reader acts on.
function associatedData(head: Pick<WrappedKeyCopy, 'format' | 'deployment' | 'prefix' | 'keyId' | 'kekId'>): Buffer {
  return Buffer.from(JSON.stringify([head.format, head.deployment, head.prefix, head.keyId, head.kekId]), 'utf8');
}
