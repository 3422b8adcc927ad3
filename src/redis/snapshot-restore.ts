import { randomUUID } from 'node:crypto';
import type { ChangelogCheckpoint } from '../core/changelog.js';
import { encodeEntry, type SnapshotEntry } from '../core/snapshot-entry.js';
import { checkpointPairs } from './checkpoint-store.js';
import { scanKeys, type AccountKeys, type BridgeRedis } from './connection.js';
import { runCommit } from './snapshot-entries.js';
import { bucketOf, fieldOf } from './store-common.js';

// A restore of one account's snapshot from the Kafka changelog: clear it, write the restored entries (unfenced,
// in bounded pipelines), then finish fenced with the changelog's checkpoint and the epoch floor. Each pipeline of
// entries ends with a new restore token in the checkpoint, and the finish requires the last one: Redis applies (and
// replicates) one connection's writes in order, so a failover that lost any restored entry lost that token too, and
// the finish fails (SnapshotLostError: restore again) instead of vouching for entries Redis no longer holds.

/** Writes a restored snapshot of one account. */
export class SnapshotRestore {
  /** The restore token the last pipeline of entries wrote (null: none since the last finish). */
  private token: { id: string; n: number } | null = null;

  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /** Removes the account's snapshot (entries, count, checkpoint) before a full restore; leases and requests stay. */
  async clearForRestore(): Promise<void> {
    this.token = null;
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
        const key = this.keys.bucket(bucketOf(id));
        if (entry) pipeline.hset(key, fieldOf(id), encodeEntry(entry));
        else pipeline.hdel(key, fieldOf(id));
      }
      const token = (this.token = { id: this.token?.id ?? randomUUID(), n: (this.token?.n ?? 0) + 1 });
      pipeline.hset(this.keys.checkpoint, 'restore_token', `${token.id}:${token.n}`);
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
    await this.redis.set(this.keys.count, String(await this.countEntries()));
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
    if (this.token) pairs.push('expect_restore', `${this.token.id}:${this.token.n}`, 'restore_token', '');
    this.token = null;
    for (const [partition, offset] of Object.entries(offsets)) pairs.push(`clo:${partition}`, String(offset));
    await runCommit(this.redis, this.keys, epoch, pairs, [], []);
    if (epoch > ckpt.epoch) return true;
    await this.redis.bridgeEpochFloor(this.keys.epoch, String(ckpt.epoch));
    return false;
  }

  private async countEntries(): Promise<number> {
    let count = 0;
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern)) {
      const pipeline = this.redis.pipeline();
      for (const key of found) pipeline.hlen(key);
      for (const [err, n] of (await pipeline.exec()) ?? []) {
        if (err) throw err;
        count += Number(n);
      }
    }
    return count;
  }
}
