import type { Logger } from 'pino';
import { decodeChangelogRecord, type ChangelogCheckpoint } from '../core/changelog.js';
import type { SnapshotEntry } from '../core/snapshot-entry.js';

// Redis is a cache of the Kafka changelog. Before a leader's first pass (and whenever Redis lost the account's
// keys, or an operator asks) it compares Redis with Kafka and restores what Redis lacks:
// - Redis holds no checkpoint, or one written against another Kafka cluster, or an operator forced it: a full
//   restore: every entry and the last checkpoint are read from the changelog's beginning;
// - otherwise only the changelog's tail since the offsets of Redis's last commit is read, and what was committed to
//   Kafka after it (a leader that died between its Kafka commit and its Redis commit) is applied, never derived
//   and published again.
// An account with no changelog yet (new, or a snapshot written before changelogs existed) keeps its Redis as is.
// A snapshot of the previous format (no markers) is sealed as it stands when its entries are as many as its entry
// count says, else restored in full. Either way Redis ends sealed: its checkpoint and bucket manifest carry markers, and the manifest lists every
// bucket, so a key lost later (evicted, deleted by hand) is detected by the read or commit that meets it, before any
// event is derived from it (src/redis/lua/commit.lua), and restored in full.

/** A changelog record of the account as the reader hands it over. */
export interface RestoreRecord {
  key: string;
  value: Buffer | null;
  txn: number;
}

/** What a restore reads and writes. */
export interface RestorePorts {
  /** Redis's view: its changelog transaction (null: none), offsets of its last commits, Kafka cluster, emptiness. */
  changelogState(): Promise<{
    txn: number | null;
    offsets: Record<number, number>;
    cluster: string | null;
    empty: boolean;
    /** The checkpoint and the bucket manifest carry their markers (else: the previous format, or keys lost). */
    sealed: boolean;
  }>;
  clearForRestore(): Promise<void>;
  /**
   * Entries to write; null: none (a deletion marker, with the sequence of its review.deleted). `verify`: a tail onto
   * the snapshot Redis holds; a bucket it lost fails the write (SnapshotLostError).
   */
  restoreEntries(
    entries: ReadonlyArray<readonly [id: number, entry: SnapshotEntry | null, deletedSequence?: number]>,
    verify?: boolean,
  ): Promise<void>;
  /** Seals the snapshot Redis holds as it stands (fenced by `epoch`): no changelog can restore it. */
  seal(epoch: number): Promise<void>;
  /** Seals an unsealed snapshot if its entries are as many as its count says; resolves whether it did. */
  sealIfComplete(epoch: number): Promise<boolean>;
  /** Resolves false when the epoch is not above the changelog's epoch floor (a new lease is needed). */
  restoreFinish(
    epoch: number,
    ckpt: ChangelogCheckpoint,
    offsets: Record<number, number>,
    cluster: string,
  ): Promise<boolean>;
  setKafkaCluster(cluster: string): Promise<void>;
  /** Reads the changelog from `from` to fresh end markers; resolves the markers' offsets. */
  readChangelog(
    from: Record<number, number>,
    onRecords: (records: RestoreRecord[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<Record<number, number>>;
  clusterId(): Promise<string>;
}

/** The restore metrics. */
export interface RestoreMetrics {
  restoreFinished(kind: RestoreKind, entries: number, seconds: number): void;
}

/** A full restore (from the changelog's beginning) or a tail (from Redis's last commit). */
export type RestoreKind = 'full' | 'tail';

/** What a restore did: 'reacquire' when the leader must take a new lease (its epoch is not above history). */
export interface RestoreOutcome {
  kind: RestoreKind;
  /** Entries written to Redis (deletion markers included). */
  entries: number;
  /** The changelog transaction Redis reflects now. */
  txn: number;
  reacquire: boolean;
}

/** Brings Redis up to the Kafka changelog for a leader under `epoch`. */
export async function restoreFromChangelog(
  ports: RestorePorts,
  deps: {
    logger: Logger;
    metrics: RestoreMetrics;
    clock: () => number;
    signal?: AbortSignal;
    /** Reports entries written so far (for `status`); called at most every second, and once at the end. */
    progress?: (entries: number, startedAt: number, finished: boolean) => Promise<void>;
  },
  epoch: number,
  force = false,
): Promise<RestoreOutcome> {
  const t0 = deps.clock();
  const [state, cluster] = await Promise.all([ports.changelogState(), ports.clusterId()]);
  const foreign = state.cluster !== null && state.cluster !== cluster;
  // An unsealed snapshot with a checkpoint (written by the previous version, or its manifest lost) cannot tell a lost
  // bucket from a new one: it is sealed as it stands if its entries are as many as its count says, else restored
  // in full.
  const sealed = state.sealed || (!force && !foreign && state.txn !== null && (await ports.sealIfComplete(epoch)));
  const kind: RestoreKind = force || state.txn === null || foreign || !sealed ? 'full' : 'tail';
  const after = kind === 'full' ? 0 : (state.txn ?? 0);
  let cleared = kind === 'tail';
  let latest: ChangelogCheckpoint | null = null;
  let entries = 0;
  let reportedAt = t0;
  const onRecords = async (records: RestoreRecord[]): Promise<void> => {
    const batch: Array<readonly [number, SnapshotEntry | null, number?]> = [];
    for (const record of records) {
      if (record.txn <= after) continue;
      const decoded = decodeChangelogRecord(record.key, record.value);
      if (!decoded) continue;
      // A full restore clears Redis only once the changelog proves it has something of this account.
      if (!cleared) {
        await ports.clearForRestore();
        cleared = true;
      }
      if (decoded.kind === 'checkpoint') {
        if (!latest || decoded.checkpoint.txn > latest.txn) latest = decoded.checkpoint;
      } else {
        // A deletion marker keeps the entry the review had: its review.deleted came next.
        batch.push(decoded.deleted ? [decoded.id, null, decoded.entry.sequence + 1] : [decoded.id, decoded.entry]);
      }
    }
    entries += batch.length;
    await ports.restoreEntries(batch, kind === 'tail');
    if (batch.length > 0 && deps.progress && deps.clock() - reportedAt >= 1_000) {
      reportedAt = deps.clock();
      await deps.progress(entries, t0, false);
    }
  };
  const from = kind === 'full' ? {} : state.offsets;
  const ends = await ports.readChangelog(from, onRecords, deps.signal);
  const restored = latest as ChangelogCheckpoint | null;
  if (!restored) {
    if (state.cluster !== cluster) await ports.setKafkaCluster(cluster);
    if (kind === 'full' && !state.empty && state.txn === null) {
      deps.logger.info('the changelog has nothing of this account yet; Redis is kept as it is');
    }
    if (force && state.sealed && !state.empty) {
      // Keys were lost and nothing can bring them back: the snapshot is sealed as it stands, or no pass would run.
      deps.logger.error(
        { redisTxn: state.txn },
        'the changelog has nothing of this account: the snapshot is kept as it stands, lost keys included',
      );
    }
    if (!sealed || force) await ports.seal(epoch);
    return { kind, entries, txn: state.txn ?? 0, reacquire: false };
  }
  const ok = await ports.restoreFinish(epoch, restored, ends, cluster);
  await deps.progress?.(entries, t0, true);
  const seconds = (deps.clock() - t0) / 1000;
  deps.metrics.restoreFinished(kind, entries, seconds);
  deps.logger.warn(
    { kind, entries, txn: restored.txn, redisTxn: state.txn, foreign, forced: force, seconds },
    kind === 'full' ? 'restored the snapshot from the Kafka changelog' : 'applied Kafka commits Redis had missed',
  );
  return { kind, entries, txn: restored.txn, reacquire: !ok };
}
