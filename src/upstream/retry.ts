import { backoffDelay as delay, type BackoffPolicy } from '../core/backoff.js';
import { abortReason, sleep } from '../core/clock.js';

export type { BackoffPolicy } from '../core/backoff.js';

/** Upstream retries: 250 ms, 500 ms, 1 s, ... capped at 20 s; six retries span about 30 s at worst. */
export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 250, capMs: 20_000 };

/** Delay before upstream retry number `attempt` (0 for the first retry); see src/core/backoff.ts. */
export function backoffDelay(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF, random = Math.random): number {
  return delay(attempt, policy, random);
}

/**
 * Parses a Retry-After header (delta seconds or an HTTP date) into seconds, or null when absent or unreadable.
 * The result is capped so that one odd header cannot stall the bridge for hours.
 */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowMs = Date.now(),
  maxSeconds = 300,
): number | null {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined) return null;
  const text = raw.trim();
  if (text === '') return null;
  let seconds: number;
  if (/^\d+(\.\d+)?$/.test(text)) {
    seconds = Number(text);
  } else {
    // An HTTP date names a weekday and a month; Date.parse alone would read '-1' as a year.
    if (!/[A-Za-z]/.test(text)) return null;
    const at = Date.parse(text);
    if (Number.isNaN(at)) return null;
    seconds = Math.max(0, (at - nowMs) / 1000);
  }
  return Math.min(seconds, maxSeconds);
}

/** The one sleep helper and abort reason, from the clock module (re-exported for the upstream client). */
export { abortReason, sleep };
