import type { Logger } from 'pino';
import { backoffDelay as delay, type BackoffPolicy } from '../core/backoff.js';
import { abortReason, sleep } from '../core/clock.js';
import { UpstreamError, type Endpoint } from './errors.js';
import type { UpstreamHooks } from './types.js';

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

/** What the retry policy needs from the client around it. */
export interface RetryPolicyOptions {
  /** Retries per request after the first attempt. */
  maxRetries: number;
  backoff: BackoffPolicy;
  /** True while the shared limiter waits out a throttle's Retry-After (for every request): no extra wait then. */
  limiterPaused(): boolean;
  hooks: Pick<UpstreamHooks, 'onRetry'>;
  log: Logger;
  /** Waits between attempts; injected so that tests need not wait. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** One operation run under the policy. */
export interface RetryOperation<T> {
  endpoint: Endpoint;
  /** What the operation does, for the final error's message ('fetching an access token'). */
  describe: string;
  signal: AbortSignal;
  attempt(): Promise<T>;
  /** Called before the one immediate retry a 401 of this endpoint gets (the listing: drop the refused token). */
  onUnauthorized?(): void;
}

/**
 * The upstream client's one retry policy: an operation is attempted until it succeeds, fails with an error that is
 * not retryable, or spends `maxRetries`. A 401 of the listing gets exactly one immediate retry with a fresh token,
 * outside the retry budget. The error that ends an operation is `final`, so an enclosing operation does not retry it.
 */
export class RetryPolicy {
  constructor(private readonly options: RetryPolicyOptions) {}

  /** Runs `op` under the policy. */
  async run<T>(op: RetryOperation<T>): Promise<T> {
    const { endpoint, signal } = op;
    let retries = 0;
    let attempts = 0;
    let reauthorized = false;
    for (;;) {
      attempts += 1;
      try {
        return await op.attempt();
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        const unauthorized = err.kind === 'auth' && err.status === 401 && err.endpoint === endpoint && !err.final;
        if (unauthorized && op.onUnauthorized && !reauthorized) {
          reauthorized = true;
          op.onUnauthorized();
          this.options.hooks.onRetry?.(endpoint, 'status_401');
          this.options.log.info({ endpoint }, 'bearer token refused (401): fetching a new one and retrying once');
          continue;
        }
        if (!err.retryable || retries >= this.options.maxRetries) throw finalError(err, op, attempts);
        const delayMs = this.delayBefore(err, retries);
        retries += 1;
        this.options.hooks.onRetry?.(endpoint, err.reason ?? err.kind);
        // Throttling is expected now and then and has its own metric; other failures deserve a warning.
        this.options.log[err.kind === 'throttled' ? 'info' : 'warn'](
          { endpoint, kind: err.kind, reason: err.reason, status: err.status, retry: retries, delayMs },
          `upstream request failed, retrying: ${err.message}`,
        );
        await (this.options.sleep ?? sleep)(delayMs, signal);
      }
    }
  }

  /**
   * Throttling with Retry-After is waited out in the limiter (for every request, not only this one); a 202's
   * Retry-After concerns this request only.
   */
  private delayBefore(err: UpstreamError, retries: number): number {
    if (err.kind === 'throttled' && this.options.limiterPaused()) return 0;
    if (err.retryAfterSeconds !== null) return err.retryAfterSeconds * 1000;
    return backoffDelay(retries, this.options.backoff);
  }
}

/** The error that ends an operation; one from a nested operation (a listing's token fetch) keeps its own details. */
function finalError(err: UpstreamError, op: RetryOperation<unknown>, attempts: number): UpstreamError {
  const spent = err.retryable ? `; gave up after ${attempts} attempts` : '';
  return new UpstreamError(err.kind, `${op.describe}: ${err.message}${spent}`, {
    endpoint: err.final ? err.endpoint : op.endpoint,
    status: err.status,
    attempts: err.final ? err.attempts : attempts,
    reason: err.reason,
    final: true,
    cause: err,
  });
}
/** The one sleep helper and abort reason, from the clock module (re-exported for the upstream client). */
export { abortReason, sleep };
