import { afterEach, describe, expect, it } from 'vitest';
import { EMPTY_CHANGELOG_CHECKPOINT } from '../../../src/core/changelog.js';
import { SnapshotLostError } from '../../../src/core/errors.js';
import { accountKeys, connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { Lease } from '../../../src/redis/lease.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { memoryStats, parseMemoryStats } from '../../../src/redis/eviction.js';
import { sampleEntry } from '../../helpers/entries.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// Keys evicted while a restore writes them (an evicting Redis at maxmemory): the loss detection holds during the
// restore itself. Each case removes a key at one moment of a full restore, as an eviction would, and the restore
// (or the check after it, or the next leader's read) says so instead of sealing a snapshot that lacks it. Before,
// every case below sealed the partial snapshot as complete, and the reviews it lacked read as new.

const open: BridgeRedis[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.quit()));
});

const entry = (id: number) => sampleEntry(id, 1_700_000_100_000);
const lostInPart = (err: unknown) => err instanceof SnapshotLostError && err.full;
const CKPT = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 3, epoch: 0 };

/** A full restore under way: cleared, reviews 1, 2 (bucket 0), 200 (bucket 1) and deleted review 300 written. */
async function restoring() {
  const redis = connectRedis(redisUrl());
  open.push(redis);
  const keys = accountKeys(uniqueName('rb-evict'), 'acct');
  const store = new SnapshotStore(redis, keys);
  const epoch = await new Lease(redis, keys, 60_000).renew();
  await store.clearForRestore();
  await store.restoreEntries(epoch, [
    [1, entry(1)],
    [2, entry(2)],
    [200, entry(200)],
    [300, null, 4],
  ]);
  return { redis, keys, store, epoch };
}

describe('keys evicted during a full restore', () => {
  it('a bucket evicted and written again by a later batch fails that batch (it would hold only part)', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await redis.del(keys.bucket(0));
    expect(lostInPart(await store.restoreEntries(epoch, [[3, entry(3)]]).catch((e: unknown) => e))).toBe(true);
    expect(await redis.hexists(keys.bucket(0), '3')).toBe(0);
  });

  it('the manifest evicted between batches fails the next batch (the buckets before it would read as new)', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await redis.del(keys.manifest);
    expect(lostInPart(await store.restoreEntries(epoch, [[1000, entry(1000)]]).catch((e: unknown) => e))).toBe(true);
  });

  it('the manifest evicted after the last batch fails the finish: nothing is sealed', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await redis.del(keys.manifest);
    expect(lostInPart(await store.restoreFinish(epoch, CKPT, {}, 'c').catch((e: unknown) => e))).toBe(true);
    expect((await store.changelogState()).sealed).toBe(false);
  });

  it('a bucket evicted after the last batch is found by the check after the finish, and by the next read', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await redis.del(keys.bucket(1));
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    expect(await store.verifyHeld()).toBe('snapshot bucket 1');
    expect(lostInPart(await store.read([200], epoch, 3, true).catch((e: unknown) => e))).toBe(true);
  });

  it('the deleted reviews’ sequences evicted during the restore are found by the check and by the next read', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await redis.del(keys.gone);
    // A later batch's deletion marker recreates the hash, without its marker.
    await store.restoreEntries(epoch, [[301, null, 2]]);
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    expect(await store.verifyHeld()).toBe("the deleted reviews' sequences");
    expect(lostInPart(await store.goneSequences([300], true).catch((e: unknown) => e))).toBe(true);
  });

  it('a restore nothing was evicted from holds, with every key and the deleted reviews’ sequences', async () => {
    const { store, epoch } = await restoring();
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    expect(await store.verifyHeld()).toBeNull();
    expect(await store.goneSequences([300, 301], true)).toEqual(new Map([[300, 4]]));
    expect((await store.read([1, 2, 200, 300], epoch, 3, true)).size).toBe(3);
    const scanned: number[] = [];
    for await (const batch of store.scanEntries()) scanned.push(...batch.map(([id]) => id));
    expect(scanned.sort((a, b) => a - b)).toEqual([1, 2, 200]);
  });
});

describe('keys evicted under a tail restore, and after it', () => {
  it('the manifest evicted under a tail fails its finish instead of sealing the buckets the tail wrote', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    await redis.del(keys.manifest);
    // The tail's batch sees no manifest (a snapshot of the previous format is not checked) and lists its bucket.
    await store.restoreEntries(epoch, [[5, entry(5)]], true);
    const finish = await store.restoreFinish(epoch, { ...CKPT, txn: 4 }, {}, 'c', true).catch((e: unknown) => e);
    expect(lostInPart(finish)).toBe(true);
  });

  it('the deleted reviews’ sequences evicted alone fail the read of a comeback (it would restart at 1)', async () => {
    const { redis, keys, store, epoch } = await restoring();
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    await redis.del(keys.gone);
    expect(lostInPart(await store.goneSequences([300], true).catch((e: unknown) => e))).toBe(true);
  });
});

describe('what Redis says of its memory', () => {
  it('parses evicted_keys, used_memory and maxmemory from INFO, and reads them from the Redis the bridge uses', async () => {
    const info = '# Memory\r\nused_memory:1048576\r\nmaxmemory:4194304\r\n# Stats\r\nevicted_keys:17\r\n';
    expect(parseMemoryStats(info)).toEqual({ evictedKeys: 17, usedMemory: 1_048_576, maxmemory: 4_194_304 });
    expect(parseMemoryStats('# Memory\r\nused_memory:5\r\n')).toBeNull();
    const redis = connectRedis(redisUrl());
    open.push(redis);
    const stats = await memoryStats(redis);
    expect(stats?.usedMemory).toBeGreaterThan(0);
    expect(stats?.evictedKeys).toBeGreaterThanOrEqual(0);
  });
});

describe('the epoch counter evicted under a held lease', () => {
  it('the next renewal takes the lease anew: a new epoch, the counter written again', async () => {
    const { redis, keys, store } = await restoring();
    // The lease restoring() took, given up; this replica's lease:
    await redis.del(keys.lease);
    const lease = new Lease(redis, keys, 60_000);
    const held = await lease.renew();
    await redis.del(keys.epoch);
    // Renewed as it stood, every fenced write would answer that the account's keys are gone, for ever.
    const renewed = await lease.renew();
    // A new epoch is at least Redis's clock in ms: equal to the old one only within the same millisecond.
    expect(renewed).toBeGreaterThanOrEqual(held);
    expect(await redis.get(keys.epoch)).toBe(String(renewed));
    await store.restoreFinish(renewed, CKPT, {}, 'c');
    expect((await store.changelogState()).txn).toBe(3);
  });
});

describe('the pause flag evicted', () => {
  async function adopted(paused: boolean) {
    const { redis, keys, store, epoch } = await restoring();
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    if (paused) await store.pause(1_000);
    await store.adoptPauseState();
    return { redis, keys, store, epoch };
  }

  it('a paused account whose flag vanished stays paused (the flag is written again from its copies)', async () => {
    const { redis, keys, store } = await adopted(true);
    expect(await store.pausedSince()).toBe(1_000);
    await redis.del(keys.paused);
    expect(await store.pausedSince()).toBe(1_000);
    expect(await redis.get(keys.paused)).toBe('1000');
    // With the manifest's copy gone too, the checkpoint's says it.
    await redis.del(keys.paused);
    await redis.hdel(keys.manifest, 'p');
    expect(await store.pausedSince()).toBe(1_000);
  });

  it('a running account whose flag vanished stays running; resume and pause write the copies', async () => {
    const { redis, keys, store } = await adopted(false);
    expect(await store.pausedSince()).toBeNull();
    await redis.del(keys.paused);
    expect(await store.pausedSince()).toBeNull();
    await store.pause(7);
    await redis.del(keys.paused);
    expect(await store.pausedSince()).toBe(7);
    expect(await store.resume()).toBe(true);
    await redis.del(keys.paused);
    expect(await store.pausedSince()).toBeNull();
  });

  it('the flag and the manifest evicted together, then a full restore: still paused', async () => {
    const { redis, keys, store, epoch } = await adopted(true);
    await redis.del(keys.paused, keys.manifest);
    await store.clearForRestore();
    await store.restoreEntries(epoch, [[1, entry(1)]]);
    await store.restoreFinish(epoch, CKPT, {}, 'c');
    await store.adoptPauseState();
    expect(await store.pausedSince()).not.toBeNull();
  });

  it('an account never adopted (a fresh one, or one of the previous version) is not paused by an absent flag', async () => {
    const { store } = await restoring();
    expect(await store.pausedSince()).toBeNull();
    await store.adoptPauseState();
    expect(await store.pausedSince()).toBeNull();
    await store.pause(5);
    expect(await store.pausedSince()).toBe(5);
    await store.pause(9);
    expect(await store.pausedSince()).toBe(5);
  });
});
