// Errors whose meaning the orchestration acts on, whichever adapter raised them.

/** Thrown when a commit is refused because another replica has taken the lease since (Redis or Kafka fenced it). */
export class FencedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FencedError';
  }
}

/**
 * Thrown when the account's keys vanished from Redis under a running leader (a flush, a restart without
 * persistence, a failover to an empty replica): the leader stops and restores the snapshot from Kafka.
 */
export class SnapshotLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotLostError';
  }
}
