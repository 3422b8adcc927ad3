import { createHash } from 'node:crypto';
import type { FingerprintKey } from './fingerprint-key.js';

// A digest of a raw upstream record for the once-a-day memory of dead letters. A rejected record may be nested far
// deeper than JSON.stringify's recursion survives (a RangeError at some ten thousand levels), and hashing must not
// fail the page it belongs to; so the JSON text is produced by an explicit stack, chunk by chunk, into the hash.
// The text is byte for byte what JSON.stringify gives for parsed JSON, so digests already remembered stay valid.

/** Characters buffered before they are handed to the hash (fewer, larger update calls). */
const CHUNK_CHARS = 64 * 1024;

type Work = { text: string } | { value: unknown; inArray: boolean };

/**
 * The JSON text of a value parsed from JSON, in chunks, without recursion (any depth). Equal to JSON.stringify for
 * such values (key order, escaping, `undefined` members dropped, `null` in arrays); `toJSON` is not consulted.
 */
export function* jsonChunks(value: unknown): Generator<string, void, void> {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') {
    yield 'undefined';
    return;
  }
  const stack: Work[] = [{ value, inArray: false }];
  let out = '';
  while (stack.length > 0) {
    const work = stack.pop()!;
    if ('text' in work) {
      out += work.text;
    } else {
      out += scalar(work.value, work.inArray) ?? open(work.value as object, stack);
    }
    if (out.length >= CHUNK_CHARS) {
      yield out;
      out = '';
    }
  }
  if (out.length > 0) yield out;
}

/** Hex SHA-1 of the value's JSON text (as JSON.stringify would write it), at any nesting depth. */
export function recordDigest(value: unknown): string {
  const hash = createHash('sha1');
  for (const chunk of jsonChunks(value)) hash.update(chunk);
  return hash.digest('hex');
}

/**
 * The keyed digest of a raw record's JSON text (any depth): what the bridge may remember of a record that could not
 * be read (in the checkpoint, in Kafka), since a plain hash of personal data lets a guess be confirmed.
 */
export function keyedRecordDigest(value: unknown, key: Pick<FingerprintKey, 'digestChunks'>): string {
  return key.digestChunks(jsonChunks(value));
}

// The text of a non-container, or null for an object or array.
function scalar(value: unknown, inArray: boolean): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'bigint':
      return String(value);
    case 'undefined':
    case 'function':
    case 'symbol':
      return inArray ? 'null' : '';
    default:
      return value === null ? 'null' : null;
  }
}

// Emits the opening bracket and schedules the members and the closing bracket (pushed in reverse: LIFO).
function open(container: object, stack: Work[]): string {
  if (Array.isArray(container)) {
    stack.push({ text: ']' });
    for (let i = container.length - 1; i >= 0; i--) {
      stack.push({ value: container[i], inArray: true });
      if (i > 0) stack.push({ text: ',' });
    }
    return '[';
  }
  const record = container as Record<string, unknown>;
  const keys = Object.keys(record).filter((k) => {
    const t = typeof record[k];
    return t !== 'undefined' && t !== 'function' && t !== 'symbol';
  });
  stack.push({ text: '}' });
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    stack.push({ value: record[key], inArray: false });
    stack.push({ text: `${i > 0 ? ',' : ''}${JSON.stringify(key)}:` });
  }
  return '{';
}
