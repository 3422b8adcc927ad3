// The simulator's public contract. The lead and the upstream-client agent code against these names, so they
// change only by addition.

/** How the simulated throttle behaves; null anywhere it is accepted disables throttling. */
export interface RateLimitOptions {
  /** Sustained requests per second the bucket refills at. */
  rps: number;
  /** Bucket capacity; defaults to rps (one second worth of requests). */
  burst?: number;
  /** Status of a throttled answer: the spec says 503, integrators report 429. */
  status?: 503 | 429;
  /** Retry-After value in whole seconds; undefined = computed from the bucket, null = header omitted. */
  retryAfterSeconds?: number | null;
}

/** Faults injected into listing answers; all settable at runtime. */
export interface Faults {
  /** Fraction (0..1) of listing requests answered with one of errorStatuses. */
  errorRate: number;
  /** Statuses an injected error picks from. */
  errorStatuses: number[];
  /** Delay added before every token and listing answer. */
  latencyMs: number;
  /** Fraction (0..1) of listing answers cut midway (Content-Length of the full body, connection closed). */
  truncateRate: number;
  /** Fraction (0..1) of review ids served as malformed records; which ids is fixed by the seed. */
  malformedRate: number;
  /** Bytes of filler added to every listed record (field `padding`) to produce oversized bodies. */
  padBytes: number;
  /** Fraction (0..1) of reviews silently left out of every listing (a broken listing); which ids is fixed by the seed. */
  dropRate: number;
  /**
   * Reviews served without their `id` field (a record whose id cannot be read), each at its place in the listing;
   * the same bytes every time while the review is unchanged. Add ids at runtime for ones that appear anew.
   */
  idless: number[];
  /** Listing requests answered with a fixed status instead of a page (202, 400, 402, 404, ...); null = off. */
  statusFault: StatusFault | null;
  /** Reviews served with absurd but valid-JSON content (see PoisonKind); empty = none. */
  poison: PoisonRecord[];
}

/** Answers listing requests with one status: the spec's error table on purpose. */
export interface StatusFault {
  /** The status: 202 (not ready), 400 (bad request), 402 (2FA required), 404 (not found), or any 4xx/5xx. */
  status: number;
  /** Only requests that carry a next_page cursor (an expired or invalid cursor); default false. */
  cursorOnly?: boolean;
  /** Answer this many requests so, then switch off; absent = until cleared. */
  times?: number;
  /** Retry-After header of the answer, in seconds; absent = no header. */
  retryAfterSeconds?: number;
}

/**
 * Ways a review can be absurd while staying valid JSON (issue 9): a 3 MB text, an updated_date of 2^50, a
 * created_date of 1e16, an unknown field nested 3,000 levels deep, `__proto__` and `constructor` keys.
 */
export type PoisonKind = 'huge-text' | 'far-future-updated' | 'far-created' | 'deep-nesting' | 'proto-keys';

/** One review served poisoned. */
export interface PoisonRecord {
  id: number;
  kind: PoisonKind;
}

/** Options of startSimulator; every field has a default so `startSimulator()` gives a spec-faithful server. */
export interface SimulatorOptions {
  /** Interface to listen on; default 127.0.0.1. */
  host?: string;
  /** Port; default 0 = a random free port. */
  port?: number;
  /** Seed of the generated data and of the fault dice; default 1. */
  seed?: number;
  /** Initial reviews, ids 1..N, generated on the fly; default 1000. */
  reviewCount?: number;
  /** Credential with the listing scope; default demo-client / demo-secret. */
  clientId?: string;
  clientSecret?: string;
  /** Credential whose tokens get 403 on the listing; default scopeless-client / scopeless-secret. */
  scopelessClientId?: string;
  scopelessClientSecret?: string;
  /** expires_in of issued tokens; default 3600. */
  tokenTtlSeconds?: number;
  /** Throttle; default {rps: 10, status: 503}; null disables. */
  rateLimit?: RateLimitOptions | null;
  /** Largest body sent on the wire; default 10 MiB. Above it uncompressed, the body is compressed regardless. */
  payloadLimitBytes?: number;
  /** Dotted path of the next-page cursor in the envelope; default 'next_page'. */
  cursorPath?: string;
  /** What the last page carries at cursorPath: nothing (default) or an explicit null. */
  lastPageCursor?: 'absent' | 'null';
  /** Order of the full listing (no updated_date filter): by ascending id (default) or newest first (descending). */
  listingOrder?: 'ascending' | 'descending';
  /** Unit of the updated_date query parameter; default 'ms'. */
  updatedDateUnit?: 'ms' | 's';
  /** Comparison of the updated_date filter; default 'gte'. */
  updatedDateComparison?: 'gte' | 'gt';
  /** 'always' gzips even when the client did not ask; default 'when-asked'. */
  compression?: 'when-asked' | 'always' | 'never';
  /** The simulated service's clock minus the real one (ms): its updated_date stamps and Date headers. Default 0. */
  clockSkewMs?: number;
  /**
   * The service's data clock minus its Date-header clock (ms): updated_date stamps of changes and creations run this
   * far ahead (negative: behind) of what its Date headers say, as when an API gateway and the database keep
   * different time. Default 0.
   */
  dataClockOffsetMs?: number;
  /** Initial faults; default none. */
  faults?: Partial<Faults>;
}

/** Request counters, for assertions on how a client behaved. */
export interface SimulatorStats {
  /** Token and listing requests (control requests are not counted). */
  requests: number;
  /** Answers by HTTP status, e.g. {"200": 12, "503": 3}. */
  byStatus: Record<string, number>;
  /** Requests refused by the rate limiter. */
  throttled: number;
  /** Access tokens issued. */
  tokensIssued: number;
  /** Listing requests without updated_date (pages of full listings: initial loads, sweeps). */
  fullListingPages: number;
}

/** Drives the simulated upstream from a test or the demo. */
export interface SimulatorControl {
  /** Creates a review with id = max+1 and updated_date = now; fields override generated ones (not id/updated_date). */
  createReview(fields?: Partial<Record<string, unknown>>): Record<string, unknown>;
  /** Changes publication statuses and moves updated_date forward (strictly, even within one millisecond). */
  setStatus(id: number, status: { client?: string; pwr?: string }): Record<string, unknown>;
  /**
   * Changes publication statuses with an updated_date stamped `lateByMs` before the data clock's now (as a long
   * transaction commits a stamp taken when it began), but still strictly after the review's previous one. The change
   * is listed at once, so an incremental listing from before its stamp finds it. A negative `lateByMs` stamps it
   * that much ahead of the data clock's now instead (one writer whose clock runs fast); later changes keep theirs.
   */
  setStatusLate(id: number, status: { client?: string; pwr?: string }, lateByMs: number): Record<string, unknown>;
  /** Edits other fields without moving updated_date (the change incremental polling cannot see). */
  edit(id: number, fields: Record<string, unknown>): Record<string, unknown>;
  /** The review as the listing would serve it (without faults), or null. */
  get(id: number): Record<string, unknown> | null;
  /** Replaces the given fault settings, keeping the others. */
  setFaults(f: Partial<Faults>): void;
  /** Replaces the throttle (null disables); the bucket starts full. */
  setRateLimit(r: SimulatorOptions['rateLimit']): void;
  /** Invalidates every issued token (answers become 401). */
  revokeTokens(): void;
  /** Current counters. */
  stats(): SimulatorStats;
  /** Zeroes the counters. */
  resetStats(): void;
  /** Number of reviews (= highest id). */
  reviewCount(): number;
  /**
   * Creates one new review per kind (all kinds by default; updated_date = now, so polls see them) and serves each
   * poisoned from now on (Faults.poison; `setFaults({poison: []})` heals them). Returns their ids and kinds.
   */
  addPoisonReviews(kinds?: PoisonKind[]): PoisonRecord[];
  /** Removes a review upstream: it is no longer listed nor found (its id is not reused). */
  removeReview(id: number): void;
  /** Lists a removed review again, as it was (a comeback); its updated_date does not move. */
  restoreReview(id: number): void;
}

/** A running simulator. */
export interface Simulator {
  /** Base URL, e.g. http://127.0.0.1:12345. */
  url: string;
  control: SimulatorControl;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}
