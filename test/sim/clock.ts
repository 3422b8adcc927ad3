import { abortReason, type Clock } from '../../src/core/clock.js';

// The simulated world's one clock: every timer of every replica, lease, backoff and the upstream's changes waits on
// it, and it moves only when nothing else can run (the driver fires the earliest timer then). Time is virtual, so a
// schedule of ten simulated minutes runs in a fraction of a second and the same seed always sees the same times.

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
}

/** A virtual clock: `sleep` registers a timer, `fireNext` moves time to the earliest one and fires it. */
export class VirtualClock implements Clock {
  private time: number;
  private seq = 0;
  private timers: Timer[] = [];

  constructor(start: number) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  /** Resolves after `ms` of virtual time (timers due at the same time fire in the order they were set). */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const timer: Timer = {
        // Whole milliseconds, as Date.now() reads: a timer of 3333.3 ms fires at the next whole one.
        at: this.time + Math.max(0, Math.ceil(ms)),
        seq: this.seq++,
        fire: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.timers = this.timers.filter((t) => t !== timer);
        reject(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.timers.push(timer);
    });
  }

  /** Calls `fn` at virtual time `at` (the world's own events: upstream changes, faults). */
  at(at: number, fn: () => void): void {
    this.timers.push({ at: Math.max(Math.ceil(at), this.time), seq: this.seq++, fire: fn });
  }

  /** When the next timer is due, or null when none is set. */
  nextAt(): number | null {
    let best: Timer | null = null;
    for (const t of this.timers) if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    return best?.at ?? null;
  }

  /** Moves time to the earliest timer and fires every timer due then; false when no timer is set. */
  fireNext(): boolean {
    const at = this.nextAt();
    if (at === null) return false;
    this.time = at;
    const due = this.timers.filter((t) => t.at <= at).sort((a, b) => a.seq - b.seq);
    this.timers = this.timers.filter((t) => t.at > at);
    for (const t of due) t.fire();
    return true;
  }
}
