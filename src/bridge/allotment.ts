import type { Logger } from 'pino';
import type { LeasePort, ReplicaRegistry } from '../core/ports.js';
import { sleep as realSleep } from '../core/clock.js';

// Balanced leadership: every replica may lead any account, but takes at most its share, ceil(accounts / live
// replicas). Replicas learn who is live from a registry in Redis that each one beats into; a replica holding more
// than its share (another one joined) gives leases up at their next renewal, and one holding less (another left)
// acquires free leases up to it. Only the per-account lease and its fencing decide who leads, so a handover can
// never lead to two leaders: a replica that gives a lease up stops at once, and a commit it still had in flight is
// either fenced or lands before the next leader reads the checkpoint.

/** The registry of live replicas in Redis (the replica-beat script). */
export type { ReplicaRegistry };

/** Options of {@link Allotment}. */
export interface AllotmentOptions {
  /** This replica's id (the holder id of its leases). */
  replica: string;
  /** How many accounts the deployment serves (the same file on every replica). */
  accounts: number;
  /** A replica silent for this long counts as gone (the lease ttl: its leases expire as fast). */
  ttlMs: number;
  logger: Logger;
  /** Waits between beats (rejects when the signal aborts); tests pass a fake clock's. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Whether a failed beat is a failing dependency's the process has already logged (then: debug); absent: never. */
  explainFailure?: (err: unknown) => Promise<boolean>;
}

/** This replica's share of the accounts, from the live replicas in Redis; hands out gated leases. */
export class Allotment {
  private live: string[];
  private readonly leases = new Set<AllottedLease>();
  private stopper: AbortController | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly registry: ReplicaRegistry,
    private readonly options: AllotmentOptions,
  ) {
    this.live = [options.replica];
  }

  /** Beats once (so that the first share counts the replicas already live), then every third of the ttl. */
  async start(): Promise<void> {
    await this.beat().catch((err: unknown) => this.beatFailed(err, 'replica registry not reachable'));
    const stopper = (this.stopper = new AbortController());
    this.running = (async () => {
      while (!stopper.signal.aborted) {
        await (this.options.sleep ?? realSleep)(this.options.ttlMs / 3, stopper.signal).catch(() => undefined);
        if (stopper.signal.aborted) break;
        await this.beat().catch((err: unknown) => this.beatFailed(err, 'replica beat failed'));
      }
    })();
  }

  /** A beat failed: a warning, unless a dependency's failure the process has said once (Redis refusing writes). */
  private async beatFailed(err: unknown, message: string): Promise<void> {
    const explained = (await this.options.explainFailure?.(err).catch(() => false)) ?? false;
    if (explained) this.options.logger.debug({ err }, message);
    else this.options.logger.warn({ err }, message);
  }

  /** Stops beating and leaves the registry, so that the other replicas count one fewer at once. */
  async stop(): Promise<void> {
    this.stopper?.abort();
    await this.running;
    await this.registry.beat(this.options.replica, this.options.ttlMs, true).catch(() => undefined);
  }

  /** Wraps an account's lease so that it is only acquired within this replica's share and given up beyond it. */
  gate(lease: LeasePort, account: string): LeasePort {
    const gated = new AllottedLease(lease, account, this, this.options.logger);
    this.leases.add(gated);
    return gated;
  }

  /** The most accounts this replica leads now: ceil(accounts / live replicas). */
  share(): number {
    return Math.ceil(this.options.accounts / Math.max(1, this.live.length));
  }

  /** Accounts this replica leads now. */
  held(): number {
    let n = 0;
    for (const lease of this.leases) if (lease.current() > 0) n += 1;
    return n;
  }

  /** The live replicas as last read from Redis (this one included). */
  replicas(): readonly string[] {
    return this.live;
  }

  private async beat(): Promise<void> {
    const live = await this.registry.beat(this.options.replica, this.options.ttlMs);
    // The registry can lag this replica's own first beat after a Redis failover; it is live as long as it runs.
    const next = live.includes(this.options.replica) ? live : [...live, this.options.replica];
    if (next.length !== this.live.length) {
      this.options.logger.info(
        { replicas: next.length, share: Math.ceil(this.options.accounts / next.length) },
        'live replicas changed',
      );
    }
    this.live = next;
  }
}

/** An account's lease, acquired only within the replica's share and given up when the replica holds too many. */
class AllottedLease implements LeasePort {
  constructor(
    private readonly inner: LeasePort,
    private readonly account: string,
    private readonly allotment: Allotment,
    private readonly logger: Logger,
  ) {}

  async renew(): Promise<number> {
    const a = this.allotment;
    if (this.inner.current() > 0) {
      if (a.held() <= a.share()) return this.inner.renew();
      // Another replica joined: give this one up now; it acquires it within its own share.
      this.logger.info({ account: this.account, share: a.share(), held: a.held() }, 'handing the account over');
      await this.inner.release();
      return 0;
    }
    if (a.held() >= a.share()) return 0;
    // Every free lease is tried (the ones held elsewhere answer 0), so no account waits behind others that are
    // led already; renewals that win past the share (several at once) give theirs back before anyone used it.
    const epoch = await this.inner.renew();
    if (epoch > 0 && a.held() > a.share()) {
      await this.inner.release();
      return 0;
    }
    return epoch;
  }

  current(): number {
    return this.inner.current();
  }

  release(): Promise<void> {
    return this.inner.release();
  }
}
