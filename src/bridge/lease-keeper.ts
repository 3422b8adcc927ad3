import type { Logger } from 'pino';
import type { LeasePort } from '../core/ports.js';
import { sleep as realSleep } from '../core/clock.js';

// Keeps this replica's lease alive while it leads. Renewals are strictly sequential (the next is scheduled only
// after the previous one answered), so a slow Redis can never have two renewals racing; and the lease stamps a
// renewal with the time it was sent, because the lease's ttl started no earlier than that at Redis.

/** The lease operations the keeper and the loop use (declared in src/core/ports.ts). */
export type { LeasePort };

/** Options of {@link LeaseKeeper}. */
export interface LeaseKeeperOptions {
  /** Time between the end of one renewal and the start of the next (a third of the ttl leaves two tries). */
  periodMs: number;
  logger: Logger;
  /** Called once each time a held lease is lost (taken by another replica, or not renewable within its ttl). */
  onLost?: (epochBefore: number) => void;
  /** Waits between renewals (rejects when the signal aborts); tests pass a fake clock's. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** Renews a lease on its period, one renewal at a time, and reports its loss. */
export class LeaseKeeper {
  private pending: Promise<number> | null = null;
  private stopper: AbortController | null = null;
  private running: Promise<void> | null = null;

  constructor(
    readonly lease: LeasePort,
    private readonly options: LeaseKeeperOptions,
  ) {}

  /** The epoch held now (0 when not leading). */
  epoch(): number {
    return this.lease.current();
  }

  /** Renews now, or joins the renewal already under way (never two at once). */
  renewNow(): Promise<number> {
    if (this.pending) return this.pending;
    const before = this.lease.current();
    const renewal = this.lease.renew().then(
      (epoch) => {
        // A new epoch of its own: the lease expired unrenewed or its key vanished (an evicting Redis, deleted by
        // hand), and this replica took the account anew; no other replica was involved.
        const why =
          epoch > 0
            ? 'lease expired or its key vanished from Redis (evicted, deleted); taken anew by this replica'
            : 'lease given up or taken by another replica';
        if (before > 0 && epoch !== before) this.lost(before, why);
        return epoch;
      },
      (err: unknown) => {
        if (before > 0 && this.lease.current() === 0) this.lost(before, 'lease could not be renewed in time');
        throw err;
      },
    );
    const settled = renewal.finally(() => {
      if (this.pending === settled) this.pending = null;
    });
    this.pending = settled;
    return settled;
  }

  /** Starts renewing in the background. */
  start(): void {
    if (this.running) return;
    const stopper = (this.stopper = new AbortController());
    this.running = (async () => {
      while (!stopper.signal.aborted) {
        await this.renewNow().catch(() => undefined);
        await (this.options.sleep ?? realSleep)(this.options.periodMs, stopper.signal).catch(() => undefined);
      }
    })();
  }

  /** Stops renewing (after the renewal under way, if any); does not release the lease. */
  async stop(): Promise<void> {
    this.stopper?.abort();
    await this.running;
    await this.pending?.catch(() => undefined);
    this.running = null;
    this.stopper = null;
  }

  /** Stops renewing and gives the lease up. */
  async release(): Promise<void> {
    await this.stop();
    await this.lease.release();
  }

  private lost(epoch: number, why: string): void {
    this.options.logger.warn({ epoch }, `${why}; abandoning the pass in flight`);
    this.options.onLost?.(epoch);
  }
}
