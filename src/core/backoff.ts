// Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): it spreads the
// retries of many clients (or of our own prefetch and current request) instead of synchronising them. The one
// backoff of the bridge: upstream retries, failed passes and Kafka connection attempts all use it.

/** Shape of the exponential backoff. */
export interface BackoffPolicy {
  /** Ceiling of the first retry's delay. */
  baseMs: number;
  /** No delay exceeds this. */
  capMs: number;
  /**
   * 'full' (default): uniform in [0, step). 'equal': uniform in [step/2, step), for a loop that must not spin
   * when the draw comes out near zero.
   */
  jitter?: 'full' | 'equal';
}

/** Delay before retry number `attempt` (0 for the first retry), drawn below step = min(cap, base * 2^attempt). */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const step = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, Math.min(attempt, 30)));
  const floor = policy.jitter === 'equal' ? step / 2 : 0;
  return Math.floor(floor + random() * (step - floor));
}
