import { setTimeout as sleep } from 'node:timers/promises';

// The one place in the test tree that waits on a timer: tests synchronise on conditions (a checkpoint field, a
// metric, a consumed event, a request counter of the simulator), never on a fixed time (issue #20). The interval
// below is how often a condition is looked at, not a time any test relies on.

/** Options of {@link pollUntil}. */
export interface PollOptions {
  /** Give up (throw) after this long. */
  timeoutMs: number;
  /** What is waited for, for the timeout's message. */
  what: string;
  /** How often to look (ms). */
  intervalMs?: number;
  /** Treat a check that throws as "not yet" (else the error ends the wait). */
  ignoreErrors?: boolean;
  /** The error to throw on timeout, instead of "timed out after … waiting for …". */
  onTimeout?: () => Error;
}

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function pollUntil<T>(
  check: () => Promise<T | undefined> | T | undefined,
  options: PollOptions,
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    let value: T | undefined;
    try {
      value = await check();
    } catch (err) {
      if (!options.ignoreErrors) throw err;
      value = undefined;
    }
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw options.onTimeout?.() ?? new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}`);
    }
    // Not synchronisation: the polling interval of this wait-for-condition helper.
    await sleep(options.intervalMs ?? 100);
  }
}

/** Waits until `check` returns a value other than undefined (a check that throws counts as not yet), or throws. */
export function waitFor<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  what: string,
  intervalMs = 100,
): Promise<T> {
  return pollUntil(check, { timeoutMs, what, intervalMs, ignoreErrors: true });
}

/** Waits until `cond` holds, looking every few milliseconds (unit tests on fakes; errors end the wait). */
export function until(cond: () => boolean, timeoutMs = 5_000, what = 'the condition'): Promise<true> {
  return pollUntil(() => (cond() ? true : undefined), { timeoutMs, what, intervalMs: 5 });
}

/** A few turns of the event loop: enough for anything already scheduled to run, no fixed time. */
export async function turns(n = 10): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}
