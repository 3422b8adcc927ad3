import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { LeasePort } from '../core/ports.js';
import { durably, type AccountKeys, type BridgeRedis } from './connection.js';

// One leader per account: replicas compete for a lease in Redis. The lease carries an epoch that grows
// with every new holder; commits are fenced by it, so a leader that paused past its lease cannot write.

/** This replica's view of the account's lease. */
export class Lease implements LeasePort {
  private epoch = 0;
  private renewedAt = 0;

  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
    /** Identifies this replica among the others (visible in `status`); one id for all accounts of a process. */
    readonly holder: string = replicaId(),
  ) {}

  /**
   * Acquires or renews. Resolves the epoch this replica leads under, or 0 when another replica leads. A Redis
   * error counts as leading only while the last renewal is younger than the ttl (nobody else can hold it yet).
   */
  async renew(again = true): Promise<number> {
    // Stamped before the request: Redis starts the ttl when it runs the script, which is after we sent it, so this
    // replica's view of the lease expires no later than the lease itself.
    const sentAt = this.clock();
    try {
      // An epoch is used only once replicas have it, so a failover cannot hand it to another replica again.
      const [reply, counted] = await durably(this.redis, (p) =>
        p.bridgeLeaseAcquire(this.keys.lease, this.keys.epoch, this.holder, this.ttlMs).exists(this.keys.epoch),
      );
      if (again && Number(reply) > 0 && counted === 0) {
        // The epoch counter vanished under a lease this replica holds (evicted, deleted by hand): every fenced
        // write would now answer that the account's keys are gone, for as long as the lease is renewed. Taken anew,
        // the lease issues a new epoch and writes the counter again.
        await this.redis.bridgeLeaseRelease(this.keys.lease, this.holder);
        return await this.renew(false);
      }
      const epoch = Number(reply);
      this.epoch = epoch;
      if (epoch > 0) this.renewedAt = sentAt;
      return epoch;
    } catch (err) {
      if (this.epoch > 0 && this.clock() - this.renewedAt < this.ttlMs) return this.epoch;
      this.epoch = 0;
      throw err;
    }
  }

  /** The epoch held now (0 when not leading). */
  current(): number {
    return this.epoch > 0 && this.clock() - this.renewedAt < this.ttlMs ? this.epoch : 0;
  }

  /** Gives the lease up so a standby takes over without waiting for the ttl. */
  async release(): Promise<void> {
    const held = this.epoch > 0;
    // Not leading from this moment on (before Redis hears of it): the safe order, and concurrent renewals of the
    // replica's other leases count one fewer at once.
    this.epoch = 0;
    if (held) await this.redis.bridgeLeaseRelease(this.keys.lease, this.holder);
  }
}

/** A new replica id: host, pid and a random part (a restarted pod may reuse host and pid). */
export function replicaId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Who holds an account's lease, for `status` and tests. */
export async function leaseHolder(
  redis: BridgeRedis,
  keys: AccountKeys,
): Promise<{ holder: string; epoch: number; ttlMs: number } | null> {
  const [value, ttl] = await Promise.all([redis.get(keys.lease), redis.pttl(keys.lease)]);
  if (!value) return null;
  const at = value.lastIndexOf('|');
  return { holder: value.slice(0, at), epoch: Number(value.slice(at + 1)), ttlMs: ttl };
}
