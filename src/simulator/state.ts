import { FaultInjector } from './faults.js';
import { DEFAULT_OPTIONS, parseRateLimit, type ResolvedOptions } from './options.js';
import { TokenBucket } from './rate-limit.js';
import { RequestStats } from './stats.js';
import { ReviewStore } from './store.js';
import { TokenRegistry } from './tokens.js';
import type { RateLimitOptions } from './types.js';

// Everything one simulator instance knows; the HTTP handlers and the control facade share it.

/** The mutable world of one simulator. */
export class SimulatorState {
  readonly store: ReviewStore;
  readonly tokens: TokenRegistry;
  readonly faults: FaultInjector;
  readonly stats = new RequestStats();
  /** Aborted on close so that requests waiting out injected latency stop at once. */
  readonly closing = new AbortController();
  private bucket: TokenBucket | null = null;
  /** The service's own clock (skewed on purpose in tests): what its Date headers say. */
  readonly now: () => number;
  /** The clock of its data (dataClockOffsetMs from `now`): updated_date stamps. */
  readonly dataNow: () => number;

  constructor(
    readonly options: ResolvedOptions,
    /** The machine's clock the service's is skewed from (default Date.now). */
    clock: () => number = Date.now,
  ) {
    this.now = () => clock() + options.clockSkewMs;
    this.dataNow = () => clock() + options.clockSkewMs + options.dataClockOffsetMs;
    this.store = new ReviewStore(options.seed, options.reviewCount, this.dataNow, options.listingOrder);
    this.tokens = new TokenRegistry(
      [
        { id: options.clientId, secret: options.clientSecret, scope: 'reviews' },
        { id: options.scopelessClientId, secret: options.scopelessClientSecret, scope: 'none' },
      ],
      options.tokenTtlSeconds,
    );
    this.faults = new FaultInjector(options.seed, options.faults);
    this.setRateLimit(options.rateLimit);
  }

  /** The throttle in force, or null when off. */
  get limiter(): TokenBucket | null {
    return this.bucket;
  }

  /** Replaces the throttle (validated; null = off, undefined = the default); the new bucket starts full. */
  setRateLimit(rateLimit: RateLimitOptions | null | undefined): void {
    const parsed = parseRateLimit(rateLimit === undefined ? DEFAULT_OPTIONS.rateLimit : rateLimit);
    this.bucket = parsed === null ? null : new TokenBucket(parsed);
  }
}
