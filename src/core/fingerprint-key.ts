import { createCipheriv, createHash, hash } from 'node:crypto';

// The secret that keys every fingerprint leaving the process (snapshot entries in the Kafka changelog, event ids
// built from them). An unkeyed digest of a review whose e-mail address is dropped from the events still lets anyone
// who reads an id or a changelog row confirm a guessed address by recomputing it; keyed, nobody without the key can.
//
// Two keyed functions, chosen for the page path's cost (every review of every page is fingerprinted):
// - the 64-bit content digest is SHA-256 over (key, text), truncated: a PRF for a truncated output (no length
//   extension is possible without the full state), one native call, where createHmac costs ~10x more per review;
// - each 16-bit per-field hash is the value's 16-bit hash XORed with a pad of its review and field, then put through
//   a secret permutation of the 16-bit space per field, drawn from an AES-CTR keystream of the key. The pads (one
//   SHA-512 of the key and the review id gives all 32) make the hash of a value differ from review to review, so an
//   e-mail address found in many reviews does not link them; the permutation keeps two values of one review from
//   being related by XOR. One native call per review whose hashes are computed, and a table lookup per field.

/** Number of per-field hash slots (the tracked fields and one for all others): one permutation table each. */
const MAX_FIELDS = 32;

/** A fingerprint key: its id (stored with every entry, so entries of another key are recognised) and its functions. */
export class FingerprintKey {
  /** 16-bit id of the key: entries stored under another key are not compared digest to digest. */
  readonly id: number;
  /** What the keyed digest puts before a text: the secret itself (never log it), public for fingerprintSource. */
  readonly prefix: string;
  private readonly tables: Uint16Array[] = [];
  // What the per-review pads hash before a review id: another hash function and separator than the digest's.
  private readonly padPrefix: string;

  constructor(private readonly secret: Buffer) {
    if (secret.length < 16) throw new Error('a fingerprint key needs at least 16 bytes');
    this.id = hash('sha256', Buffer.concat([Buffer.from('reviews-bridge key id\0'), secret]), 'buffer').readUInt16BE(0);
    this.prefix = `${secret.toString('base64')}\u0000`;
    this.padPrefix = `${secret.toString('base64')}\u0001field pads\u0000`;
  }

  /** The keyed 64-bit digest (hex) of a text. */
  digest(text: string): string {
    return this.digestPrefixed(this.prefix + text);
  }

  /**
   * `digest` of a text that already starts with `prefix`: a text built with it is flattened once for the hash,
   * where prefix + text would copy it again.
   */
  digestPrefixed(prefixed: string): string {
    return hash('sha256', prefixed, 'hex').slice(0, 16);
  }

  /** The keyed 64-bit digest (hex) of a text given in chunks: equal to `digest` of the chunks joined. */
  digestChunks(chunks: Iterable<string>): string {
    const h = createHash('sha256').update(this.prefix);
    for (const chunk of chunks) h.update(chunk);
    return h.digest('hex').slice(0, 16);
  }

  /**
   * The keyed images of a review's field hashes (`raw[slot]` for each slot), keyed per review: an equal value gives
   * unrelated hashes in two reviews. Writes them into `raw`.
   */
  reviewFieldHashes(reviewId: number, raw: number[]): number[] {
    if (raw.length > MAX_FIELDS) throw new Error(`${raw.length} field slots, at most ${MAX_FIELDS}`);
    // The digest as a 'binary' (latin1) string, read by char codes (one per byte): hash()'s Buffer output costs
    // about as much again as the hash of so short a text (one SHA-512 block), hex about half as much again.
    const pads = hash('sha512', this.padPrefix + String(reviewId), 'binary');
    for (let slot = 0; slot < raw.length; slot++) {
      const pad = (pads.charCodeAt(2 * slot) << 8) | pads.charCodeAt(2 * slot + 1);
      raw[slot] = (this.tables[slot] ?? this.table(slot))[(raw[slot]! ^ pad) & 0xffff]!;
    }
    return raw;
  }

  /**
   * The keyed image of field `slot`'s 16-bit hash in the form of entry format 2 (the same in every review): only to
   * compare with entries written before per-review hashes.
   */
  fieldHash(slot: number, value: number): number {
    return (this.tables[slot] ?? this.table(slot))[value & 0xffff]!;
  }

  // Fisher-Yates over the 16-bit space with randomness from AES-256-CTR(key): computed once per slot (128 KiB).
  private table(slot: number): Uint16Array {
    if (slot < 0 || slot >= MAX_FIELDS) throw new Error(`field slot ${slot} out of range`);
    let table = this.tables[slot];
    if (table) return table;
    table = new Uint16Array(65_536);
    for (let i = 0; i < table.length; i++) table[i] = i;
    const aesKey = hash(
      'sha256',
      Buffer.concat([Buffer.from(`reviews-bridge field ${slot}\0`), this.secret]),
      'buffer',
    );
    const cipher = createCipheriv('aes-256-ctr', aesKey, Buffer.alloc(16));
    const stream = cipher.update(Buffer.alloc(table.length * 4));
    const words = new DataView(stream.buffer, stream.byteOffset, stream.byteLength);
    // `>>> 0` on both sides types the modulo as unsigned 32-bit for V8: readUInt32LE's value and `%` on it as
    // doubles cost twice as long (a key's 17 tables took 29-37 ms instead of 15-22, and every process builds them).
    for (let i = table.length - 1; i > 0; i--) {
      const j = (words.getUint32(i * 4, true) >>> 0) % ((i + 1) >>> 0);
      const t = table[i]!;
      table[i] = table[j]!;
      table[j] = t;
    }
    this.tables[slot] = table;
    return table;
  }
}

/** Where a process gets its key: loaded once; a generated key is put back into a store that lost it. */
export interface FingerprintKeySource {
  get(): Promise<FingerprintKey>;
  /**
   * Checks a generated key against its store: writes it back to a store that lost it, and takes the store's key
   * when another process's is there (a no-op for a key file). `recheck`: the changelog topic may be new (a full
   * restore: a first start, a reset, lost keys), so its copy is read again instead of trusting Redis's note that
   * it was written (the note names the topic, not the topic's incarnation).
   */
  persist(recheck?: boolean): Promise<void>;
}

/**
 * The durable copy of a generated key beside Redis (a record of the changelog topic, wrapped with a key-encryption
 * key): a Redis that loses the key gets the same one back from it instead of a new key that could not be compared
 * with the stored fingerprints.
 */
export interface FingerprintKeyCopy {
  /** Names where the copy is kept (cluster, topic, wrapping key): one copy per name. */
  readonly name: string;
  /**
   * The secret (base64) last copied, or null when none ever was; rejects with UnreadableKeyCopy
   * (src/core/fingerprint-key-wrap.ts) when the last copy cannot be unwrapped here.
   */
  read(): Promise<string | null>;
  /** Copies the secret (base64); resolves once it is durable. */
  write(secret: string): Promise<void>;
}

/** The plain copy of a generated key that earlier versions kept beside Redis: recovered from, then tombstoned. */
export interface LegacyKeyCopy {
  /** Names where it is kept (cluster and topic). */
  readonly name: string;
  /** The plain secret (base64) it holds, or null (none, or tombstoned). */
  read(): Promise<string | null>;
  /** Tombstones a plain copy still there; true when there was one. */
  retire(): Promise<boolean>;
}
