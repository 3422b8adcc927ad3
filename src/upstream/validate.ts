import { KNOWN_STATUSES as KNOWN_STATUS_NAMES } from '../core/domain.js';
import type { z } from 'zod';
import {
  optionalInt,
  optionalString,
  PublicationStatus,
  ReviewSchema,
  STATUS_FIELDS,
  type Review,
} from '../core/review.js';
import type { Reject, RejectKind, UpstreamHooks } from './types.js';
import { UpstreamError } from './errors.js';
import { DEFAULT_RECORD_LIMITS, checkRecordBounds, type RecordLimits } from './bounds.js';

// Validation is record by record: one bad record never fails its page, it becomes a Reject beside the valid
// reviews. First the bounds (size, depth, string length, keys, id and date ranges; see bounds.ts), then the schema.
// Each check names its own reject kind; details are built from known field names and check or zod issue codes
// only, never from values, so they can go to logs, metric labels and the dead-letter topic without personal data.

/** Publication statuses the spec names; others are accepted and counted. Compared case-insensitively. */
export const KNOWN_STATUSES: ReadonlySet<string> = new Set(KNOWN_STATUS_NAMES);

/** The records of a page after validation. */
export interface ValidatedRecords {
  reviews: Review[];
  rejects: Reject[];
}

/**
 * Returns the `reviews` array of a listing envelope; anything else is a body error (retried, as a proxy or a
 * half-deployed upstream may answer 200 with something that is not the listing).
 */
export function listingRecords(envelope: unknown): unknown[] {
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) {
    const got = envelope === null ? 'null' : Array.isArray(envelope) ? 'an array' : `a ${typeof envelope}`;
    throw new UpstreamError('body', `listing response is ${got}, not an object with a reviews array`, {
      endpoint: 'reviews',
    });
  }
  const records = (envelope as { reviews?: unknown }).reviews;
  if (!Array.isArray(records)) {
    const got = records === undefined ? 'missing' : records === null ? 'null' : `a ${typeof records}`;
    throw new UpstreamError('body', `listing response has no reviews array (reviews is ${got})`, {
      endpoint: 'reviews',
    });
  }
  return records;
}

/** One `path:code` per zod issue (e.g. `updated_date:invalid_type`), deduplicated, never a value. */
export function issueCodes(error: z.ZodError): string[] {
  const codes = error.issues.map((issue) => {
    const path = issue.path.length === 0 ? '(record)' : issue.path.map(String).join('.');
    return `${path}:${issue.code}`;
  });
  return [...new Set(codes)];
}

/** The id of a rejected record when it can be read, for the dead-letter key; never more than a short token. */
export function rejectId(raw: unknown): string | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const id = (raw as { id?: unknown }).id;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  if (typeof id === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(id)) return id;
  return null;
}

/** What validation needs besides the records: the bounds and the clock the date bounds are relative to. */
export interface ValidationOptions {
  limits?: RecordLimits;
  /** Milliseconds since the epoch; default Date.now. */
  clock?: () => number;
}

/**
 * Validates each record against the bounds, then ReviewSchema; reports each reject (by kind) and each status
 * outside the known set through the hooks.
 */
export function validateRecords(
  records: readonly unknown[],
  hooks: Pick<UpstreamHooks, 'onReject' | 'onUnknownStatus'> = {},
  options: ValidationOptions = {},
): ValidatedRecords {
  const reviews: Review[] = [];
  const rejects: Reject[] = [];
  const limits = options.limits ?? DEFAULT_RECORD_LIMITS;
  const now = (options.clock ?? Date.now)();
  let position = 0;
  const reject = (raw: unknown, reason: RejectKind, detail: string): void => {
    rejects.push({ id: rejectId(raw), reason, detail, raw, position });
    hooks.onReject?.(reason);
  };
  for (let index = 0; index < records.length; index++) {
    const raw = records[index];
    position = index;
    const violation = checkRecordBounds(raw, limits, now);
    if (violation !== null) {
      reject(raw, violation.kind, violation.detail);
      continue;
    }
    let review = plainReview(raw);
    if (review === null) {
      const result = ReviewSchema.safeParse(raw);
      if (!result.success) {
        reject(raw, 'schema', issueCodes(result.error).join(', '));
        continue;
      }
      review = result.data;
    }
    for (const field of STATUS_FIELDS) {
      // Exact first: statuses come upper-case, and toUpperCase makes a new string each time.
      const status = review[field];
      if (!KNOWN_STATUSES.has(status) && !KNOWN_STATUSES.has(status.toUpperCase())) hooks.onUnknownStatus?.(field);
    }
    reviews.push(review);
  }
  return { reviews, rejects };
}

// The fast path of validation. Almost every record is a plain one that ReviewSchema accepts at once: its fields
// are checked here directly and the review built as zod builds it (the schema's present keys in the schema's
// order, then the unknown keys in the record's order, without `__proto__`; values as they are). Anything else
// (a failure, a value undefined, a schema field of a kind not listed below) is left to zod, which also names the
// issues. test/unit/upstream/validate-fast-path.test.ts checks it against ReviewSchema on random records.
type FieldKind = 'natural' | 'status' | 'string?' | 'int?';

const SHAPE = ReviewSchema.shape;
const FIELD_KEYS: readonly string[] = Object.keys(SHAPE);
const FIELD_KINDS: ReadonlyArray<FieldKind | null> = Object.values(SHAPE).map((schema) => {
  if (schema === SHAPE.id || schema === SHAPE.updated_date) return 'natural';
  if (schema === PublicationStatus) return 'status';
  if (schema === optionalString) return 'string?';
  if (schema === optionalInt) return 'int?';
  return null;
});
const SHAPE_KEYS: ReadonlySet<string> = new Set(Object.keys(SHAPE));

function fits(kind: FieldKind, value: unknown): boolean {
  switch (kind) {
    case 'natural':
      return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
    case 'status':
      return typeof value === 'string' && value.length >= 1 && value.length <= 64;
    case 'string?':
      return value === null || typeof value === 'string';
    case 'int?':
      return value === null || (typeof value === 'number' && Number.isSafeInteger(value));
  }
}

/** The review ReviewSchema.safeParse would return for `raw` when it surely accepts it; else null (ask zod). */
export function plainReview(raw: unknown): Review | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const record = raw as Record<string, unknown>;
  let present = 0;
  for (let i = 0; i < FIELD_KEYS.length; i++) {
    const key = FIELD_KEYS[i]!;
    const kind = FIELD_KINDS[i] ?? null;
    const value = record[key];
    // Only an undefined value needs `in`: absent (an optional field may be) or present as undefined (zod's call).
    if (value === undefined && !(key in record)) {
      if (kind === 'string?' || kind === 'int?') continue;
      return null;
    }
    if (kind === null || !fits(kind, value)) return null;
    present++;
  }
  // The usual record has every schema field and nothing else: built by one object literal, which is ~20x cheaper
  // than a property added at a time and gives every review the same compact shape (faster to read downstream).
  let keys = 0;
  for (const _ in record) keys++;
  if (present === FIELD_KEYS.length && keys === present) return fullReview(record) as Review;
  const review: Record<string, unknown> = {};
  for (let i = 0; i < FIELD_KEYS.length; i++) {
    const key = FIELD_KEYS[i]!;
    if (key in record) review[key] = record[key];
  }
  for (const key in record) {
    if (SHAPE_KEYS.has(key) || key === '__proto__') continue;
    const value = record[key];
    if (value === undefined) return null;
    review[key] = value;
  }
  return review as Review;
}

/**
 * A review with every schema field, in the schema's order (as zod builds it). Written out so that V8 builds it in
 * one step; the return type makes the compiler name a field missing or extra here, and validate-fast-path.test.ts
 * checks the order against ReviewSchema.
 */
export function fullReview(r: Record<string, unknown>): { [K in keyof typeof SHAPE]: unknown } {
  return {
    id: r.id,
    updated_date: r.updated_date,
    client_publication_status: r.client_publication_status,
    pwr_publication_status: r.pwr_publication_status,
    headline: r.headline,
    rating: r.rating,
    comments: r.comments,
    nickname: r.nickname,
    email: r.email,
    location: r.location,
    bottom_line: r.bottom_line,
    locale: r.locale,
    type: r.type,
    product_page_id: r.product_page_id,
    merchant_group_id: r.merchant_group_id,
    merchant_id: r.merchant_id,
    created_date: r.created_date,
    helpful_votes: r.helpful_votes,
    not_helpful_votes: r.not_helpful_votes,
    review_source: r.review_source,
  };
}
