import { MAX_BYTES_PER_CODE_UNIT, MAX_NUMBER_BYTES } from '../core/event-size.js';
import { ReviewSchema } from '../core/review.js';
import type { RejectKind } from './types.js';

// Bounds a record must keep before the schema sees it. Valid JSON can still be absurd (a 3 MB text, an updated_date
// of 2^50, a field nested thousands of levels deep, a `__proto__` key), and every later step (fingerprint, entry
// codec, event building, Kafka) has a limit of its own; checking here, once, keeps each such record to a reject of
// its own instead of an exception that fails its page. The walk is iterative: a nesting depth that would overflow
// the stack of a recursive walk is just another bound.

/** The limits a record must keep to be accepted. */
export interface RecordLimits {
  /** Largest record, in bytes of its JSON serialization. */
  maxRecordBytes: number;
  /** Longest string (value or key), in UTF-16 code units. */
  maxStringLength: number;
  /** Deepest nesting of objects and arrays; the record itself is depth 1. */
  maxDepth: number;
  /** How far past the bridge's clock `updated_date` and `created_date` may be (upstream clock skew). */
  maxFutureSkewMs: number;
}

/** Earliest `updated_date` / `created_date` accepted: 2000-01-01T00:00:00Z. */
export const MIN_DATE_MS = Date.UTC(2000, 0, 1);

/**
 * Exclusive ceiling of any accepted date: the snapshot entry stores `updated_date` in 48 bits. A clock that far
 * off (year 10889) is a broken clock, but the codec must never be handed a value it cannot encode.
 */
export const DATE_CEILING_MS = 2 ** 48;

/** Defaults: 1 MiB records, 64 Ki-character strings, depth 32, one day of clock skew. */
export const DEFAULT_RECORD_LIMITS: RecordLimits = {
  maxRecordBytes: 1024 * 1024,
  maxStringLength: 65_536,
  maxDepth: 32,
  maxFutureSkewMs: 86_400_000,
};

/** Why a record breaks a bound: its kind and a `field:kind` detail without any value. */
export interface BoundsViolation {
  kind: RejectKind;
  detail: string;
}

/** Keys that reach an object's prototype in JavaScript consumers (object merges, `obj[key] = v` copies). */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

const KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(ReviewSchema.shape));
const DATE_FIELDS = ['updated_date', 'created_date'] as const;

/** A top-level field name safe to report: a field of the schema, never a name chosen by the upstream. */
function fieldLabel(key: string | null): string {
  if (key === null) return '(record)';
  return KNOWN_FIELDS.has(key) ? key : '(unknown field)';
}

function violation(kind: RejectKind, field: string | null): BoundsViolation {
  return { kind, detail: `${fieldLabel(field)}:${kind}` };
}

/**
 * Checks a raw record against the limits (iteratively; any depth is safe) and returns the first bound it breaks,
 * or null when it keeps them all. `nowMs` is the bridge's clock, for the future bound of the dates.
 */
export function checkRecordBounds(
  raw: unknown,
  limits: RecordLimits = DEFAULT_RECORD_LIMITS,
  nowMs = Date.now(),
): BoundsViolation | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return violation('malformed', null);
  const structural = walk(raw as Record<string, unknown>, limits);
  if (structural !== null) return structural;
  const record = raw as Record<string, unknown>;
  const id = record.id;
  if (typeof id === 'number' && Number.isInteger(id) && !(id >= 1 && id <= Number.MAX_SAFE_INTEGER)) {
    return violation('id_out_of_range', 'id');
  }
  const latest = Math.min(nowMs + limits.maxFutureSkewMs, DATE_CEILING_MS - 1);
  for (const field of DATE_FIELDS) {
    const value = record[field];
    // Non-integers are left to the schema (a type error, not a range error).
    if (typeof value === 'number' && Number.isInteger(value) && !(value >= MIN_DATE_MS && value <= latest)) {
      return violation('date_out_of_range', field);
    }
  }
  return null;
}

/**
 * Depth, string length, forbidden keys and serialized size in one iterative walk. The size is first bounded from
 * above while walking; only a record whose bound exceeds the limit is serialized to measure it exactly (by then
 * its depth is known to be small, so JSON.stringify is safe).
 */
function walk(root: Record<string, unknown>, limits: RecordLimits): BoundsViolation | null {
  // Each entry: a value, its depth (containers count, the record is 1) and the top-level field it belongs to.
  const stack: { value: unknown; depth: number; field: string | null }[] = [{ value: root, depth: 1, field: null }];
  let upperBytes = 0;
  while (stack.length > 0) {
    const { value, depth, field } = stack.pop()!;
    switch (typeof value) {
      case 'string':
        if (value.length > limits.maxStringLength) return violation('string_too_long', field);
        upperBytes += 2 + value.length * MAX_BYTES_PER_CODE_UNIT;
        continue;
      case 'number':
        upperBytes += MAX_NUMBER_BYTES;
        continue;
      case 'object':
        break;
      default:
        upperBytes += 5;
        continue;
    }
    if (value === null) {
      upperBytes += 4;
      continue;
    }
    if (depth > limits.maxDepth) return violation('too_deep', field);
    upperBytes += 2;
    if (Array.isArray(value)) {
      upperBytes += value.length;
      for (const item of value) stack.push({ value: item, depth: depth + 1, field });
      continue;
    }
    const object = value as Record<string, unknown>;
    for (const key of Object.keys(object)) {
      const owner = field ?? key;
      if (FORBIDDEN_KEYS.has(key)) return violation('forbidden_key', owner);
      if (key.length > limits.maxStringLength) return violation('string_too_long', field);
      upperBytes += 4 + key.length * MAX_BYTES_PER_CODE_UNIT;
      // Strings and numbers (most of a review's fields) are checked here, not pushed: no stack entry for each.
      const member = object[key];
      if (typeof member === 'string') {
        if (member.length > limits.maxStringLength) return violation('string_too_long', owner);
        upperBytes += 2 + member.length * MAX_BYTES_PER_CODE_UNIT;
      } else if (typeof member === 'number') {
        upperBytes += MAX_NUMBER_BYTES;
      } else {
        stack.push({ value: member, depth: depth + 1, field: owner });
      }
    }
  }
  if (upperBytes > limits.maxRecordBytes && Buffer.byteLength(JSON.stringify(root)) > limits.maxRecordBytes) {
    return violation('too_large', null);
  }
  return null;
}
