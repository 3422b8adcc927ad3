import type { RequestPriority } from '../core/domain.js';
import { abortReason } from './retry.js';
import { LimiterClosedError } from '../core/errors.js';
import { AdaptiveRate, TokenBucket, type AdaptiveRateOptions } from './rate-budget.js';

// A token bucket shared by every request the client sends (listing and token endpoint alike), because the
// upstream counts them all against one 10 requests/s budget. It adapts: a throttled answer halves the rate (once
// per window: answers to requests sent before the last decrease do not count again) and pauses until Retry-After;
// the rate then climbs back gradually with time (doubling every 10 s by default, or additively if configured). Idle-cheap by construction: the refill is computed lazily from the clock
// and a timer exists only while someone waits. The rate and the bucket are in src/upstream/rate-budget.ts; this
// class keeps the waiting: the queues by priority and the one timer.

/** Time source and timers, injectable so the limiter can be tested with a fake clock. */
export interface Clock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Tuning of the limiter; only `rps` is required. */
export interface RateLimiterOptions extends AdaptiveRateOptions {
  /** Bucket capacity in requests (fractions allowed: 1.4 lets a request follow 0.6 slots after the previous). */
  burst?: number;
  clock?: Clock;
}

/** A snapshot of the limiter for metrics and tests. */
export interface RateLimiterState {
  configuredRps: number;
  currentRps: number;
  /** Requests waiting, by kind. */
  queued: { incremental: number; sweep: number };
  /** Whether a wake-up timer is armed (false whenever nobody waits). */
  timerArmed: boolean;
  /** Milliseconds left of a Retry-After pause (0 when none). */
  pausedForMs: number;
}

interface Waiter {
  enqueuedAt: number;
  resolve(waitedMs: number): void;
  reject(err: unknown): void;
  detach(): void;
}

/** Re-exported from the one error model, where it is defined. */
export { LimiterClosedError };

/** Token-bucket limiter with priorities (incremental before sweep), AIMD adaptation and Retry-After pauses. */
export class RateLimiter {
  private readonly rate: AdaptiveRate;
  private readonly bucket: TokenBucket;
  private readonly clock: Clock;
  private readonly queues: Record<RequestPriority, Waiter[]> = { incremental: [], sweep: [] };
  private timer: unknown = null;
  private closed = false;

  constructor(options: RateLimiterOptions) {
    this.rate = new AdaptiveRate(options);
    this.clock = options.clock ?? systemClock;
    this.bucket = new TokenBucket(Math.max(1, options.burst ?? 1), this.rate, this.clock.now());
  }

  /** Current (possibly reduced) rate in requests per second. */
  rateAt(now: number = this.clock.now()): number {
    return this.rate.at(now);
  }

  /**
   * Waits for a slot; incremental requests are served before queued sweep requests. Resolves with the time
   * waited in milliseconds; rejects with the signal's reason on abort, or LimiterClosedError after close().
   */
  acquire(kind: RequestPriority, signal?: AbortSignal): Promise<number> {
    if (this.closed) return Promise.reject(new LimiterClosedError());
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const now = this.clock.now();
    this.refill(now);
    if (!this.queued() && this.bucket.canSend(now)) {
      this.bucket.take();
      return Promise.resolve(0);
    }
    return new Promise<number>((resolve, reject) => {
      const queue = this.queues[kind];
      const onAbort = (): void => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        reject(abortReason(signal!));
        this.schedule();
      };
      const waiter: Waiter = {
        enqueuedAt: now,
        resolve,
        reject,
        detach: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.schedule();
    });
  }

  /** The limiter's clock, for stamping when a request was sent (see `throttled`). */
  now(): number {
    return this.clock.now();
  }

  /**
   * Reports a throttled answer (503/429): drains the bucket, lowers the rate and, with a Retry-After, pauses every
   * request until it has passed. An answer to a request sent before the last decrease (`sentAt`, from `now()`)
   * says nothing about the lowered rate and does not lower it again (one decrease per window, as in TCP).
   */
  throttled(retryAfterSeconds: number | null, sentAt?: number): void {
    const now = this.clock.now();
    this.refill(now);
    this.bucket.throttled(retryAfterSeconds !== null && retryAfterSeconds > 0 ? now + retryAfterSeconds * 1000 : null);
    this.rate.throttled(now, sentAt, this.bucket.resumesAt());
    this.schedule();
  }

  /** Snapshot for metrics and tests. */
  state(): RateLimiterState {
    const now = this.clock.now();
    return {
      configuredRps: this.rate.target,
      currentRps: this.rate.at(now),
      queued: { incremental: this.queues.incremental.length, sweep: this.queues.sweep.length },
      timerArmed: this.timer !== null,
      pausedForMs: Math.max(0, this.bucket.resumesAt() - now),
    };
  }

  /** Rejects every waiter and refuses new acquisitions. */
  close(): void {
    this.closed = true;
    this.disarm();
    for (const queue of [this.queues.incremental, this.queues.sweep]) {
      for (const waiter of queue.splice(0)) {
        waiter.detach();
        waiter.reject(new LimiterClosedError());
      }
    }
  }

  private queued(): boolean {
    return this.queues.incremental.length + this.queues.sweep.length > 0;
  }

  private refill(now: number): void {
    this.bucket.refill(now, this.queued());
  }

  private next(): Waiter | undefined {
    return this.queues.incremental.shift() ?? this.queues.sweep.shift();
  }

  private pump(): void {
    this.timer = null;
    const now = this.clock.now();
    this.refill(now);
    while (this.bucket.canSend(now)) {
      const waiter = this.next();
      if (!waiter) break;
      this.bucket.take();
      waiter.detach();
      waiter.resolve(now - waiter.enqueuedAt);
    }
    this.schedule();
  }

  /** Arms one timer for the moment the next waiter can go, or none when nobody waits. */
  private schedule(): void {
    this.disarm();
    if (this.closed || !this.queued()) return;
    const now = this.clock.now();
    this.refill(now);
    // Round up so that the timer never fires a hair early and re-arms itself for a fraction of a millisecond.
    this.timer = this.clock.setTimer(() => this.pump(), Math.ceil(this.bucket.msToNextToken(now)));
  }

  private disarm(): void {
    if (this.timer !== null) {
      this.clock.clearTimer(this.timer);
      this.timer = null;
    }
  }
}
