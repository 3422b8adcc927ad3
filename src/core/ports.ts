// The ports the orchestration drives and the adapters implement, declared in the domain so that neither side
// imports the other (src/bridge uses them; src/redis implements them).

/** A leadership lease with a fencing epoch (src/redis/lease.ts in production, a fake in unit tests). */
export interface LeasePort {
  /** Acquires or renews; resolves the epoch led under, or 0 when another replica leads. */
  renew(): Promise<number>;
  /** The epoch held now (0 when not leading or when the last renewal is older than the ttl). */
  current(): number;
  /** Gives the lease up so that a standby takes over without waiting for the ttl. */
  release(): Promise<void>;
}

/** The registry of live replicas that leadership is balanced over. */
export interface ReplicaRegistry {
  /** Records this replica as live (or removes it, `leave`) and resolves the live replica ids. */
  beat(replica: string, ttlMs: number, leave?: boolean): Promise<string[]>;
}
