import { FencedError, SnapshotLostError } from '../core/errors.js';

// What the snapshot store's parts share: the bucket layout of the entries, and how script answers and stored
// numbers are read.

/** Reviews per hash bucket, as a power of two (128: small hashes stay compact listpacks). */
export const BUCKET_BITS = 7;

/** The bucket a review's entry lives in. */
export function bucketOf(id: number): number {
  return Math.floor(id / 2 ** BUCKET_BITS);
}

/** The field of a review's entry within its bucket. */
export function fieldOf(id: number): string {
  return String(id % 2 ** BUCKET_BITS);
}

/**
 * The field that marks a bucket, and the checkpoint, as written by this format: the account's bucket manifest lists
 * every bucket that exists, so a bucket the manifest lists without its marker was lost (a whole key is evicted or
 * deleted, never one field). Review fields are numbers, so the marker never collides with one.
 */
export const MARKER = 'm';

/** The bucket a bucket key names (its last segment). */
export function bucketOfKey(key: string): number {
  return Number(key.slice(key.lastIndexOf(':') + 1));
}

/** A stored number, or null when absent or empty. */
export const num = (v: string | undefined): number | null => (v === undefined || v === '' ? null : Number(v));

/** The error a fenced script answered with, as the orchestration knows it. */
export function scriptError(err: unknown): unknown {
  if (err instanceof Error && err.message.startsWith('FENCED')) return new FencedError(err.message);
  if (err instanceof Error && err.message.startsWith('LOST-PART')) return new SnapshotLostError(err.message, true);
  if (err instanceof Error && err.message.startsWith('LOST')) return new SnapshotLostError(err.message);
  return err;
}

/** Parsed JSON, or null for text that is not JSON (a stored value someone else wrote). */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
