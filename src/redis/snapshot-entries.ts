import type { CheckpointUpdate } from '../core/checkpoint.js';
import { FencedError, SnapshotLostError } from '../core/errors.js';
import { decodeEntry, encodeEntry, type SnapshotEntry } from '../core/snapshot-entry.js';
import { checkpointPairs } from './checkpoint-store.js';
import { durably, scanKeys, type AccountKeys, type BridgeRedis } from './connection.js';
import { BUCKET_BITS, bucketOf, bucketOfKey, fieldOf, MARKER, scriptError } from './store-common.js';

// The snapshot proper: the bridge's memory of every review. Entries live in hash buckets of 128 reviews (field = id
// within the bucket) because small hashes are stored as compact listpacks: this is what keeps the snapshot at
// 80-120 bytes a review. Writes go through the fenced commit and remove scripts (src/redis/lua), which write the
// checkpoint in the same step; a restore from the changelog is snapshot-restore.ts.

/** Where Kafka's changelog stood after a commit (see ChangelogMark in src/bridge/pipeline/types.ts). */
export interface CommitMark {
  txn: number;
  offsets: Record<number, number>;
}

type PipelineResults = [Error | null, unknown][];

/** Reads, commits, scans and restores the snapshot entries of one account. */
export class SnapshotEntries {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /**
   * The entries of the given reviews, in one pipelined round trip. With `epoch`, the same round trip checks that
   * the account's keys are still those of that leadership and complete: entries read from a Redis that lost them
   * (and maybe got a new lease since) would diff every review as new, so the read fails instead (SnapshotLostError,
   * or FencedError when another epoch holds the account). Complete means the epoch, the checkpoint (holding at
   * least `minTxn` changelog transactions) and the bucket manifest are there, and every bucket of the page that the
   * manifest lists still exists; `sealed`: the leader sealed the account (see seal()), so both markers must exist.
   */
  async read(
    ids: readonly number[],
    epoch?: number,
    minTxn?: number,
    sealed = false,
  ): Promise<Map<number, SnapshotEntry>> {
    const byBucket = new Map<number, number[]>();
    for (const id of ids) {
      const bucket = bucketOf(id);
      let list = byBucket.get(bucket);
      if (!list) byBucket.set(bucket, (list = []));
      list.push(id);
    }
    const verify = epoch !== undefined;
    const pipeline = this.redis.pipeline();
    const order = [...byBucket.entries()];
    const manifestFields: string[] = verify ? ['v'] : [];
    for (const [bucket, list] of order) {
      const fields = list.map(fieldOf);
      // The marker tells an existing bucket from a vanished one (an absent key reads as absent fields).
      if (verify) {
        fields.push(MARKER);
        manifestFields.push(String(bucket));
      }
      pipeline.hmgetBuffer(this.keys.bucket(bucket), ...fields);
    }
    if (verify) {
      pipeline.hmget(this.keys.manifest, ...manifestFields);
      pipeline.get(this.keys.epoch);
      pipeline.hmget(this.keys.checkpoint, 'txn', MARKER);
    }
    const results: PipelineResults = (await pipeline.exec()) ?? [];
    const buckets = order.map((_, i) => resultOf(results, i) as (Buffer | null)[]);
    if (verify) checkComplete(results.slice(order.length), buckets, epoch, minTxn, sealed);
    const entries = new Map<number, SnapshotEntry>();
    order.forEach(([, list], i) => {
      const values = buckets[i]!;
      for (let j = 0; j < list.length; j++) {
        const value = values[j];
        if (value) entries.set(list[j]!, decodeEntry(value));
      }
    });
    return entries;
  }

  /**
   * Writes entries and checkpoint atomically, with the changelog transaction they come from; throws FencedError
   * if `epoch` is no longer current and SnapshotLostError if the account's keys are gone, in whole or in part
   * (`sealed`: the account must be sealed, see read).
   */
  async commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: CommitMark,
    expectTxn?: number,
    sealed = false,
  ): Promise<void> {
    const { bucketKeys, triples } = this.entryArgs(entries);
    const pairs = checkpointPairs(update);
    if (expectTxn !== undefined) pairs.push('expect_txn', String(expectTxn));
    if (sealed) pairs.push('sealed', '1');
    if (mark) {
      pairs.push('txn', String(mark.txn));
      // One field per partition: a commit that touched some partitions keeps the others' offsets.
      for (const [partition, offset] of Object.entries(mark.offsets)) pairs.push(`clo:${partition}`, String(offset));
    }
    // Replicas acknowledge the commit before the next page is published (see README: a Redis failover).
    await runCommit(this.redis, this.keys, epoch, pairs, bucketKeys, triples);
  }

  /**
   * Of the given reviews, those reported deleted: the sequence of their review.deleted (one round trip). `sealed`
   * (a leader's read of a sealed account): the sequences must not have vanished (evicted): a comeback would then
   * restart at sequence 1 (SnapshotLostError). Read first, then the manifest: a loss before the read leaves the
   * manifest listing them without their marker.
   */
  async goneSequences(ids: readonly number[], sealed = false): Promise<Map<number, number>> {
    const gone = new Map<number, number>();
    if (ids.length === 0) return gone;
    const pipeline = this.redis.pipeline().hmget(this.keys.gone, ...ids.map(String), MARKER);
    if (sealed) pipeline.hmget(this.keys.manifest, 'v', 'g');
    const results: PipelineResults = (await pipeline.exec()) ?? [];
    const values = resultOf(results, 0) as (string | null)[];
    if (sealed) {
      const [v, listed] = resultOf(results, 1) as (string | null)[];
      if (v === null)
        throw new SnapshotLostError('LOST-PART: the bucket manifest of the account vanished from Redis', true);
      if (listed !== null && values[values.length - 1] === null) {
        throw new SnapshotLostError(
          "LOST-PART: the deleted reviews' sequences of the account vanished from Redis",
          true,
        );
      }
    }
    values.slice(0, ids.length).forEach((value, i) => {
      const sequence = value === null ? NaN : Number(value);
      if (Number.isSafeInteger(sequence) && sequence > 0) gone.set(ids[i]!, sequence);
    });
    return gone;
  }

  /** Number of reviews in the snapshot. */
  async size(): Promise<number> {
    return Number((await this.redis.get(this.keys.count)) ?? 0);
  }

  /**
   * Every entry of the account, a batch per SCAN step (about `count` buckets of up to 128 reviews each), for the
   * deletion check at the end of a complete sweep. SCAN may return a bucket twice; this never yields an id twice.
   */
  async *scanEntries(count = 100): AsyncGenerator<Array<[number, SnapshotEntry]>> {
    const seenBuckets = new Set<string>();
    // A scan cannot see a bucket that vanished: the reviews it held would be missed by deletion detection. So the
    // buckets a sealed account listed before the scan (SCAN returns every key that exists throughout) must all be
    // found; checked once the scan is done.
    const listed = await this.redis.hgetall(this.keys.manifest);
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
        const bucket = bucketOfKey(key);
        for (const [field, entry] of Object.entries(value as Record<string, Buffer>)) {
          if (field === MARKER) continue;
          batch.push([bucket * 2 ** BUCKET_BITS + Number(field), decodeEntry(entry)]);
        }
      });
      if (batch.length > 0) yield batch;
    }
    if (listed.v === undefined) return;
    const found = new Set([...seenBuckets].map((key) => String(bucketOfKey(key))));
    // The manifest's other fields ('v', a restore's 'r', 'g') name no bucket.
    const gone = Object.keys(listed).find((bucket) => /^\d+$/.test(bucket) && !found.has(bucket));
    if (gone !== undefined) {
      throw new SnapshotLostError(`LOST-PART: snapshot bucket ${gone} of the account vanished from Redis`, true);
    }
  }

  /**
   * Removes the entries of deleted reviews, each only if it still equals the entry the deletion was decided on,
   * and keeps the sequence of each removed one's review.deleted (its entry's + 1) for a comeback; returns how many
   * were removed. Throws FencedError if `epoch` is no longer current.
   */
  async removeEntries(epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>): Promise<number> {
    if (entries.length === 0) return 0;
    const { bucketKeys, triples } = this.entryArgs(entries);
    const tuples: (string | Buffer)[] = [];
    entries.forEach(([id, entry], i) =>
      tuples.push(...triples.slice(i * 3, i * 3 + 3), String(id), String(entry.sequence + 1)),
    );
    const keys = [this.keys.epoch, this.keys.count, this.keys.gone, ...bucketKeys];
    try {
      return await this.redis.bridgeRemove(keys.length, ...keys, String(epoch), ...tuples);
    } catch (err) {
      throw scriptError(err);
    }
  }

  // Script arguments of entries: the bucket keys they touch and (bucket index, field, encoded entry) triples.
  private entryArgs(entries: ReadonlyArray<[number, SnapshotEntry]>) {
    const bucketKeys: string[] = [];
    const bucketIndex = new Map<number, number>();
    const triples: (string | Buffer)[] = [];
    for (const [id, entry] of entries) {
      const bucket = bucketOf(id);
      let index = bucketIndex.get(bucket);
      if (index === undefined) {
        index = bucketKeys.push(this.keys.bucket(bucket));
        bucketIndex.set(bucket, index);
      }
      triples.push(String(index), fieldOf(id), encodeEntry(entry));
    }
    return { bucketKeys, triples };
  }
}

/** The fenced commit script (commit.lua) with checkpoint pairs and entry triples, acknowledged by the replicas. */
export async function runCommit(
  redis: BridgeRedis,
  keys: AccountKeys,
  epoch: number,
  pairs: string[],
  bucketKeys: string[],
  triples: (string | Buffer)[],
): Promise<void> {
  const all = [keys.epoch, keys.checkpoint, keys.count, keys.manifest, ...bucketKeys];
  try {
    await durably(redis, (p) =>
      p.bridgeCommit(all.length, ...all, String(epoch), String(pairs.length / 2), ...pairs, ...triples),
    );
  } catch (err) {
    throw scriptError(err);
  }
}

// A pipeline command's reply, or its error thrown.
function resultOf(results: PipelineResults, i: number): unknown {
  const [err, value] = results[i] ?? [new Error('missing pipeline result'), null];
  if (err) throw err;
  return value;
}

/**
 * The leadership and completeness checks a read carries after its buckets (manifest, epoch, checkpoint), in this
 * order: another leader (fenced), every key gone, the checkpoint or the manifest gone, commits a failover lost, a
 * bucket of the page gone.
 */
function checkComplete(
  results: PipelineResults,
  buckets: ReadonlyArray<(Buffer | null)[]>,
  epoch: number | undefined,
  minTxn: number | undefined,
  sealed: boolean,
): void {
  const manifest = resultOf(results, 0) as (string | null)[];
  const current = resultOf(results, 1) as string | null;
  const [txn, mark] = resultOf(results, 2) as (string | null)[];
  if (current === null) throw new SnapshotLostError('LOST: the account keys are gone');
  if (current !== String(epoch)) throw new FencedError(`FENCED: epoch ${epoch} superseded by ${String(current)}`);
  const listed = manifest[0] !== null;
  if ((mark !== null) !== listed || (sealed && !listed)) {
    const gone = listed ? 'the checkpoint' : 'the bucket manifest';
    throw new SnapshotLostError(`LOST-PART: ${gone} of the account vanished from Redis`, true);
  }
  // Fewer transactions than this process already wrote: a failover lost commits; diffing now would publish their
  // changes again. The leader restores the missing ones from Kafka first.
  const held = txn ?? '0';
  if (minTxn !== undefined && Number(held) < minTxn) {
    throw new SnapshotLostError(`LOST: Redis holds changelog transaction ${held}, at least ${minTxn} expected`);
  }
  if (!listed) return;
  buckets.forEach((values, i) => {
    // The marker is the last field asked for.
    if (manifest[i + 1] !== null && values[values.length - 1] === null) {
      throw new SnapshotLostError('LOST-PART: a snapshot bucket of the account vanished from Redis', true);
    }
  });
}
