import type { SimulatorStats } from './types.js';

// Counters of what clients did, so tests can assert on behaviour (backing off, reusing tokens) and not only on output.

/** Mutable request counters behind SimulatorControl.stats(). */
export class RequestStats {
  private value: SimulatorStats = emptyStats();

  /** One token or listing request answered with this status. */
  answered(status: number): void {
    this.value.requests += 1;
    const key = String(status);
    this.value.byStatus[key] = (this.value.byStatus[key] ?? 0) + 1;
  }

  /** One request refused by the rate limiter (also counted by `answered`). */
  throttled(): void {
    this.value.throttled += 1;
  }

  /** One page of a full listing (a request without updated_date) about to be answered. */
  fullListingPage(): void {
    this.value.fullListingPages += 1;
  }

  /** One access token issued. */
  tokenIssued(): void {
    this.value.tokensIssued += 1;
  }

  /** A copy of the counters. */
  snapshot(): SimulatorStats {
    return { ...this.value, byStatus: { ...this.value.byStatus } };
  }

  /** Zeroes every counter. */
  reset(): void {
    this.value = emptyStats();
  }
}

function emptyStats(): SimulatorStats {
  return { requests: 0, byStatus: {}, throttled: 0, tokensIssued: 0, fullListingPages: 0 };
}
