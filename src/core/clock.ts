// Where real time enters the bridge: the one sleep helper and the system clock. Everything that waits or reads the
// time takes a Clock (or a `sleep`/`now` function) with these as defaults, so tests can pass a fake clock.

/** Reads the time and waits; the loop, the lease keeper and the allotment take one (tests pass a fake). */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The error an aborted operation rejects with (the signal's reason, or a standard AbortError). */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts: the bridge's one sleep helper. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The real clock: Date.now and timers. */
export const systemClock: Clock = { now: () => Date.now(), sleep };
