import { KNOWN_STATUSES } from './domain.js';
import { hash } from 'node:crypto';
import type { FingerprintKey } from './fingerprint-key.js';
import { TRACKED_FIELDS, type Review } from './review.js';

// One compact snapshot entry per review. Kept at or under 64 bytes for the usual status values so that Redis
// stores the account's buckets as listpacks (hash-max-listpack-value defaults to 64): that is what keeps ten
// million reviews within a modest Redis.

/** What the bridge remembers of a review between passes. */
export interface SnapshotEntry {
  client: string;
  pwr: string;
  /** The review's updated_date (ms) when last seen; reads older than this are stale. */
  updatedDate: number;
  /** Last per-review sequence number published (0 when the created event was suppressed). */
  sequence: number;
  /** When the page that last changed this entry was fetched (ms): an older page cannot overwrite its edits. */
  observedAt: number;
  /** 8-byte digest (hex) of every non-status field: detects any edit. */
  digest: string;
  /** 16-bit hash per tracked field plus one for unknown fields: names what an edit changed. */
  fieldHashes: number[];
  /** Id of the key the digest and field hashes were made with; null: unkeyed (an entry written before keys). */
  keyId: number | null;
  /**
   * 'slot': the field hashes are keyed per field only (entry format 2, written before per-review hashes: an equal
   * value has an equal hash in every review); compared with the old function and rewritten. Absent: per review.
   */
  fieldHashForm?: 'slot';
}

/** Field names in fingerprint order; the last slot stands for every field the spec does not list. */
export const FINGERPRINT_FIELDS: readonly string[] = [...TRACKED_FIELDS, '(other)'];

/** The fields the spec lists: the tracked ones and those the fingerprint leaves out (id, date, statuses). */
const LISTED = new Set<string>([
  'id',
  'updated_date',
  'client_publication_status',
  'pwr_publication_status',
  ...TRACKED_FIELDS,
]);
const STATUS_CODES = ['', ...KNOWN_STATUSES] as const;
/**
 * Format 1: unkeyed fingerprints (written before keys); format 2 adds the key id; format 3 (the same layout) has
 * field hashes keyed per review. Earlier formats are still read, and written back as they were read.
 */
const UNKEYED_VERSION = 1;
const SLOT_KEYED_VERSION = 2;
const VERSION = 3;

/** The content part of an entry, computed from a review alone (pure, used by the diff). */
export interface Fingerprint {
  digest: string;
  fieldHashes: number[];
  /** The key's id, or null for the unkeyed form (only to compare with entries written before keys). */
  keyId: number | null;
}

// FNV-1a, folded to 16 bits, of the part text[start, end).
function fnv16(text: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return ((h >>> 16) ^ h) & 0xffff;
}

// A canonical, type-tagged text of a field value: cheaper than JSON.stringify for the usual strings and numbers
// (this runs for every field of every review of every pass), and "1" and 1 still differ. JSON.stringify recurses,
// which is safe here because only validated reviews are fingerprinted and validation bounds their nesting depth
// (src/upstream/bounds.ts, maxDepth); the output must not change, or every stored digest would read as an edit.
// The text is the tag followed by the body; missing and null have neither.
function tagOf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return 's';
    case 'number':
      return 'n';
    case 'boolean':
      return value ? 't' : 'f';
    case 'undefined':
      return '';
    default:
      return value === null ? '' : 'j';
  }
}

function bodyOf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      return String(value);
    case 'object':
      return value === null ? '' : JSON.stringify(value);
    default:
      return '';
  }
}

/** The body of the last slot: every field the spec does not list, sorted by name ('' when there is none). */
function othersBody(record: Record<string, unknown>): string {
  let others: string[] | null = null;
  for (const k in record) {
    if (LISTED.has(k) || record[k] === undefined || record[k] === null) continue;
    (others ??= []).push(k);
  }
  return others === null ? '' : JSON.stringify(others.sort().map((k) => [k, record[k]]));
}

/**
 * The canonical text of a review's non-status fields (one part per FINGERPRINT_FIELDS slot, joined by NUL) and
 * where each part ends in it: the content digest is made of the text, the per-field hashes of the parts, and only
 * when an entry is stored (an unchanged review needs the digest alone).
 */
export interface FingerprintSource {
  /**
   * The key's prefix (none when unkeyed), then the canonical text: the keyed digest hashes it as it is. It holds
   * the key's secret: never log or keep a source.
   */
  text: string;
  /** The end (exclusive) of each slot's part in `text`; a part starts one past the previous end (after its NUL). */
  ends: number[];
  /** The key `text` is prefixed for (null: none). */
  key: FingerprintKey | null;
}

/** The fingerprint source of a review for `key`'s digest (missing and null count as the same value). */
export function fingerprintSource(review: Review, key: FingerprintKey | null = null): FingerprintSource {
  const record = review as Record<string, unknown>;
  const ends = new Array<number>(TRACKED_FIELDS.length + 1);
  // Concatenated: the digest is a native hash that flattens the text once (cheaper than parts joined from an array).
  let text = key ? key.prefix : '';
  for (let i = 0; i < TRACKED_FIELDS.length; i++) {
    const value = record[TRACKED_FIELDS[i]!];
    text += tagOf(value) + bodyOf(value);
    ends[i] = text.length;
    text += '\u0000';
  }
  text += othersBody(record);
  ends[TRACKED_FIELDS.length] = text.length;
  return { text, ends, key };
}

// Where the canonical text starts in a source's text: after its key's prefix.
function textStart(source: FingerprintSource): number {
  return source.key ? source.key.prefix.length : 0;
}

/** The 64-bit content digest (hex) of a fingerprint source, keyed with `key` (null: the unkeyed form). */
export function contentDigest(source: FingerprintSource, key: FingerprintKey | null): string {
  if (key === null) return hash('md5', source.text.slice(textStart(source)), 'hex').slice(0, 16);
  if (key !== source.key) throw new Error('fingerprint source made for another key');
  return key.digestPrefixed(source.text);
}

// The unkeyed 16-bit hash of each slot's part.
function rawFieldHashes(source: FingerprintSource): number[] {
  const { text, ends } = source;
  const hashes = new Array<number>(ends.length);
  let start = textStart(source);
  for (let i = 0; i < ends.length; i++) {
    hashes[i] = fnv16(text, start, ends[i]!);
    start = ends[i]! + 1;
  }
  return hashes;
}

/**
 * The 16-bit hash per field slot of review `reviewId`'s fingerprint source, keyed per review with `key` (null: the
 * unkeyed form).
 */
export function fieldHashesOf(source: FingerprintSource, key: FingerprintKey | null, reviewId: number): number[] {
  const raw = rawFieldHashes(source);
  return key ? key.reviewFieldHashes(reviewId, raw) : raw;
}

/** The field hashes in the form of entry format 2 (keyed per field, not per review): to compare with such entries. */
export function slotFieldHashesOf(source: FingerprintSource, key: FingerprintKey): number[] {
  const raw = rawFieldHashes(source);
  for (let i = 0; i < raw.length; i++) raw[i] = key.fieldHash(i, raw[i]!);
  return raw;
}

/**
 * Fingerprints a review's non-status fields (missing and null count as the same value), keyed with `key`; without
 * a key, the unkeyed form that entries written before keys hold.
 */
export function fingerprint(review: Review, key: FingerprintKey | null = null): Fingerprint {
  const source = fingerprintSource(review, key);
  return {
    digest: contentDigest(source, key),
    fieldHashes: fieldHashesOf(source, key, review.id),
    keyId: key ? key.id : null,
  };
}

/** The digest of a review's state (updated_date, statuses, content) that event ids are built from. */
export function entryStateDigest(entry: Pick<SnapshotEntry, 'updatedDate' | 'client' | 'pwr' | 'digest'>): string {
  return `${entry.updatedDate}|${entry.client}|${entry.pwr}|${entry.digest}`;
}

function statusSize(status: string): number {
  return STATUS_CODES.indexOf(status as (typeof STATUS_CODES)[number]) > 0 ? 1 : 2 + Buffer.byteLength(status);
}

function writeStatus(buf: Buffer, offset: number, status: string): number {
  const code = STATUS_CODES.indexOf(status as (typeof STATUS_CODES)[number]);
  if (code > 0) {
    buf[offset] = code;
    return offset + 1;
  }
  const bytes = Buffer.from(status, 'utf8');
  if (bytes.length > 255) throw new Error('status value longer than 255 bytes');
  buf[offset] = 0;
  buf[offset + 1] = bytes.length;
  bytes.copy(buf, offset + 2);
  return offset + 2 + bytes.length;
}

// A status at `offset`: a code byte, or 0, a length byte and the UTF-8 text. statusEnd says where it ends.
function readStatus(buf: Buffer, offset: number): string {
  const code = buf[offset]!;
  if (code > 0) return STATUS_CODES[code] ?? '';
  return buf.toString('utf8', offset + 2, offset + 2 + buf[offset + 1]!);
}

function statusEnd(buf: Buffer, offset: number): number {
  return buf[offset]! > 0 ? offset + 1 : offset + 2 + buf[offset + 1]!;
}

/**
 * Serialises an entry to its compact binary form, after a `lead` byte when one is given (the changelog's flag:
 * one buffer instead of a concatenation). Throws for an entry that cannot be stored (a status over 255 bytes, a
 * number out of its field's range).
 */
export function encodeEntry(entry: SnapshotEntry, lead: number | null = null): Buffer {
  const keyed = entry.keyId !== null;
  const size =
    (lead === null ? 0 : 1) +
    1 +
    (keyed ? 2 : 0) +
    statusSize(entry.client) +
    statusSize(entry.pwr) +
    6 +
    6 +
    4 +
    8 +
    entry.fieldHashes.length * 2;
  // From Node's pool, unzeroed (a zero-filled allocation of its own per entry cost more than the rest): every
  // byte is written below, the digest's bytes too (zeros past a short or non-hex digest, as before).
  const buf = Buffer.allocUnsafe(size);
  let o = 0;
  if (lead !== null) buf[o++] = lead;
  buf[o++] = !keyed ? UNKEYED_VERSION : entry.fieldHashForm === 'slot' ? SLOT_KEYED_VERSION : VERSION;
  if (entry.keyId !== null) {
    buf.writeUInt16BE(entry.keyId, o);
    o += 2;
  }
  o = writeStatus(buf, o, entry.client);
  o = writeStatus(buf, o, entry.pwr);
  buf.writeUIntBE(entry.updatedDate, o, 6);
  o += 6;
  buf.writeUIntBE(Math.max(0, Math.floor(entry.observedAt)), o, 6);
  o += 6;
  buf.writeUInt32BE(entry.sequence, o);
  o += 4;
  writeDigest(buf, o, entry.digest);
  o += 8;
  // Byte stores (writeUInt16BE checks and converts per call); the range check kept for a value that is not a hash.
  for (const h of entry.fieldHashes) {
    if ((h & 0xffff) !== h) throw new RangeError(`field hash ${h} out of range`);
    buf[o++] = h >>> 8;
    buf[o++] = h & 0xff;
  }
  return buf;
}

// The value of a hex digit's char code, or -1.
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

// The digest's 8 bytes: read directly when it is 16 hex digits (always, from contentDigest); otherwise as
// Buffer.write does (up to the first non-hex pair), zeros after it.
function writeDigest(buf: Buffer, o: number, digest: string): void {
  if (digest.length === 16) {
    let i = 0;
    for (; i < 8; i++) {
      const hi = hexDigit(digest.charCodeAt(2 * i));
      const lo = hexDigit(digest.charCodeAt(2 * i + 1));
      if (hi < 0 || lo < 0) break;
      buf[o + i] = (hi << 4) | lo;
    }
    if (i === 8) return;
  }
  const written = buf.write(digest, o, 8, 'hex');
  if (written < 8) buf.fill(0, o + written, o + 8);
}

/** Parses an entry written by encodeEntry; throws on an unknown version so a format change cannot go unnoticed. */
export function decodeEntry(buf: Buffer): SnapshotEntry {
  const version = buf[0];
  if (version !== VERSION && version !== SLOT_KEYED_VERSION && version !== UNKEYED_VERSION)
    throw new Error(`unknown snapshot entry version ${version}`);
  let o = 1;
  let keyId: number | null = null;
  if (version !== UNKEYED_VERSION) {
    keyId = buf.readUInt16BE(o);
    o += 2;
  }
  // Read for every review of every page (most of a sweep is unchanged reviews): no tuple per status, and the
  // hashes' array made at its size.
  const client = readStatus(buf, o);
  o = statusEnd(buf, o);
  const pwr = readStatus(buf, o);
  o = statusEnd(buf, o);
  const updatedDate = buf.readUIntBE(o, 6);
  o += 6;
  const observedAt = buf.readUIntBE(o, 6);
  o += 6;
  const sequence = buf.readUInt32BE(o);
  o += 4;
  const digest = buf.toString('hex', o, o + 8);
  o += 8;
  const fieldHashes = new Array<number>(Math.max(0, (buf.length - o) >> 1));
  for (let i = 0; i < fieldHashes.length; i++, o += 2) fieldHashes[i] = (buf[o]! << 8) | buf[o + 1]!;
  const entry: SnapshotEntry = { client, pwr, updatedDate, sequence, observedAt, digest, fieldHashes, keyId };
  if (version === SLOT_KEYED_VERSION) entry.fieldHashForm = 'slot';
  return entry;
}
