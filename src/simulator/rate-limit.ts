import type { RateLimitOptions } from './types.js';

// The upstream's throttle: one token bucket per server (the real limit is per account, and the simulator serves
// one account), refilled continuously at rps up to burst.

/** Outcome of admitting one request. */
export type Admission = { allowed: true } | { allowed: false; status: 503 | 429; retryAfterSeconds: number | null };

/** Token bucket; `admit` is called once per token or listing request. */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;
  private readonly burst: number;

  constructor(
    private readonly options: RateLimitOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.burst = options.burst ?? options.rps;
    this.tokens = this.burst;
    this.updatedAt = clock();
  }

  /** Takes a token if one is there; otherwise says how to refuse. */
  admit(): Admission {
    const now = this.clock();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.updatedAt) / 1000) * this.options.rps);
    this.updatedAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return { allowed: true };
    }
    const retryAfterSeconds =
      this.options.retryAfterSeconds === undefined
        ? Math.max(1, Math.ceil((1 - this.tokens) / this.options.rps))
        : this.options.retryAfterSeconds;
    return { allowed: false, status: this.options.status ?? 503, retryAfterSeconds };
  }
}
