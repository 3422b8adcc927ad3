import type { RequestPriority } from '../core/domain.js';
import { abortReason } from './retry.js';
import { LimiterClosedError } from '../core/errors.js';

// A token bucket shared by every request the client sends (listing and token endpoint alike), because the
// upstream counts them all against one 10 requests/s budget. It adapts: a throttled answer halves the rate (once
// per window: answers to requests sent before the last decrease do not count again) and pauses until Retry-After;
// the rate then climbs back gradually with time (doubling every 10 s by default, or additively if configured). Idle-cheap by construction: the refill is computed lazily from the clock
// and a timer exists only while someone waits.

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
export interface RateLimiterOptions {
  /** Target rate, requests per second (the rate it returns to after a throttle). */
  rps: number;
  /** Bucket capacity in requests (fractions allowed: 1.4 lets a request follow 0.6 slots after the previous). */
  burst?: number;
  /** Rate multiplier on a throttled answer. Default 0.5. */
  decreaseFactor?: number;
  /** Floor of the adapted rate. Default rps / 100 (at least 0.05). */
  minRps?: number;
  /**
   * Recovery doubles the reduced rate every this many seconds, up to the target. Default 10. Scale-free: near
   * the upstream's real limit it climbs as gently as an additive step would (about 7 % a second), yet a deep
   * fall (a maintenance window of 503s halving the rate at every retry) recovers in about a minute.
   */
  recoveryDoublingSeconds?: number;
  /** Strict AIMD instead: additive recovery of this many requests per second per second. */
  increasePerSecond?: number;
  /** Throttled answers within this window of a decrease do not decrease again. Default 0 (see `sentAt`). */
  decreaseCooldownMs?: number;
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

// Fraction of a token a late timer may carry over (about 10 ms at 9.5 requests/s).
const LATE_TIMER_SLACK = 0.1;

/** Re-exported from the one error model, where it is defined. */
export { LimiterClosedError };

/** Token-bucket limiter with priorities (incremental before sweep), AIMD adaptation and Retry-After pauses. */
export class RateLimiter {
  private readonly target: number;
  private readonly burst: number;
  private readonly factor: number;
  private readonly floor: number;
  private readonly fixedIncrease: number | null;
  private readonly doublingMs: number;
  private readonly cooldown: number;
  private readonly clock: Clock;

  private tokens: number;
  private lastRefill: number;
  private decreasedAt = Number.NEGATIVE_INFINITY;
  // Recovery starts when a Retry-After pause ends: time spent paused says nothing about a higher rate being safe.
  private recoverFrom = Number.NEGATIVE_INFINITY;
  private rateAfterDecrease: number;
  private pausedUntil = Number.NEGATIVE_INFINITY;
  private readonly queues: Record<RequestPriority, Waiter[]> = { incremental: [], sweep: [] };
  private timer: unknown = null;
  private closed = false;

  constructor(options: RateLimiterOptions) {
    if (!(options.rps > 0) || !Number.isFinite(options.rps)) throw new RangeError('rps must be a positive number');
    this.target = options.rps;
    this.burst = Math.max(1, options.burst ?? 1);
    this.factor = Math.min(0.99, Math.max(0.01, options.decreaseFactor ?? 0.5));
    this.floor = Math.min(this.target, Math.max(0.05, options.minRps ?? this.target / 100));
    this.fixedIncrease = options.increasePerSecond === undefined ? null : Math.max(0, options.increasePerSecond);
    this.doublingMs = Math.max(100, (options.recoveryDoublingSeconds ?? 10) * 1000);
    this.cooldown = Math.max(0, options.decreaseCooldownMs ?? 0);
    this.clock = options.clock ?? systemClock;
    this.tokens = this.burst;
    this.lastRefill = this.clock.now();
    this.rateAfterDecrease = this.target;
  }

  /** Current (possibly reduced) rate in requests per second. */
  rateAt(now: number = this.clock.now()): number {
    if (this.rateAfterDecrease >= this.target) return this.target;
    const elapsed = Math.max(0, now - this.recoverFrom);
    const recovered =
      this.fixedIncrease === null
        ? this.rateAfterDecrease * 2 ** (elapsed / this.doublingMs)
        : this.rateAfterDecrease + (this.fixedIncrease * elapsed) / 1000;
    return Math.min(this.target, recovered);
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
    if (this.queues.incremental.length === 0 && this.queues.sweep.length === 0 && this.canSend(now)) {
      this.tokens -= 1;
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
    if (retryAfterSeconds !== null && retryAfterSeconds > 0) {
      this.pausedUntil = Math.max(this.pausedUntil, now + retryAfterSeconds * 1000);
      this.lastRefill = Math.max(this.lastRefill, this.pausedUntil);
    }
    const stale = sentAt !== undefined && sentAt < this.decreasedAt;
    if (!stale && now - this.decreasedAt >= this.cooldown) {
      this.rateAfterDecrease = Math.max(this.floor, this.rateAt(now) * this.factor);
      this.decreasedAt = now;
      this.recoverFrom = Math.max(now, this.pausedUntil);
    }
    this.tokens = Math.min(this.tokens, 0);
    this.schedule();
  }

  /** Snapshot for metrics and tests. */
  state(): RateLimiterState {
    const now = this.clock.now();
    return {
      configuredRps: this.target,
      currentRps: this.rateAt(now),
      queued: { incremental: this.queues.incremental.length, sweep: this.queues.sweep.length },
      timerArmed: this.timer !== null,
      pausedForMs: Math.max(0, this.pausedUntil - now),
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

  private canSend(now: number): boolean {
    return now >= this.pausedUntil && this.tokens >= 1;
  }

  private refill(now: number): void {
    if (now <= this.lastRefill) return;
    // Trapezoid over the interval: exact while the rate recovers linearly, which keeps the fake-clock tests exact.
    const average = (this.rateAt(this.lastRefill) + this.rateAt(now)) / 2;
    // While requests queue, a timer that fires late must not cost throughput: keep a sliver of the excess so the
    // next wake-up comes that much sooner (the long-run rate stays exactly the target, bursts stay bounded).
    const queued = this.queues.incremental.length + this.queues.sweep.length > 0;
    const capacity = queued ? this.burst + LATE_TIMER_SLACK : this.burst;
    this.tokens = Math.min(capacity, this.tokens + (average * (now - this.lastRefill)) / 1000);
    this.lastRefill = now;
  }

  private next(): Waiter | undefined {
    return this.queues.incremental.shift() ?? this.queues.sweep.shift();
  }

  private pump(): void {
    this.timer = null;
    const now = this.clock.now();
    this.refill(now);
    while (this.canSend(now)) {
      const waiter = this.next();
      if (!waiter) break;
      this.tokens -= 1;
      waiter.detach();
      waiter.resolve(now - waiter.enqueuedAt);
    }
    this.schedule();
  }

  /** Arms one timer for the moment the next waiter can go, or none when nobody waits. */
  private schedule(): void {
    this.disarm();
    if (this.closed || (this.queues.incremental.length === 0 && this.queues.sweep.length === 0)) return;
    const now = this.clock.now();
    this.refill(now);
    const start = Math.max(now, this.pausedUntil, this.lastRefill);
    const deficit = Math.max(0, 1 - this.tokens);
    const delay = Math.max(0, start - now) + (deficit * 1000) / this.rateAt(start);
    // Round up so that the timer never fires a hair early and re-arms itself for a fraction of a millisecond.
    this.timer = this.clock.setTimer(() => this.pump(), Math.ceil(delay));
  }

  private disarm(): void {
    if (this.timer !== null) {
      this.clock.clearTimer(this.timer);
      this.timer = null;
    }
  }
}
