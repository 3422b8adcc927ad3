import type { ChangelogCheckpoint } from '../core/changelog.js';
import { systemRandom, type RandomSource } from '../core/random.js';
import { encodeEntry, type SnapshotEntry } from '../core/snapshot-entry.js';
import { checkpointPairs } from './checkpoint-store.js';
import { scanKeys, type AccountKeys, type BridgeRedis } from './connection.js';
import { runCommit } from './snapshot-entries.js';
import { bucketOf, fieldOf, MARKER, scriptError } from './store-common.js';

/** A restored review: its entry, or null with the sequence of its review.deleted (a deletion marker). */
export type RestoredEntry = readonly [id: number, entry: SnapshotEntry | null, deletedSequence?: number];

// A restore of one account's snapshot from the Kafka changelog: clear it, write the restored entries (in bounded
// batches, each fenced by the lease epoch), then finish fenced with the changelog's checkpoint and the epoch floor. The finish seals the
// account: its bucket manifest lists every bucket written, so a bucket lost later is told from one never written
// (see src/redis/lua/commit.lua). A snapshot no changelog can restore is sealed as it stands (seal()).
// Each batch of entries ends with a new restore token in the checkpoint, and the finish requires the last one: Redis
// applies (and replicates) one connection's writes in order, so a failover that lost any restored entry lost that
// token too, and the finish fails (SnapshotLostError: restore again) instead of vouching for entries Redis no
// longer holds.

// Eviction: a Redis at maxmemory under an evicting policy removes keys while the restore writes them. A full
// restore therefore marks the manifest it starts ('r', with 'g': the deleted reviews' sequences exist, marked 'm'),
// every batch checks the manifest and the buckets it writes into (restore-put.lua), and the finish requires the
// manifest's mark (commit.lua's expect_manifest); verifyHeld() then checks every bucket the manifest lists.

/** The manifest's field saying the deleted reviews' sequences (the gone hash) exist and carry their marker. */
export const GONE_LISTED = 'g';

/** The manifest's field of a full restore in progress (written by its clear, removed by its finish). */
export const RESTORING = 'r';

/** Writes a restored snapshot of one account. */
export class SnapshotRestore {
  /** The restore token the last pipeline of entries wrote (null: none since the last finish). */
  private token: { id: string; n: number } | null = null;
  /** A full restore cleared the account and has not finished yet. */
  private restoring = false;

  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
    /** The marks that the pause flag exists (src/redis/control-flags.ts), carried over what a restore clears. */
    private readonly pause?: { value(): Promise<string | null>; mark(value: string): Promise<void> },
    /** Where the restore tokens come from (the simulation's seed; node:crypto in production). */
    private readonly random: RandomSource = systemRandom,
  ) {}

  /**
   * Removes the account's snapshot (entries, count, checkpoint, manifest) before a full restore; leases and
   * requests stay, and so do the marks that the pause flag exists.
   */
  async clearForRestore(): Promise<void> {
    this.token = null;
    const pause = (await this.pause?.value()) ?? null;
    const keys: string[] = [this.keys.checkpoint, this.keys.count, this.keys.gone, this.keys.manifest];
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern)) keys.push(...found);
    for (let i = 0; i < keys.length; i += 500) await this.redis.unlink(...keys.slice(i, i + 500));
    await this.redis.hset(this.keys.gone, MARKER, '1');
    await this.redis.hset(this.keys.manifest, RESTORING, '1', GONE_LISTED, '1');
    if (pause !== null) await this.pause?.mark(pause);
    this.restoring = true;
  }

  /**
   * Writes restored entries (deleted: null, with the sequence of its review.deleted when known), a script call per
   * batch, fenced by `epoch` (restore-put.lua: a superseded leader's batch would overwrite its successor's commits).
   * `verify`: the entries go onto the snapshot Redis holds (a tail), so a bucket the manifest lists and Redis lost
   * fails the write (SnapshotLostError) instead of being recreated in part.
   */
  async restoreEntries(epoch: number, entries: ReadonlyArray<RestoredEntry>, verify = false): Promise<void> {
    // Batches of a bounded size: a whole fetch at once would queue ~1 KiB of arguments per entry.
    for (let i = 0; i < entries.length; i += 2_000) {
      const { keys } = this;
      const bucketKeys: string[] = [keys.epoch, keys.checkpoint, keys.gone, keys.manifest];
      const index = new Map<number, number>();
      const triples: (string | Buffer)[] = [];
      const gone: string[] = [];
      for (const [id, entry, deletedSequence] of entries.slice(i, i + 2_000)) {
        const bucket = bucketOf(id);
        let k = index.get(bucket);
        // 1 for the first bucket: the script's KEYS[5].
        if (k === undefined) index.set(bucket, (k = bucketKeys.push(keys.bucket(bucket)) - 4));
        triples.push(String(k), fieldOf(id), entry ? encodeEntry(entry) : '');
        if (!entry && deletedSequence !== undefined) gone.push(String(id), String(deletedSequence));
      }
      const token = { id: this.token?.id ?? this.random.uuid(), n: (this.token?.n ?? 0) + 1 };
      // '2': a full restore in progress, whose manifest and buckets the script checks as it writes.
      const mode = verify ? '1' : this.restoring ? '2' : '0';
      const args = [String(epoch), mode, `${token.id}:${token.n}`, String(gone.length / 2), ...gone, ...triples];
      try {
        await this.redis.bridgeRestorePut(bucketKeys.length, ...bucketKeys, ...args);
      } catch (err) {
        throw scriptError(err);
      }
      this.token = token;
    }
  }

  /**
   * Seals a snapshot of the previous format if it is complete: the entries its buckets hold are as many as its entry
   * count says (kept by every commit and removal since the last restore; a bucket or the count lost makes them
   * differ). Resolves false, sealing nothing, when they differ: the caller restores in full.
   */
  async sealIfComplete(epoch: number): Promise<boolean> {
    const [counted, stored] = await Promise.all([this.countEntries(), this.redis.get(this.keys.count)]);
    if (stored === null || Number(stored) !== counted) return false;
    await this.seal(epoch);
    return true;
  }

  /**
   * Seals the snapshot Redis holds as it stands (a snapshot of the previous format, or one no changelog can
   * restore): every bucket found is marked and listed anew, then the checkpoint's marker is written (fenced).
   */
  async seal(epoch: number): Promise<void> {
    this.restoring = false;
    const pause = (await this.pause?.value()) ?? null;
    await this.redis.unlink(this.keys.manifest);
    if (pause !== null) await this.pause?.mark(pause);
    for await (const found of scanKeys(this.redis, this.keys.bucketPattern)) {
      for (let i = 0; i < found.length; i += 500) {
        const keys = [this.keys.manifest, ...found.slice(i, i + 500)];
        await this.redis.bridgeSealBuckets(keys.length, ...keys);
      }
    }
    // The deleted reviews' sequences are adopted as they stand too: from now on their loss is told.
    await this.redis.hset(this.keys.gone, MARKER, '1');
    await this.redis.hset(this.keys.manifest, GONE_LISTED, '1');
    await runCommit(this.redis, this.keys, epoch, [MARKER, '1'], [], []);
  }

  /**
   * What of a sealed snapshot Redis no longer holds (null: nothing): its manifest or checkpoint marker, a bucket
   * the manifest lists, or the deleted reviews' sequences. Read after a restore (every bucket once, pipelined): a
   * restore that Redis evicted keys from while it ran did not hold.
   */
  async verifyHeld(): Promise<string | null> {
    const [manifest, mark] = await Promise.all([
      this.redis.hgetall(this.keys.manifest),
      this.redis.hexists(this.keys.checkpoint, MARKER),
    ]);
    if (manifest.v === undefined) return 'the bucket manifest';
    if (mark === 0) return 'the checkpoint';
    const buckets = Object.keys(manifest).filter((field) => /^\d+$/.test(field));
    for (let i = 0; i < buckets.length; i += 1_000) {
      const pipeline = this.redis.pipeline();
      const batch = buckets.slice(i, i + 1_000);
      for (const bucket of batch) pipeline.hexists(this.keys.bucket(Number(bucket)), MARKER);
      const results = (await pipeline.exec()) ?? [];
      const lost = batch.find((_, j) => {
        const [err, held] = results[j] ?? [new Error('missing pipeline result'), 0];
        if (err) throw err;
        return held === 0;
      });
      if (lost !== undefined) return `snapshot bucket ${lost}`;
    }
    if (manifest[GONE_LISTED] !== undefined && (await this.redis.hexists(this.keys.gone, MARKER)) === 0) {
      return "the deleted reviews' sequences";
    }
    return null;
  }

  /**
   * Completes a restore: counts the entries, writes the changelog's checkpoint (fenced by `epoch`) with where
   * the changelog was read to, and raises the epoch counter to the changelog's epoch floor. The manifest of a full
   * restore this store cleared, or (`tail`) of the sealed snapshot a tail wrote onto, must still be there. Resolves false when
   * `epoch` itself is not above that floor (the caller must take a new lease: its epoch is not newer than history).
   */
  async restoreFinish(
    epoch: number,
    ckpt: ChangelogCheckpoint,
    offsets: Record<number, number>,
    cluster: string,
    tail = false,
  ): Promise<boolean> {
    await this.redis.set(this.keys.count, String(await this.countEntries()));
    const pairs = checkpointPairs({
      // As the changelog has it, also when lower than Redis's (an operator's rewind Redis had not taken yet).
      ...(ckpt.watermark !== null ? { rewindWatermark: ckpt.watermark } : {}),
      initialDone: ckpt.initialDone,
      sweep: ckpt.sweep,
      ...(ckpt.lastSweepAt !== null ? { lastSweepAt: ckpt.lastSweepAt } : {}),
      ...(ckpt.lastIncrementalAt !== null ? { lastIncrementalAt: ckpt.lastIncrementalAt } : {}),
      unreadable: ckpt.unreadable,
      unreadableCandidates: ckpt.unreadableCandidates,
      deferredSweeps: ckpt.deferredSweeps,
      deferredReason: ckpt.deferredReason,
    });
    pairs.push('txn', String(ckpt.txn), 'kafka_cluster', cluster, MARKER, '1');
    if (this.token) pairs.push('expect_restore', `${this.token.id}:${this.token.n}`, 'restore_token', '');
    // The manifest the restore wrote (or the tail wrote onto) must still be there to be sealed.
    if (this.restoring || tail) pairs.push('expect_manifest', this.restoring ? RESTORING : 'v');
    this.token = null;
    this.restoring = false;
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
      // A bucket's fields are its entries and its marker.
      for (const key of found) pipeline.hlen(key).hexists(key, MARKER);
      ((await pipeline.exec()) ?? []).forEach(([err, n], i) => {
        if (err) throw err;
        count += i % 2 === 0 ? Number(n) : -Number(n);
      });
    }
    return count;
  }
}
