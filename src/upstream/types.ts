import type { RequestPriority } from '../core/domain.js';
import type { Review } from '../core/review.js';

/**
 * Why a record is rejected or dead-lettered: a closed set, decided where the check is made (never parsed back out
 * of message text), so it can be a metric label and a dead-letter reason without carrying any value.
 */
export const REJECT_KINDS = [
  /** Not a JSON object at all (a string, an array, null). */
  'malformed',
  /** An object that fails the review schema (a required field missing or of the wrong type). */
  'schema',
  /** Too many serialized bytes: the record (validation) or its event (Kafka's message size limit). */
  'too_large',
  /** Nested deeper than the bound (checked without recursion). */
  'too_deep',
  /** A string longer than the per-field bound. */
  'string_too_long',
  /** `updated_date` or `created_date` before 2000-01-01 or further in the future than the allowed skew. */
  'date_out_of_range',
  /** `id` not a positive safe integer. */
  'id_out_of_range',
  /** A `__proto__`, `constructor` or `prototype` key anywhere in the record. */
  'forbidden_key',
  /** A per-record processing step (fingerprint, diff, event building, entry encoding) threw. */
  'processing_failed',
  /** A page kept failing and bisection isolated this record. */
  'quarantined',
] as const;

/** One reject kind (see REJECT_KINDS). */
export type RejectKind = (typeof REJECT_KINDS)[number];

/** A record of a page that failed validation: kept apart so one bad record never fails its page. */
export interface Reject {
  /** Review id when it could be read (for the dead-letter key), otherwise null. */
  id: string | null;
  /** Why it failed: the bounded kind (metric label, dead-letter reason). */
  reason: RejectKind;
  /**
   * Where it failed, for people: `field:check` items such as `updated_date:date_out_of_range` or
   * `rating:invalid_type` (known field names and check names only, never values or unknown field names).
   */
  detail: string;
  /** The raw record as received, for the dead-letter topic. */
  raw: unknown;
}

/** One page of the listing as the bridge sees it. */
export interface Page {
  /** The cursor this page was fetched with (null for the first page). */
  cursor: string | null;
  /** Cursor of the next page, or null when this was the last one. */
  nextCursor: string | null;
  /** The valid reviews of this page. */
  reviews: Review[];
  /** The records of this page that failed validation. */
  rejects: Reject[];
  /**
   * When the request for this page was sent (ms since epoch). Pages may be prefetched, so the bridge needs the
   * fetch time, not the time it gets the page, to know which of two reads of an unchanged updated_date is newer.
   */
  fetchedAt: number;
}

/** Which kind of pass issues a request; incremental polls get priority in the rate limiter. */
export type PassKind = RequestPriority;

/** What a pass asks the upstream for. */
export interface ListOptions {
  /** Lower bound of `updated_date` in milliseconds (converted to the configured unit); omitted for a full sweep. */
  updatedSince?: number;
  /** Start cursor (resume a sweep); omitted to start from the beginning. */
  cursor?: string | null;
  /** Who asks: decides the rate-limiter priority. */
  kind: PassKind;
  /** Aborts waiting and in-flight requests (graceful shutdown). */
  signal?: AbortSignal;
}

/** The bridge's only window on the upstream: the poller depends on this, not on HTTP details. */
export interface ReviewSource {
  /** Pages of the listing, fetched lazily; throws an UpstreamError when retries are exhausted. */
  pages(options: ListOptions): AsyncIterable<Page>;
  /** Fetches (or reuses) a token; throws when the credentials are refused (readiness probe). */
  checkCredentials(): Promise<void>;
  /** Releases the connection pool. */
  close(): Promise<void>;
}

/** Callbacks the upstream client fires so that metrics live outside its logic. All optional. */
export interface UpstreamHooks {
  /** One HTTP request finished (status 0 for a connection error). */
  onRequest?(endpoint: 'token' | 'reviews', status: number, durationSeconds: number): void;
  /** The upstream throttled us (503 or 429). */
  onThrottled?(status: number, retryAfterSeconds: number | null): void;
  /** A request is retried; reason is a short bounded word such as 'status_503', 'timeout', 'truncated'. */
  onRetry?(endpoint: 'token' | 'reviews', reason: string): void;
  /** A token was fetched; outcome 'ok', 'unauthorized', 'error'. */
  onTokenRefresh?(outcome: 'ok' | 'unauthorized' | 'error'): void;
  /** Time a request waited in the rate limiter before it was sent. */
  onLimiterWait?(kind: PassKind, seconds: number): void;
  /** A record failed validation. */
  onReject?(reason: RejectKind): void;
  /** A page was refused (body over the cap, or 400) and is asked for again with half the limit. */
  onPageShrunk?(reason: 'too_large' | 'status_400'): void;
  /** A status value outside the known set was seen (counted, accepted). */
  onUnknownStatus?(field: string): void;
}
