// The arithmetic of the upstream rate limiter (src/upstream/rate-limiter.ts), apart from its waiting and timers:
// the adaptive rate (AIMD: a throttled answer lowers it, time brings it back) and the token bucket it fills.
// Both are pure state over the times they are handed, so the limiter's fake-clock tests stay exact.

/** Tuning of the adaptive rate; only `rps` is required. */
export interface AdaptiveRateOptions {
  /** Target rate, requests per second (the rate it returns to after a throttle). */
  rps: number;
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
}

/** The limiter's rate: lowered by a throttled answer (once per window), recovering with time up to the target. */
export class AdaptiveRate {
  readonly target: number;
  private readonly factor: number;
  private readonly floor: number;
  private readonly fixedIncrease: number | null;
  private readonly doublingMs: number;
  private readonly cooldown: number;
  private decreasedAt = Number.NEGATIVE_INFINITY;
  // Recovery starts when a Retry-After pause ends: time spent paused says nothing about a higher rate being safe.
  private recoverFrom = Number.NEGATIVE_INFINITY;
  private rateAfterDecrease: number;

  constructor(options: AdaptiveRateOptions) {
    if (!(options.rps > 0) || !Number.isFinite(options.rps)) throw new RangeError('rps must be a positive number');
    this.target = options.rps;
    this.factor = Math.min(0.99, Math.max(0.01, options.decreaseFactor ?? 0.5));
    this.floor = Math.min(this.target, Math.max(0.05, options.minRps ?? this.target / 100));
    this.fixedIncrease = options.increasePerSecond === undefined ? null : Math.max(0, options.increasePerSecond);
    this.doublingMs = Math.max(100, (options.recoveryDoublingSeconds ?? 10) * 1000);
    this.cooldown = Math.max(0, options.decreaseCooldownMs ?? 0);
    this.rateAfterDecrease = this.target;
  }

  /** The rate in requests per second at `now`. */
  at(now: number): number {
    if (this.rateAfterDecrease >= this.target) return this.target;
    const elapsed = Math.max(0, now - this.recoverFrom);
    const recovered =
      this.fixedIncrease === null
        ? this.rateAfterDecrease * 2 ** (elapsed / this.doublingMs)
        : this.rateAfterDecrease + (this.fixedIncrease * elapsed) / 1000;
    return Math.min(this.target, recovered);
  }

  /**
   * A throttled answer at `now` to a request sent at `sentAt`: lowers the rate unless the request went out before
   * the last decrease (it says nothing about the lowered rate) or the cooldown runs; recovery starts at `resumeAt`.
   */
  throttled(now: number, sentAt: number | undefined, resumeAt: number): void {
    const stale = sentAt !== undefined && sentAt < this.decreasedAt;
    if (stale || now - this.decreasedAt < this.cooldown) return;
    this.rateAfterDecrease = Math.max(this.floor, this.at(now) * this.factor);
    this.decreasedAt = now;
    this.recoverFrom = Math.max(now, resumeAt);
  }
}

// Fraction of a token a late timer may carry over (about 10 ms at 9.5 requests/s).
const LATE_TIMER_SLACK = 0.1;

/** The token bucket the adaptive rate fills, with the Retry-After pause during which it neither fills nor spends. */
export class TokenBucket {
  private tokens: number;
  private lastRefill: number;
  private pausedUntil = Number.NEGATIVE_INFINITY;

  constructor(
    /** Capacity in requests (fractions allowed: 1.4 lets a request follow 0.6 slots after the previous). */
    private readonly burst: number,
    private readonly rate: AdaptiveRate,
    now: number,
  ) {
    this.tokens = burst;
    this.lastRefill = now;
  }

  /** Adds what the rate earned since the last refill; `queued`: someone waits (a late timer keeps a sliver). */
  refill(now: number, queued: boolean): void {
    if (now <= this.lastRefill) return;
    // Trapezoid over the interval: exact while the rate recovers linearly, which keeps the fake-clock tests exact.
    const average = (this.rate.at(this.lastRefill) + this.rate.at(now)) / 2;
    // While requests queue, a timer that fires late must not cost throughput: keep a sliver of the excess so the
    // next wake-up comes that much sooner (the long-run rate stays exactly the target, bursts stay bounded).
    const capacity = queued ? this.burst + LATE_TIMER_SLACK : this.burst;
    this.tokens = Math.min(capacity, this.tokens + (average * (now - this.lastRefill)) / 1000);
    this.lastRefill = now;
  }

  /** Whether a request may go at `now` (a whole token, no pause). */
  canSend(now: number): boolean {
    return now >= this.pausedUntil && this.tokens >= 1;
  }

  /** Spends a token for a request that goes now. */
  take(): void {
    this.tokens -= 1;
  }

  /** A throttled answer: pauses every request until `until` (if later), and keeps nothing saved up. */
  throttled(until: number | null): void {
    if (until !== null) {
      this.pausedUntil = Math.max(this.pausedUntil, until);
      this.lastRefill = Math.max(this.lastRefill, this.pausedUntil);
    }
    this.tokens = Math.min(this.tokens, 0);
  }

  /** When the pause ends (negative infinity: none yet). */
  resumesAt(): number {
    return this.pausedUntil;
  }

  /** Milliseconds from `now` (just refilled) until the next token, pause included. */
  msToNextToken(now: number): number {
    const start = Math.max(now, this.pausedUntil, this.lastRefill);
    const deficit = Math.max(0, 1 - this.tokens);
    return Math.max(0, start - now) + (deficit * 1000) / this.rate.at(start);
  }
}
