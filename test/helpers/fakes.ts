import { pino } from 'pino';
import type { ReviewDeletedEvent, ReviewEvent, ReviewHeartbeatEvent } from '../../src/core/events.js';
import type { LeasePort } from '../../src/bridge/lease-keeper.js';
import { BridgeLoop } from '../../src/bridge/loop.js';
import { BridgeMetrics } from '../../src/ops/metrics.js';
import { Passes, type PassesOptions, type PassesSink, type PassesSnapshot } from '../../src/bridge/passes/index.js';
import { FingerprintKey, type FingerprintKeySource } from '../../src/core/fingerprint-key.js';
import type { ChangelogBatch, ChangelogOffsets, DeadLetter } from '../../src/kafka/publisher.js';
import { applyCheckpointUpdate, EMPTY_CHECKPOINT } from '../../src/core/checkpoint.js';
import type { CheckpointChange } from '../../src/core/checkpoint-change.js';
import { SnapshotLostError } from '../../src/core/errors.js';
import { checkpointRecord, entryRecord, type ChangelogCheckpoint } from '../../src/core/changelog.js';
import type { RestoreRecord } from '../../src/bridge/restore.js';
import type { SnapshotEntry } from '../../src/core/snapshot-entry.js';
import type { Checkpoint, CheckpointUpdate, PassProgress } from '../../src/redis/snapshot-store.js';
import type { ResyncRequest } from '../../src/core/resync-request.js';
import type { Review } from '../../src/core/review.js';
import type { ListOptions, Page, ReviewSource } from '../../src/upstream/types.js';
import { turns } from './wait.js';

// In-memory stand-ins for the ports of the pipeline, the passes and the loop, for unit tests only (integration
// and e2e tests use real Redis and Kafka). Each one records what it was asked in `log`, in call order.

/** A logger that writes nothing. */
export const silentLogger = pino({ level: 'silent' });

/** Metrics on their own registry (pure, no I/O). */
export function testMetrics(): BridgeMetrics {
  return new BridgeMetrics({ account: 'test' });
}

/** A promise with its resolve/reject exposed, to hold a fake operation open until the test lets it go. */
export interface Gate {
  promise: Promise<void>;
  open(): void;
  fail(err: Error): void;
}

/** Creates a gate. */
export function gate(): Gate {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

/** The snapshot as a Map and a checkpoint object. */
export class FakeSnapshot implements PassesSnapshot {
  readonly entries = new Map<number, SnapshotEntry>();
  ckpt: Checkpoint = { ...EMPTY_CHECKPOINT };
  readonly remembered = new Set<string>();
  sweepRequested = false;
  /** When set, the next commit waits for this gate (and fails if it fails). */
  commitGate: Gate | null = null;

  constructor(private readonly log: string[]) {}

  async read(ids: readonly number[], _epoch?: number, minTxn?: number): Promise<Map<number, SnapshotEntry>> {
    this.log.push(`read ${ids.join(',')}`);
    if (minTxn !== undefined && (this.txn ?? 0) < minTxn) throw new SnapshotLostError('LOST: behind');
    const out = new Map<number, SnapshotEntry>();
    for (const id of ids) {
      const e = this.entries.get(id);
      if (e) out.set(id, e);
    }
    return out;
  }

  /** Reviews reported deleted: the sequence of their review.deleted (as Redis's gone hash). */
  readonly gone = new Map<number, number>();

  async goneSequences(ids: readonly number[]): Promise<Map<number, number>> {
    return new Map(ids.flatMap((id) => (this.gone.has(id) ? [[id, this.gone.get(id)!] as const] : [])));
  }

  async commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: { txn: number; offsets: Record<number, number> },
    expectTxn?: number,
  ) {
    const g = this.commitGate;
    this.commitGate = null;
    if (g) await g.promise;
    if (expectTxn !== undefined && (this.txn ?? 0) !== expectTxn) throw new SnapshotLostError('LOST: behind');
    this.log.push(`commit ${entries.map(([id]) => id).join(',')}${update.sweep !== undefined ? ' +sweep' : ''}`);
    for (const [id, e] of entries) this.entries.set(id, e);
    this.ckpt = applyCheckpointUpdate(this.ckpt, update);
    if (mark) {
      this.txn = mark.txn;
      Object.assign(this.offsets, mark.offsets);
    }
    this.hasCheckpoint = true;
  }

  /** The changelog transaction this snapshot reflects (null: none). */
  txn: number | null = null;
  readonly offsets: Record<number, number> = {};
  cluster: string | null = null;
  /** False after clear(): as a Redis that lost every key. */
  hasCheckpoint = false;
  restoreRequested = false;

  /** Forgets everything, as a flushed Redis. */
  clear(): void {
    this.entries.clear();
    this.gone.clear();
    this.ckpt = { ...EMPTY_CHECKPOINT };
    this.txn = null;
    for (const p of Object.keys(this.offsets)) delete this.offsets[Number(p)];
    this.cluster = null;
    this.hasCheckpoint = false;
    this.sealed = false;
  }

  async changelogTxn(): Promise<number> {
    return this.txn ?? 0;
  }

  async changelogState() {
    const empty = !this.hasCheckpoint && this.entries.size === 0;
    return { txn: this.txn, offsets: { ...this.offsets }, cluster: this.cluster, empty, sealed: this.sealed };
  }

  /** Sealed as Redis is after a restore or a seal (partial loss is not modelled here, only the flag; a flush clears it). */
  sealed = true;

  async seal(): Promise<void> {
    this.log.push('seal');
    this.sealed = true;
  }

  /** Whether an unsealed snapshot's entries match its count (sealIfComplete). */
  complete = true;

  async sealIfComplete(): Promise<boolean> {
    if (this.complete) await this.seal();
    return this.complete;
  }

  async clearForRestore(): Promise<void> {
    this.log.push('clear');
    this.clear();
  }

  async restoreEntries(
    _epoch: number,
    entries: ReadonlyArray<readonly [number, SnapshotEntry | null, number?]>,
  ): Promise<void> {
    for (const [id, entry, deletedSequence] of entries) {
      if (entry) this.entries.set(id, entry);
      else this.entries.delete(id);
      if (!entry && deletedSequence !== undefined) this.gone.set(id, deletedSequence);
    }
  }

  async restoreFinish(
    epoch: number,
    ckpt: ChangelogCheckpoint,
    offsets: Record<number, number>,
    cluster: string,
  ): Promise<boolean> {
    const { txn, epoch: floor, ...checkpoint } = ckpt;
    this.ckpt = checkpoint;
    this.txn = txn;
    Object.assign(this.offsets, offsets);
    this.cluster = cluster;
    this.hasCheckpoint = true;
    this.sealed = true;
    return epoch > floor;
  }

  async setKafkaCluster(cluster: string): Promise<void> {
    this.cluster = cluster;
  }

  async takeRestoreRequest(): Promise<boolean> {
    const r = this.restoreRequested;
    this.restoreRequested = false;
    return r;
  }

  async checkpoint(): Promise<Checkpoint> {
    return { ...this.ckpt };
  }

  async unseenDeadLetters(digests: readonly string[]): Promise<Set<string>> {
    return new Set(digests.filter((d) => !this.remembered.has(d)));
  }

  async rememberDeadLetters(digests: ReadonlySet<string>): Promise<void> {
    for (const d of digests) this.remembered.add(d);
  }

  /** Entries per scanEntries batch (as SCAN returns some buckets at a time), and a hook run per batch. */
  scanBatch = Infinity;
  onScanBatch: (() => void) | null = null;

  async *scanEntries(): AsyncGenerator<Array<[number, SnapshotEntry]>> {
    const all = [...this.entries.entries()];
    for (let i = 0; i < all.length; i += this.scanBatch) {
      this.onScanBatch?.();
      yield all.slice(i, i + this.scanBatch);
    }
  }

  async removeEntries(_epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>): Promise<number> {
    this.log.push(`remove ${entries.map(([id]) => id).join(',')}`);
    let removed = 0;
    for (const [id, entry] of entries) {
      if (!this.entries.delete(id)) continue;
      removed += 1;
      this.gone.set(id, entry.sequence + 1);
    }
    return removed;
  }

  pausedAt: number | null = null;
  resyncRequest: ResyncRequest | null = null;
  readonly progress: PassProgress[] = [];

  async takeResyncRequest(): Promise<ResyncRequest | null> {
    if (this.activeResync) return this.activeResync;
    const r = this.resyncRequest;
    this.resyncRequest = null;
    this.activeResync = r;
    return r;
  }

  async requestResync(request: ResyncRequest): Promise<void> {
    this.resyncRequest = request;
  }

  /** The resync taken and not yet finished (as the active key in Redis). */
  activeResync: ResyncRequest | null = null;

  async requeueResync(): Promise<void> {}

  async finishResync(request: ResyncRequest): Promise<void> {
    if (this.activeResync?.id === request.id) this.activeResync = null;
  }

  async setPassProgress(progress: PassProgress): Promise<void> {
    this.progress.push(progress);
  }

  async size(): Promise<number> {
    return this.entries.size;
  }

  async pausedSince(): Promise<number | null> {
    return this.pausedAt;
  }

  /** An operator's pending checkpoint change, as stored (JSON), or null. */
  checkpointRequest: string | null = null;

  async nextCheckpointChange(): Promise<{ change: CheckpointChange; stored: string } | null> {
    const stored = this.checkpointRequest;
    return stored === null ? null : { change: JSON.parse(stored) as CheckpointChange, stored };
  }

  async checkpointChangeApplied(stored: string): Promise<void> {
    if (this.checkpointRequest === stored) this.checkpointRequest = null;
  }

  async takeSweepRequest(): Promise<boolean> {
    const r = this.sweepRequested;
    this.sweepRequested = false;
    return r;
  }
}

/** A sink that keeps what it was given; a gate can hold or fail the next publish. */
export class FakeSink implements PassesSink {
  readonly events: ReviewEvent[] = [];
  readonly deletions: ReviewDeletedEvent[] = [];
  readonly heartbeats: ReviewHeartbeatEvent[] = [];
  readonly deadLetters: DeadLetter[] = [];
  /** Gates for the next publishes, in order. */
  readonly gates: Gate[] = [];

  constructor(private readonly log: string[]) {}

  async publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets> {
    this.log.push(`deleted ${events.map((e) => e.subject).join(',')}`);
    this.deletions.push(...events);
    return this.appendChangelog(changelog);
  }

  /** The changelog as one partition (0): key, value, transaction. */
  readonly changelog: RestoreRecord[] = [];
  transactionsBegun = 0;

  async beginTransactions(): Promise<void> {
    this.transactionsBegun += 1;
  }

  async readChangelog(
    from: Record<number, number>,
    onRecords: (records: RestoreRecord[]) => Promise<void>,
  ): Promise<Record<number, number>> {
    await onRecords(this.changelog.slice(from[0] ?? 0));
    return { 0: this.changelog.length };
  }

  async clusterId(): Promise<string> {
    return 'fake-cluster';
  }

  private appendChangelog(batch: ChangelogBatch | undefined): ChangelogOffsets {
    if (!batch) return {};
    const offset = this.changelog.length;
    const txn = batch.checkpoint.txn;
    for (const [id, entry] of batch.entries) this.changelog.push({ ...entryRecord(id, entry), txn });
    for (const [id, entry] of batch.deleted ?? []) this.changelog.push({ ...entryRecord(id, entry, true), txn });
    const ckpt = checkpointRecord(batch.checkpoint);
    this.changelog.push({ key: ckpt.key, value: Buffer.from(ckpt.value), txn });
    return { 0: offset };
  }

  async publishHeartbeat(event: ReviewHeartbeatEvent): Promise<void> {
    this.heartbeats.push(event);
  }

  /** The Kafka message size limit the pipeline fits events to (none when undefined). */
  maxMessageBytes: number | undefined = undefined;

  /** When set, a publish that includes an event for which this returns an error fails with it. */
  refuse: ((event: ReviewEvent) => Error | null) | null = null;

  async publish(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    _states?: unknown,
    changelog?: ChangelogBatch,
  ): Promise<ChangelogOffsets> {
    for (const event of events) {
      const err = this.refuse?.(event);
      if (err) throw err;
    }
    const ids = events
      .map((e) => `${e.type.slice(7)}:${e.subject}`)
      .concat(deadLetters.map((d) => `dl:${d.reject.id}`));
    this.log.push(`publish ${ids.join(',')}`);
    const g = this.gates.shift();
    if (g) await g.promise;
    this.events.push(...events);
    this.deadLetters.push(...deadLetters);
    this.log.push(`acked ${ids.join(',')}`);
    return this.appendChangelog(changelog);
  }
}

/** A review with sane defaults. */
export function review(id: number, overrides: Partial<Review> = {}): Review {
  return {
    id,
    updated_date: 1_700_000_000_000 + id,
    client_publication_status: 'PENDING',
    pwr_publication_status: 'PENDING',
    headline: `review ${id}`,
    ...overrides,
  };
}

/** A page of the given reviews, fetched a minute ago (before any pass a test opens after building it). */
export function page(reviews: Review[], cursor: string | null = null, nextCursor: string | null = null): Page {
  return { cursor, nextCursor, reviews, rejects: [], fetchedAt: Date.now() - 60_000 };
}

/** A listing served from fixed pages; records whether its iterators were closed early. */
export class FakeSource implements ReviewSource {
  closedEarly = 0;
  readonly requests: ListOptions[] = [];
  /** When set, the page at this index throws instead. */
  failAt: { index: number; error: Error } | null = null;

  constructor(public pagesToServe: Page[]) {}

  pages(options: ListOptions): AsyncIterable<Page> {
    this.requests.push(options);
    return { [Symbol.asyncIterator]: () => this.walk(this.pagesToServe) };
  }

  private async *walk(pages: Page[]): AsyncGenerator<Page> {
    let finished = false;
    try {
      for (let i = 0; i < pages.length; i++) {
        if (this.failAt?.index === i) throw this.failAt.error;
        yield pages[i]!;
      }
      finished = true;
    } finally {
      if (!finished) this.closedEarly += 1;
    }
  }

  async checkCredentials(): Promise<void> {}

  async close(): Promise<void> {}
}

/** A lease that can be told to lead, stand by or fail, and records its calls. */
export class FakeLease implements LeasePort {
  epoch = 1;
  leading = true;
  renewals = 0;
  released = 0;
  inFlight = 0;
  maxInFlight = 0;
  /** When set, each renewal answers only after this many turns of the event loop (a slow Redis). */
  delayTurns = 0;
  private held = 0;

  async renew(): Promise<number> {
    this.renewals += 1;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await turns(this.delayTurns);
      this.held = this.leading ? this.epoch : 0;
      return this.held;
    } finally {
      this.inFlight -= 1;
    }
  }

  /** Like the real lease: what the last renewal said, until the next one. */
  current(): number {
    return this.held;
  }

  async release(): Promise<void> {
    this.released += 1;
    this.held = 0;
    this.leading = false;
  }
}

/** Passes over fakes with a fingerprint key (the restore tests' set-up); `options` adds to or replaces the defaults. */
export function passesOnFakes(
  adapters: {
    snapshot: FakeSnapshot;
    sink: FakeSink;
    source: ReviewSource;
    keySource: FingerprintKeySource;
    metrics?: BridgeMetrics;
  },
  options: Partial<PassesOptions> = {},
): Passes {
  const { snapshot, sink, source, keySource, metrics = testMetrics() } = adapters;
  return new Passes(
    {
      snapshot,
      sink,
      metrics,
      logger: silentLogger,
      eventSource: 'urn:test',
      initialLoadMode: 'mark',
      fingerprintKey: () => keySource.get(),
    },
    source,
    { overlapMs: 1000, metrics, deleteMaxFraction: null, account: 'test', keySource, ...options },
  );
}

/**
 * Passes over in-memory stand-ins with no upstream records, as a unit test of what the passes do with the snapshot
 * and the sink builds them; `log` records both sides' calls in order.
 */
export function loggedPassesOnFakes(): {
  passes: Passes;
  snapshot: FakeSnapshot;
  sink: FakeSink;
  log: string[];
  pipeline: Passes['pipeline'];
} {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const key = new FingerprintKey(Buffer.alloc(32, 9));
  const keySource: FingerprintKeySource = { get: async () => key, persist: async () => undefined };
  const passes = passesOnFakes({ snapshot, sink, source: new FakeSource([]), keySource });
  return { passes, snapshot, sink, log, pipeline: passes.pipeline };
}

/** A clock the loop's sleeps move forward at once (each sleep yields a turn so that awaited work runs). */
export class FakeTime {
  now: number;
  /** How many times the loop has slept (each a decision carried out: a standby period, a paused look). */
  sleeps = 0;
  /** Every wait of the loop, in order (ms). */
  readonly slept: number[] = [];
  constructor(start = 1_000_000) {
    this.now = start;
  }
  readonly clock = (): number => this.now;
  readonly sleep = async (ms: number): Promise<void> => {
    this.now += ms;
    this.sleeps += 1;
    this.slept.push(ms);
    await new Promise((r) => setImmediate(r));
  };
}

/** A loop test's fakes: a fake clock at the present, and the snapshot and sink logging their calls into `log`. */
export function loopFakes() {
  const time = new FakeTime(Date.now());
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  const deps = {
    snapshot,
    sink,
    metrics,
    logger: silentLogger,
    eventSource: 'urn:test',
    initialLoadMode: 'mark' as const,
  };
  return { time, log, snapshot, sink, metrics, deps };
}

/**
 * A leader's loop over `passes` on fake time, with the short timings the deletion tests use (polls every second, no
 * scheduled sweep, a 600 ms lease): what they start, drive with `until` and stop.
 */
export function fastLoop(passes: Passes, time: FakeTime, metrics: BridgeMetrics): BridgeLoop {
  return new BridgeLoop({
    passes,
    lease: new FakeLease(),
    metrics,
    logger: silentLogger,
    clock: time.clock,
    sleep: time.sleep,
    timing: { pollIntervalMs: 1_000, sweepIntervalMs: 0, leaseTtlMs: 600, maxBackoffMs: 20 },
  });
}
