import type { Logger } from 'pino';
import { kindOf, SnapshotLostError } from '../../core/errors.js';
import { failed, NO_FAILURE, recovery, type FailureRun, type ScheduleTiming } from '../../core/schedule.js';
import { errorKind } from '../../ops/logger.js';

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// The loop's failures since its last step that succeeded: each is logged once, in the words its kind deserves, and
// the schedule's recovery (src/core/schedule.ts) reads them to say how long to back off, or to restore.

const PASS_FAILED = 'pass failed; nothing committed past the last page';

/** The failures of a loop, and what to do after them. */
export class FailureLog {
  /** Failures since the last step that succeeded, and the kind of the last (the schedule's recovery reads it). */
  private failures: FailureRun = NO_FAILURE;
  /**
   * The kind of the last failure (an error class or upstream error kind), never its message; null once what failed
   * has worked again (a Redis error of the lease must not be shown while Kafka is what fails now).
   */
  lastError: string | null = null;
  /** Where the last failure was (the lease, or a pass). */
  private lastWhere: string | null = null;

  constructor(private readonly deps: { logger: Logger; timing: ScheduleTiming; random?: () => number }) {}

  /** A step succeeded: the next failure starts a new run of them. */
  cleared(): void {
    this.failures = NO_FAILURE;
    this.lastError = null;
    this.lastWhere = null;
  }

  /** `where` worked again (the lease was read): its last failure is no longer the one to show. */
  succeeded(where: string): void {
    if (this.lastWhere !== where) return;
    this.lastError = null;
    this.lastWhere = null;
  }

  /**
   * Records and logs a failure of `where` (the lease, or a pass); `explained`: a dependency's failure the process
   * has already logged once (its retries are logged at debug only).
   */
  fail(err: unknown, where: string, explained = false): void {
    const { logger } = this.deps;
    const kind = kindOf(err);
    const awaitingReplica = this.failures.kind === 'replication' && this.failures.count > 0;
    this.failures = failed(this.failures, kind);
    this.lastError = errorKind(err);
    this.lastWhere = where;
    if (err instanceof SnapshotLostError && err.evictingRetryMs !== null) {
      // Redis keeps evicting the snapshot: the passes said so once when it started (src/core/snapshot-hold.ts).
      logger.debug({ where, failures: this.failures.count }, 'the restore did not hold; restoring again');
      return;
    }
    if (kind === 'snapshot_lost') {
      // Which keys (every key, some buckets, the checkpoint, the manifest) is in the message; no personal data.
      const message = err instanceof Error ? err.message : String(err);
      logger.warn(
        { where, reason: message },
        'the account keys vanished from Redis; restoring from the Kafka changelog',
      );
      return;
    }
    if (kind === 'commit_unknown') {
      logger.warn(
        { err, where, failures: this.failures.count },
        'a Kafka commit may have landed unseen; the changelog decides before the pass runs again',
      );
      return;
    }
    if (kind === 'replication') {
      // Expected for seconds after every Redis failover: one warning when it starts, not an error a second.
      if (!awaitingReplica) logger.warn({ err, where }, 'waiting for a Redis replica to acknowledge');
      return;
    }
    if (kind === 'setting') {
      // A refusal (another deployment's state, a changelog topic that does not fit): its message is the one line
      // naming what to change; said once per run of them, then again only as a count, until the operator acts.
      if (this.failures.count === 1) logger.error({ where, refused: true }, errorMessage(err));
      else logger.debug({ where, failures: this.failures.count }, 'still refused; see the first line');
      return;
    }
    const fenced = kind === 'fenced';
    if (explained) {
      // The same words as below, at debug: the dependency's own line said it once (src/app/dependencies.ts).
      logger.debug({ err, where, failures: this.failures.count, dependencyFailing: true }, PASS_FAILED);
      return;
    }
    logger.error(
      { err, where, failures: this.failures.count, fenced },
      fenced ? 'another replica took over; commit refused' : PASS_FAILED,
    );
  }

  /** What the schedule says to do after the failures so far. */
  recover(): ReturnType<typeof recovery> {
    return recovery(this.failures, this.deps.timing, (this.deps.random ?? Math.random)());
  }
}
