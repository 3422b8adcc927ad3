import type { AccountKeys, BridgeRedis } from '../redis.js';
import { decodeEntry, encodeEntry, type SnapshotEntry } from './entry.js';

// The snapshot store: the bridge's memory of every review, and the checkpoint that says how far it got.
// Entries live in hash buckets of 128 reviews (field = id within the bucket) because small hashes are stored as
// compact listpacks: this is what keeps the snapshot at 80-120 bytes a review.

const BUCKET_BITS = 7;

/** Where the passes stand; every field is written only by a fenced commit. */
export interface Checkpoint {
  /** Largest updated_date (ms) covered by a complete incremental poll or load; null before the initial load. */
  watermark: number | null;
  /** True once the initial load of an empty snapshot has completed. */
  initialDone: boolean;
  /** A sweep (or the initial load) in progress: its kind, resume cursor and progress. */
  sweep: { kind: 'initial' | 'sweep'; cursor: string | null; startedAt: number; seen: number } | null;
  /** When the last sweep (or initial load) completed (ms). */
  lastSweepAt: number | null;
  /** When the last incremental poll completed (ms). */
  lastIncrementalAt: number | null;
}

/** Changes to the checkpoint made with a page commit; undefined leaves a field as it is. */
export interface CheckpointUpdate {
  watermark?: number;
  initialDone?: boolean;
  sweep?: Checkpoint['sweep'];
  lastSweepAt?: number;
  lastIncrementalAt?: number;
}

/** Thrown when a commit is refused because another replica has taken the lease since. */
export class FencedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FencedError';
  }
}

const num = (v: string | undefined): number | null => (v === undefined || v === '' ? null : Number(v));

/** Reads and commits snapshot entries and the checkpoint of one account. */
export class SnapshotStore {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /** The entries of the given reviews, in one pipelined round trip. */
  async read(ids: readonly number[]): Promise<Map<number, SnapshotEntry>> {
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
    const results = (await pipeline.exec()) ?? [];
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

  /** Writes entries and checkpoint atomically; throws FencedError if `epoch` is no longer current. */
  async commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
  ): Promise<void> {
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
    const pairs = checkpointPairs(update);
    const keys = [this.keys.epoch, this.keys.checkpoint, this.keys.count, ...bucketKeys];
    try {
      await this.redis.bridgeCommit(
        keys.length,
        ...keys,
        String(epoch),
        String(pairs.length / 2),
        ...pairs,
        ...triples,
      );
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('FENCED')) throw new FencedError(err.message);
      throw err;
    }
  }

  /** The current checkpoint. */
  async checkpoint(): Promise<Checkpoint> {
    const h = await this.redis.hgetall(this.keys.checkpoint);
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

  /** Asks the leader for a sweep now (from the CLI or an operator); not fenced, it is only a request. */
  async requestSweep(): Promise<void> {
    await this.redis.set(this.keys.sweepRequest, String(Date.now()));
  }

  /** Takes a pending sweep request, if any. */
  async takeSweepRequest(): Promise<boolean> {
    return (await this.redis.getdel(this.keys.sweepRequest)) !== null;
  }
}

function fieldOf(id: number): string {
  return String(id % 2 ** BUCKET_BITS);
}

function checkpointPairs(u: CheckpointUpdate): string[] {
  const pairs: string[] = [];
  if (u.watermark !== undefined) pairs.push('watermark', String(u.watermark));
  if (u.initialDone !== undefined) pairs.push('initial_done', u.initialDone ? '1' : '');
  if (u.lastSweepAt !== undefined) pairs.push('last_sweep_at', String(u.lastSweepAt));
  if (u.lastIncrementalAt !== undefined) pairs.push('last_incremental_at', String(u.lastIncrementalAt));
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
