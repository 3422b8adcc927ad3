import type { Checkpoint, CheckpointUpdate } from '../core/checkpoint.js';
import { FencedError, SnapshotLostError } from '../core/errors.js';
import { durably, scanKeys, type AccountKeys, type BridgeRedis } from './connection.js';
import { z } from 'zod';
import { ResyncRequestSchema, type ResyncRequest } from '../core/resync-request.js';
import { decodeEntry, encodeEntry, type SnapshotEntry } from '../core/snapshot-entry.js';
import type { ChangelogCheckpoint } from '../core/changelog.js';

/** Where Kafka's changelog stood after a commit (see ChangelogMark in src/bridge/pipeline.ts). */
interface CommitMark {
  txn: number;
  offsets: Record<number, number>;
}

// The snapshot store: the bridge's memory of every review, and the checkpoint that says how far it got.
// Entries live in hash buckets of 128 reviews (field = id within the bucket) because small hashes are stored as
// compact listpacks: this is what keeps the snapshot at 80-120 bytes a review.

const BUCKET_BITS = 7;

export type { Checkpoint, CheckpointUpdate } from '../core/checkpoint.js';

/** Progress of the running (or last) sweep, initial load or resync, as the leader publishes it for `status`. */
export const PassProgressSchema = z.object({
  kind: z.enum(['initial', 'sweep', 'resync', 'restore']),
  /** The resync request this pass serves (resync only), so `resync --wait` follows the right one. */
  requestId: z.string().nullable(),
  seen: z.number().int().nonnegative(),
  estimatedTotal: z.number().int().nonnegative().nullable(),
  startedAt: z.number().int(),
  finishedAt: z.number().int().nullable(),
});

/** Progress of a long pass as stored in Redis. */
export type PassProgress = z.infer<typeof PassProgressSchema>;

export { FencedError, SnapshotLostError } from '../core/errors.js';

const num = (v: string | undefined): number | null => (v === undefined || v === '' ? null : Number(v));

/** Reads and commits snapshot entries and the checkpoint of one account. */
export class SnapshotStore {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /**
   * The entries of the given reviews, in one pipelined round trip. With `epoch`, the same round trip checks that
   * the account's keys are still those of that leadership: entries read from a Redis that lost them (and maybe
   * got a new lease since) would diff every review as new, so the read fails instead (SnapshotLostError, or
   * FencedError when another epoch holds the account).
   */
  async read(ids: readonly number[], epoch?: number, minTxn?: number): Promise<Map<number, SnapshotEntry>> {
    const byBucket = new Map<number, number[]>();
    for (const id of ids) {
      const bucket = Math.floor(id / 2 ** BUCKET_BITS);
      let list = byBucket.get(bucket);
      if (!list) byBucket.set(bucket, (list = []));
      list.push(id);
    }
    const pipeline = this.redis.pipeline();
    const order = [...byBucket.entries()];
    for (const [bucket, list] of order) {
      pipeline.hmgetBuffer(this.keys.bucket(bucket), ...list.map(fieldOf));
    }
    if (epoch !== undefined) pipeline.get(this.keys.epoch);
    if (minTxn !== undefined) pipeline.hget(this.keys.checkpoint, 'txn');
    const results = (await pipeline.exec()) ?? [];
    if (epoch !== undefined) {
      const [err, current] = results[order.length] ?? [new Error('missing pipeline result'), null];
      if (err) throw err;
      if (current === null) throw new SnapshotLostError('LOST: the account keys are gone');
      if (current !== String(epoch)) throw new FencedError(`FENCED: epoch ${epoch} superseded by ${String(current)}`);
    }
    if (minTxn !== undefined) {
      const [err, txn] = results[order.length + (epoch !== undefined ? 1 : 0)] ?? [new Error('missing result'), null];
      if (err) throw err;
      // Fewer transactions than this process already wrote: a failover lost commits; diffing now would publish
      // their changes again. The leader restores the missing ones from Kafka first.
      if (Number(txn ?? 0) < minTxn)
        throw new SnapshotLostError(`LOST: Redis holds changelog transaction ${txn ?? 0}, at least ${minTxn} expected`);
    }
    const entries = new Map<number, SnapshotEntry>();
    order.forEach(([, list], i) => {
      const [err, values] = results[i] ?? [new Error('missing pipeline result'), null];
      if (err) throw err;
      (values as (Buffer | null)[]).forEach((value, j) => {
        if (value) entries.set(list[j]!, decodeEntry(value));
      });
    });
    return entries;
  }

  /**
   * Writes entries and checkpoint atomically, with the changelog transaction they come from; throws FencedError
   * if `epoch` is no longer current and SnapshotLostError if the account's keys are gone.
   */
  async commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: CommitMark,
    expectTxn?: number,
  ): Promise<void> {
    const { bucketKeys, triples } = this.entryArgs(entries);
    const pairs = checkpointPairs(update);
    if (expectTxn !== undefined) pairs.push('expect_txn', String(expectTxn));
    if (mark) {
      pairs.push('txn', String(mark.txn));
      // One field per partition: a commit that touched some partitions keeps the others' offsets.
      for (const [partition, offset] of Object.entries(mark.offsets)) pairs.push(`clo:${partition}`, String(offset));
    }
    const keys = [this.keys.epoch, this.keys.checkpoint, this.keys.count, ...bucketKeys];
    try {
      // Replicas acknowledge the commit before the next page is published (see README: a Redis failover).
      await durably(this.redis, (p) =>
        p.bridgeCommit(keys.length, ...keys, String(epoch), String(pairs.length / 2), ...pairs, ...triples),
      );
    } catch (err) {
      throw scriptError(err);
    }
  }

  /** The number of the last changelog transaction Redis reflects (0: none, or a snapshot older than changelogs). */
  async changelogTxn(): Promise<number> {
    return num((await this.redis.hget(this.keys.checkpoint, 'txn')) ?? undefined) ?? 0;
  }

  /**
   * What a restore compares: Redis's changelog transaction (null when Redis holds no checkpoint at all), the
   * changelog offsets its last commits got, the Kafka cluster it was restored from or written to, the epoch counter.
   */
  async changelogState(): Promise<{
    txn: number | null;
    offsets: Record<number, number>;
    cluster: string | null;
    empty: boolean;
  }> {
    const [h] = (await durably(this.redis, (p) => p.hgetall(this.keys.checkpoint))) as [Record<string, string>];
    const offsets: Record<number, number> = {};
    for (const [field, value] of Object.entries(h)) {
      if (field.startsWith('clo:')) offsets[Number(field.slice(4))] = Number(value);
    }
    const empty = Object.keys(h).length === 0;
    return { txn: num(h.txn), offsets, cluster: h.kafka_cluster ?? null, empty };
  }

  /** Removes the account's snapshot (entries, count, checkpoint) before a full restore; leases and requests stay. */
  async clearForRestore(): Promise<void> {
    const keys: string[] = [this.keys.checkpoint, this.keys.count];
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern)) keys.push(...found);
    for (let i = 0; i < keys.length; i += 500) await this.redis.unlink(...keys.slice(i, i + 500));
  }

  /** Writes restored entries (deleted: null) in one pipelined round trip; not fenced (restoreFinish is). */
  async restoreEntries(entries: ReadonlyArray<readonly [number, SnapshotEntry | null]>): Promise<void> {
    // Pipelines of a bounded size: a whole fetch at once would queue ~1 KiB of command objects per entry.
    for (let i = 0; i < entries.length; i += 2_000) {
      const pipeline = this.redis.pipeline();
      for (const [id, entry] of entries.slice(i, i + 2_000)) {
        const key = this.keys.bucket(Math.floor(id / 2 ** BUCKET_BITS));
        if (entry) pipeline.hset(key, fieldOf(id), encodeEntry(entry));
        else pipeline.hdel(key, fieldOf(id));
      }
      const results = (await pipeline.exec()) ?? [];
      for (const [err] of results) if (err) throw err;
    }
  }

  /**
   * Completes a restore: counts the entries, writes the changelog's checkpoint (fenced by `epoch`) with where
   * the changelog was read to, and raises the epoch counter to the changelog's epoch floor. Resolves false when
   * `epoch` itself is not above that floor (the caller must take a new lease: its epoch is not newer than history).
   */
  async restoreFinish(
    epoch: number,
    ckpt: ChangelogCheckpoint,
    offsets: Record<number, number>,
    cluster: string,
  ): Promise<boolean> {
    let count = 0;
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern)) {
      const pipeline = this.redis.pipeline();
      for (const key of found) pipeline.hlen(key);
      for (const [err, n] of (await pipeline.exec()) ?? []) {
        if (err) throw err;
        count += Number(n);
      }
    }
    await this.redis.set(this.keys.count, String(count));
    const pairs = checkpointPairs({
      ...(ckpt.watermark !== null ? { watermark: ckpt.watermark } : {}),
      initialDone: ckpt.initialDone,
      sweep: ckpt.sweep,
      ...(ckpt.lastSweepAt !== null ? { lastSweepAt: ckpt.lastSweepAt } : {}),
      ...(ckpt.lastIncrementalAt !== null ? { lastIncrementalAt: ckpt.lastIncrementalAt } : {}),
      unreadable: ckpt.unreadable,
      deferredSweeps: ckpt.deferredSweeps,
      deferredReason: ckpt.deferredReason,
    });
    pairs.push('txn', String(ckpt.txn), 'kafka_cluster', cluster);
    for (const [partition, offset] of Object.entries(offsets)) pairs.push(`clo:${partition}`, String(offset));
    const keys = [this.keys.epoch, this.keys.checkpoint, this.keys.count];
    try {
      await durably(this.redis, (p) =>
        p.bridgeCommit(keys.length, ...keys, String(epoch), String(pairs.length / 2), ...pairs),
      );
    } catch (err) {
      throw scriptError(err);
    }
    if (epoch > ckpt.epoch) return true;
    await this.redis.bridgeEpochFloor(this.keys.epoch, String(ckpt.epoch));
    return false;
  }

  /** Records the Kafka cluster the changelog is written to (a Redis later pointed at another cluster is restored). */
  async setKafkaCluster(cluster: string): Promise<void> {
    await this.redis.hset(this.keys.checkpoint, 'kafka_cluster', cluster);
  }

  /**
   * The current checkpoint, confirmed by the replicas: a pass resumes only from a state a failover cannot undo
   * (after a commit whose acknowledgement timed out, this read waits for it again or fails).
   */
  async checkpoint(live = false): Promise<Checkpoint> {
    const [h, epoch] = (await durably(this.redis, (p) => {
      p.hgetall(this.keys.checkpoint);
      if (live) p.exists(this.keys.epoch);
    })) as [Record<string, string>, number?];
    // A leader's read: an emptied Redis must not read as an account that never ran (a second initial load).
    if (live && epoch === 0) throw new SnapshotLostError('LOST: the account keys are gone');
    const sweepKind = h.sweep_kind === 'initial' || h.sweep_kind === 'sweep' ? h.sweep_kind : null;
    return {
      watermark: num(h.watermark),
      initialDone: h.initial_done === '1',
      sweep: sweepKind
        ? {
            kind: sweepKind,
            cursor: h.sweep_cursor ? h.sweep_cursor : null,
            startedAt: num(h.sweep_started_at) ?? 0,
            seen: num(h.sweep_seen) ?? 0,
          }
        : null,
      lastSweepAt: num(h.last_sweep_at),
      lastIncrementalAt: num(h.last_incremental_at),
      unreadable: decodeUnreadable(h.unreadable),
      deferredSweeps: num(h.deferred_sweeps) ?? 0,
      deferredReason: h.deferred_reason ? h.deferred_reason : null,
    };
  }

  /** Number of reviews in the snapshot. */
  async size(): Promise<number> {
    return Number((await this.redis.get(this.keys.count)) ?? 0);
  }

  /**
   * Which of these bad records (by digest) were not dead-lettered recently. Polls re-read a bad record for as
   * long as it stays in the overlap window; without this the dead-letter topic would get a copy every poll.
   */
  async unseenDeadLetters(digests: readonly string[]): Promise<Set<string>> {
    if (digests.length === 0) return new Set();
    const pipeline = this.redis.pipeline();
    for (const d of digests) pipeline.exists(this.keys.deadLettered(d));
    const results = (await pipeline.exec()) ?? [];
    return new Set(digests.filter((_, i) => results[i]?.[1] === 0));
  }

  /** Remembers dead-lettered records (after they were published) for `ttlSeconds`. */
  async rememberDeadLetters(digests: Iterable<string>, ttlSeconds: number): Promise<void> {
    const pipeline = this.redis.pipeline();
    for (const d of digests) pipeline.set(this.keys.deadLettered(d), '1', 'EX', ttlSeconds);
    await pipeline.exec();
  }

  /**
   * Every entry of the account, a batch per SCAN step (about `count` buckets of up to 128 reviews each), for the
   * deletion check at the end of a complete sweep. SCAN may return a bucket twice; this never yields an id twice.
   */
  async *scanEntries(count = 100): AsyncGenerator<Array<[number, SnapshotEntry]>> {
    const seenBuckets = new Set<string>();
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern, count)) {
      const fresh = found.filter((key) => !seenBuckets.has(key));
      if (fresh.length === 0) continue;
      const pipeline = this.redis.pipeline();
      for (const key of fresh) pipeline.hgetallBuffer(key);
      const results = (await pipeline.exec()) ?? [];
      const batch: Array<[number, SnapshotEntry]> = [];
      fresh.forEach((key, i) => {
        seenBuckets.add(key);
        const [err, value] = results[i] ?? [new Error('missing pipeline result'), null];
        if (err) throw err;
        const bucket = Number(key.slice(key.lastIndexOf(':') + 1));
        for (const [field, entry] of Object.entries(value as Record<string, Buffer>)) {
          batch.push([bucket * 2 ** BUCKET_BITS + Number(field), decodeEntry(entry)]);
        }
      });
      if (batch.length > 0) yield batch;
    }
  }

  /**
   * Removes the entries of deleted reviews, each only if it still equals the entry the deletion was decided on;
   * returns how many were removed. Throws FencedError if `epoch` is no longer current.
   */
  async removeEntries(epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>): Promise<number> {
    if (entries.length === 0) return 0;
    const { bucketKeys, triples } = this.entryArgs(entries);
    const keys = [this.keys.epoch, this.keys.count, ...bucketKeys];
    try {
      return await this.redis.bridgeRemove(keys.length, ...keys, String(epoch), ...triples);
    } catch (err) {
      throw scriptError(err);
    }
  }

  /** Pauses the bridge (operator command): the leader makes no upstream request while the flag is set. */
  async pause(now = Date.now()): Promise<void> {
    // NX keeps the time of the first pause, so the "paused for too long" alert measures from it.
    await this.redis.set(this.keys.paused, String(now), 'NX');
  }

  /** Lifts a pause; returns whether the bridge was paused. */
  async resume(): Promise<boolean> {
    return (await this.redis.del(this.keys.paused)) === 1;
  }

  /** When the bridge was paused (ms), or null when it is not: the leader checks it every tick. */
  async pausedSince(): Promise<number | null> {
    return num((await this.redis.get(this.keys.paused)) ?? undefined);
  }

  // Script arguments of entries: the bucket keys they touch and (bucket index, field, encoded entry) triples.
  private entryArgs(entries: ReadonlyArray<[number, SnapshotEntry]>) {
    const bucketKeys: string[] = [];
    const bucketIndex = new Map<number, number>();
    const triples: (string | Buffer)[] = [];
    for (const [id, entry] of entries) {
      const bucket = Math.floor(id / 2 ** BUCKET_BITS);
      let index = bucketIndex.get(bucket);
      if (index === undefined) {
        index = bucketKeys.push(this.keys.bucket(bucket));
        bucketIndex.set(bucket, index);
      }
      triples.push(String(index), fieldOf(id), encodeEntry(entry));
    }
    return { bucketKeys, triples };
  }

  /** Asks the leader for a sweep now (from the CLI or an operator); not fenced, it is only a request. */
  async requestSweep(): Promise<void> {
    await this.redis.set(this.keys.sweepRequest, String(Date.now()));
  }

  /** Whether a sweep request is pending (not yet taken by the leader). */
  async sweepRequested(): Promise<boolean> {
    return (await this.redis.exists(this.keys.sweepRequest)) === 1;
  }

  /** Takes a pending sweep request, if any. */
  async takeSweepRequest(): Promise<boolean> {
    return (await this.redis.getdel(this.keys.sweepRequest)) !== null;
  }

  /** Asks the leader for a full restore from the Kafka changelog (the `restore` command); only a request. */
  async requestRestore(): Promise<void> {
    await this.redis.set(this.keys.restoreRequest, String(Date.now()));
  }

  /** Whether a restore request is pending (not yet taken by the leader). */
  async restoreRequested(): Promise<boolean> {
    return (await this.redis.exists(this.keys.restoreRequest)) === 1;
  }

  /** Takes a pending restore request, if any. */
  async takeRestoreRequest(): Promise<boolean> {
    return (await this.redis.getdel(this.keys.restoreRequest)) !== null;
  }

  /** Records a resync request for the leader (replaces a pending one); not fenced, it is only a request. */
  async requestResync(request: ResyncRequest): Promise<void> {
    await this.redis.set(this.keys.resyncRequest, JSON.stringify(request));
  }

  /**
   * Takes the resync to run: one a former leader left unfinished first, else the pending request (moved to the
   * active key until finishResync). An unreadable one is dropped and reported as 'invalid'.
   */
  async takeResyncRequest(): Promise<ResyncRequest | 'invalid' | null> {
    const raw = await this.redis.bridgeResyncTake(this.keys.resyncRequest, this.keys.resyncActive);
    if (raw === null) return null;
    const parsed = ResyncRequestSchema.safeParse(safeJson(raw));
    if (parsed.success) return parsed.data;
    await this.redis.bridgeResyncDone(this.keys.resyncActive, raw);
    return 'invalid';
  }

  /** Clears a resync once it has completed (a later request is left alone). */
  async finishResync(request: ResyncRequest): Promise<void> {
    const active = await this.redis.get(this.keys.resyncActive);
    const parsed = active === null ? null : ResyncRequestSchema.safeParse(safeJson(active));
    if (active !== null && parsed?.success && parsed.data.id === request.id) {
      await this.redis.bridgeResyncDone(this.keys.resyncActive, active);
    }
  }

  /** Puts a resync this replica took but did not complete back (a clean hand-over); the active copy stays. */
  async requeueResync(request: ResyncRequest): Promise<void> {
    // The active key already holds it for the next leader: writing it as pending too would run it twice.
    void request;
  }

  /** The pending resync request without taking it (for `status`). */
  async pendingResync(): Promise<ResyncRequest | null> {
    const raw = (await this.redis.get(this.keys.resyncRequest)) ?? (await this.redis.get(this.keys.resyncActive));
    const parsed = raw === null ? null : ResyncRequestSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : null;
  }

  /** Publishes the progress of the running pass (the leader, every page or so; one SET). */
  async setPassProgress(progress: PassProgress): Promise<void> {
    await this.redis.set(this.keys.progress, JSON.stringify(progress));
  }

  /** The progress of the running (or last) long pass, or null when none was recorded. */
  async passProgress(): Promise<PassProgress | null> {
    const raw = await this.redis.get(this.keys.progress);
    const parsed = raw === null ? null : PassProgressSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : null;
  }
}

/** The error a fenced script answered with, as the orchestration knows it. */
function scriptError(err: unknown): unknown {
  if (err instanceof Error && err.message.startsWith('FENCED')) return new FencedError(err.message);
  if (err instanceof Error && err.message.startsWith('LOST')) return new SnapshotLostError(err.message);
  return err;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function fieldOf(id: number): string {
  return String(id % 2 ** BUCKET_BITS);
}

// The digests of a checkpoint's unreadable records, as checkpointPairs writes them (anything else: unknown).
function decodeUnreadable(text: string | undefined): string[] | null {
  if (text === undefined || !text.startsWith('v1:')) return null;
  return text.length === 3 ? [] : text.slice(3).split(',');
}

function checkpointPairs(u: CheckpointUpdate): string[] {
  const pairs: string[] = [];
  if (u.watermark !== undefined) pairs.push('watermark', String(u.watermark));
  if (u.initialDone !== undefined) pairs.push('initial_done', u.initialDone ? '1' : '');
  if (u.lastSweepAt !== undefined) pairs.push('last_sweep_at', String(u.lastSweepAt));
  if (u.lastIncrementalAt !== undefined) pairs.push('last_incremental_at', String(u.lastIncrementalAt));
  // An empty value deletes a field: the versioned form keeps an empty list apart from an unknown one (no field).
  if (u.unreadable !== undefined) pairs.push('unreadable', u.unreadable === null ? '' : `v1:${u.unreadable.join(',')}`);
  if (u.deferredSweeps !== undefined) pairs.push('deferred_sweeps', String(u.deferredSweeps));
  if (u.deferredReason !== undefined) pairs.push('deferred_reason', u.deferredReason ?? '');
  if (u.sweep !== undefined) {
    const s = u.sweep;
    pairs.push(
      'sweep_kind',
      s ? s.kind : '',
      'sweep_cursor',
      s?.cursor ?? '',
      'sweep_started_at',
      s ? String(s.startedAt) : '',
      'sweep_seen',
      s ? String(s.seen) : '',
    );
  }
  return pairs;
}
