import type { RequestPriority } from '../core/domain.js';
import type { Review } from '../core/review.js';

export { REJECT_KINDS, type Reject, type RejectKind } from '../core/reject.js';
import type { Reject, RejectKind } from '../core/reject.js';

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
  /**
   * The upstream's own time when the request was sent (ms), estimated from the `Date` headers of its answers; null
   * when it sends none. Watermarks and caps use it: the bridge's clock must never stand in for the upstream's.
   */
  upstreamAt?: number | null;
  /** When the page's answer was read and validated (ms since epoch): the end of its listing span. */
  receivedAt?: number;
}

/**
 * The older name of RequestPriority (the rate limiter's queue a request waits in, polls first): it was never a pass
 * type. Kept for code not yet renamed.
 * @deprecated Use RequestPriority.
 */
export type PassKind = RequestPriority;

/** What a pass asks the upstream for. */
export interface ListOptions {
  /** Lower bound of `updated_date` in milliseconds (converted to the configured unit); omitted for a full sweep. */
  updatedSince?: number;
  /** Start cursor (resume a sweep); omitted to start from the beginning. */
  cursor?: string | null;
  /** Who asks: decides the rate-limiter priority. */
  kind: RequestPriority;
  /** Aborts waiting and in-flight requests (graceful shutdown). */
  signal?: AbortSignal;
}

/** The bridge's only window on the upstream: the passes depend on this, not on HTTP details. */
export interface ReviewSource {
  /** Pages of the listing, fetched lazily; throws an UpstreamError when retries are exhausted. */
  pages(options: ListOptions): AsyncIterable<Page>;
  /** Fetches (or reuses) a token; throws when the credentials are refused (readiness probe). */
  checkCredentials(): Promise<void>;
  /** The upstream's time now (ms), estimated from its `Date` headers; null before one was seen (or never sent). */
  upstreamNow?(): number | null;
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
  onLimiterWait?(kind: RequestPriority, seconds: number): void;
  /** A record failed validation. */
  onReject?(reason: RejectKind): void;
  /** A page was refused (body over the cap, or 400) and is asked for again with half the limit. */
  onPageShrunk?(reason: 'too_large' | 'status_400'): void;
  /** A status value outside the known set was seen (counted, accepted). */
  onUnknownStatus?(field: string): void;
  /** A new estimate of the upstream's clock minus the bridge's (seconds; positive: the upstream is ahead). */
  onClockOffset?(seconds: number): void;
}
