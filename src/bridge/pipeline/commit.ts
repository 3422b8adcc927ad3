import type { Span } from '@opentelemetry/api';
import type { ChangelogBatch, ChangelogOffsets } from '../../kafka/publisher.js';
import type { ReviewDeletedEvent } from '../../core/events.js';
import type { SnapshotEntry } from '../../core/snapshot-entry.js';
import { applyCheckpointUpdate, type Checkpoint, type CheckpointUpdate } from '../../core/checkpoint.js';
import type { ChangelogCheckpoint } from '../../core/changelog.js';
import type { Page } from '../../upstream/types.js';
import { inSpan, SPAN_ATTRIBUTES, type PassTracer } from '../../ops/tracing.js';
import { kindOf, SnapshotLostError } from '../../core/errors.js';
import type { ChangelogMark, CommitUnit, PipelineDeps } from './types.js';

// The commit step, the last of a page: Kafka first (events, state rows, dead letters, and the changelog's entries
// and whole checkpoint under the next transaction number), then the same entries and checkpoint into Redis. It
// keeps where the changelog stands, and a commit Kafka has and Redis not yet, which goes to Redis before anything,
// reads included: a page diffed against a Redis behind Kafka would derive that commit's events again. A Kafka commit
// whose outcome is unknown blocks every later read and commit until the changelog says what happened (reset(),
// after a restore): a later commit under the next transaction number would take that number if the first one
// landed, and the restore's tail would then skip it.

/** A commit Kafka holds and Redis not yet. */
interface PendingRedis {
  epoch: number;
  entries: ReadonlyArray<[number, SnapshotEntry]>;
  update: CheckpointUpdate;
  mark: ChangelogMark;
  /**
   * A deletion's removals, written before the mark: Kafka holds the review.deleted events, so Redis must drop the
   * entries (and keep their deleted sequences) before the next read, or a comeback reads as unchanged and a later
   * sweep reports the deletion again. Null once written.
   */
  removal: Removal | null;
}

/** The entries a deletion removes from Redis, and how. */
interface Removal {
  entries: ReadonlyArray<[number, SnapshotEntry]>;
  remove: (epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>) => Promise<number>;
  /** How many the first successful removal took away. */
  removed: number | null;
}

/** Where the passes publish deletions (review.deleted events with tombstones and changelog deletion markers). */
export interface DeletionPublisher {
  publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets>;
}

/** Writes commit units to Kafka, then Redis, in changelog order. */
export class Committer {
  /** The checkpoint as Kafka's changelog holds it after the last commit; loaded from Redis when null. */
  private position: ChangelogCheckpoint | null = null;
  /** The changelog transaction Redis is known to hold (null: not known yet this leadership). */
  redisTxn: number | null = null;
  /** The leadership sealed the account (see Passes.prepare): reads and commits ask for its markers. */
  sealed = false;
  /** A commit Kafka has and Redis not yet (its Redis write failed): written before anything else. */
  private pendingRedis: PendingRedis | null = null;
  /** The Redis write of pendingRedis under way: a read that catches up waits for it instead of writing it twice. */
  private flushing: Promise<void> | null = null;
  /** A Kafka commit whose outcome is unknown: nothing is read or committed until a restore resolves it. */
  private unresolved: { err: unknown } | null = null;

  constructor(
    private readonly deps: Pick<PipelineDeps, 'snapshot' | 'sink' | 'metrics' | 'beforeCommit'>,
    private readonly tracer: PassTracer,
  ) {}

  /** Forgets what this process knows of the changelog (see PagePipeline.reset). */
  reset(): void {
    this.position = null;
    this.pendingRedis = null;
    this.redisTxn = null;
    this.unresolved = null;
    this.sealed = false;
  }

  /**
   * Makes Redis hold every Kafka commit of this process before a page is read (a commit whose Redis write failed
   * is written now); throws while a Kafka commit's outcome is unknown.
   */
  async catchUp(): Promise<void> {
    this.guard();
    await this.flushPending();
  }

  /** Throws while a Kafka commit's outcome is unknown (a restore resolves it, then reset() clears it). */
  guard(): void {
    if (this.unresolved) throw this.unresolved.err;
  }

  /**
   * Commits one unit. A unit of checkpoint fields only goes to Redis only unless `durable`: the cursor of a sweep's
   * unchanged pages only saves re-reading pages, and a restore that misses it re-reads a few, which publishes
   * nothing twice. `span`: the page's (or pass's) span, under which the publish and commit steps are traced.
   */
  async commitUnit(epoch: number, unit: CommitUnit, page?: Page, span?: Span): Promise<void> {
    const { deps } = this;
    await this.catchUp();
    const entries = unit.entries ?? [];
    const update = unit.update ?? {};
    const events = unit.events ?? [];
    const deadLetters = unit.deadLetters ?? [];
    const states = unit.states ?? [];
    const position = (this.position ??= await this.loadPosition(epoch));
    const next = applyCheckpointUpdate(position, update);
    const empty = events.length === 0 && deadLetters.length === 0 && states.length === 0 && entries.length === 0;
    // A checkpoint-only unit reaches Kafka only when it moves what a restore needs (not an idle poll's clock).
    if (empty && !(unit.durable && movesCheckpoint(position, next))) {
      if (!unit.force && Object.keys(update).length === 0) return;
      await this.write(epoch, [], update);
      this.position = next;
      return;
    }
    const changelog = { ...next, txn: position.txn + 1, epoch };
    const t0 = performance.now();
    const offsets = await this.unknownKept(() =>
      inSpan(
        this.tracer,
        span,
        'publish',
        () => deps.sink.publish(events, deadLetters, states, { entries: keyed(entries), checkpoint: changelog }),
        { [SPAN_ATTRIBUTES.events]: events.length },
      ),
    );
    deps.metrics.observePublish((performance.now() - t0) / 1000);
    // Kafka has it now: from here on this unit is never derived again, only written to Redis (now or on restore).
    this.position = changelog;
    this.pendingRedis = { epoch, entries, update, mark: { txn: changelog.txn, offsets }, removal: null };
    if (page) await deps.beforeCommit?.(page);
    await inSpan(this.tracer, span, 'commit', () => this.flushPending(), { [SPAN_ATTRIBUTES.epoch]: epoch });
  }

  /**
   * Publishes review.deleted events with their tombstones and changelog deletion markers, then removes the
   * entries from Redis; resolves how many were removed.
   */
  async commitDeletions(
    epoch: number,
    events: readonly ReviewDeletedEvent[],
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    sink: DeletionPublisher,
    remove: (epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>) => Promise<number>,
  ): Promise<number> {
    await this.catchUp();
    const position = (this.position ??= await this.loadPosition(epoch));
    const changelog = { ...position, txn: position.txn + 1, epoch };
    const offsets = await this.unknownKept(() =>
      sink.publishDeletions(events, { entries: [], deleted: keyed(entries), checkpoint: changelog }),
    );
    this.position = changelog;
    // The removal is part of the pending write: one that fails (Redis restarting) is retried before the next read.
    const removal: Removal = { entries, remove, removed: null };
    this.pendingRedis = { epoch, entries: [], update: {}, mark: { txn: changelog.txn, offsets }, removal };
    await this.flushPending();
    return removal.removed ?? 0;
  }

  /** Runs a Kafka commit; one whose outcome is unknown is kept, and blocks what follows (see guard). */
  private async unknownKept<T>(commit: () => Promise<T>): Promise<T> {
    try {
      return await commit();
    } catch (err) {
      if (kindOf(err) === 'commit_unknown') this.unresolved ??= { err };
      throw err;
    }
  }

  private async flushPending(): Promise<void> {
    // One write at a time: the page in flight may be writing the pending commit while a read catches up.
    while (this.flushing) await this.flushing.catch(() => undefined);
    const pending = this.pendingRedis;
    if (!pending) return;
    const flushing = (this.flushing = this.writePending(pending));
    try {
      await flushing;
      if (this.pendingRedis === pending) this.pendingRedis = null;
    } finally {
      if (this.flushing === flushing) this.flushing = null;
    }
  }

  // The removals first (each removes only an entry still as it was, so a retry after a partial one is harmless),
  // then the entries and the mark.
  private async writePending(pending: PendingRedis): Promise<void> {
    const { removal } = pending;
    if (removal) {
      removal.removed = await removal.remove(pending.epoch, removal.entries);
      pending.removal = null;
    }
    await this.write(pending.epoch, pending.entries, pending.update, pending.mark);
  }

  private async loadPosition(epoch: number): Promise<ChangelogCheckpoint> {
    const [checkpoint, txn] = await Promise.all([
      this.deps.snapshot.checkpoint(true, this.sealed),
      this.deps.snapshot.changelogTxn(),
    ]);
    // The next number comes from here: a Redis that forgot transactions it is known to hold (its checkpoint
    // evicted after a restore) would number the next commit as one Kafka already has, and a restore picking or
    // skipping records by number would then take the wrong checkpoint or skip that commit's entries.
    if (this.redisTxn !== null && txn < this.redisTxn) {
      throw new SnapshotLostError(`LOST: Redis holds changelog transaction ${txn}, at least ${this.redisTxn} expected`);
    }
    this.redisTxn = txn;
    return { ...checkpoint, txn, epoch };
  }

  private async write(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: ChangelogMark,
  ): Promise<void> {
    const t0 = performance.now();
    // Redis must hold exactly the transactions before this one: a failover that lost some is caught here.
    const expectTxn = this.redisTxn === null ? undefined : this.redisTxn;
    await this.deps.snapshot.commit(epoch, entries, update, mark, expectTxn, this.sealed);
    if (mark) this.redisTxn = mark.txn;
    this.deps.metrics.observeCommit((performance.now() - t0) / 1000);
  }
}

// Entries written before keys cannot go to the changelog (their fingerprints are unkeyed); the diff re-keys
// every entry it writes, so this only drops what a key-less configuration writes.
function keyed(entries: ReadonlyArray<readonly [number, SnapshotEntry]>): Array<readonly [number, SnapshotEntry]> {
  return entries.filter(([, entry]) => entry.keyId !== null);
}

/** Whether a checkpoint change matters to a restore: anything but the time of the last poll. */
function movesCheckpoint(before: Checkpoint, after: Checkpoint): boolean {
  return (
    before.watermark !== after.watermark ||
    before.initialDone !== after.initialDone ||
    before.lastSweepAt !== after.lastSweepAt ||
    before.deferredSweeps !== after.deferredSweeps ||
    before.deferredReason !== after.deferredReason ||
    JSON.stringify(before.unreadable) !== JSON.stringify(after.unreadable) ||
    JSON.stringify(before.unreadableCandidates) !== JSON.stringify(after.unreadableCandidates) ||
    JSON.stringify(before.sweep) !== JSON.stringify(after.sweep)
  );
}
