import { afterEach, describe, expect, it } from 'vitest';
import { EMPTY_CHANGELOG_CHECKPOINT } from '../../../src/core/changelog.js';
import { accountKeys, connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { Lease } from '../../../src/redis/lease.js';
import { FencedError, SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { storedEntry } from '../../helpers/entries.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// The lease-epoch fence on the real Redis, in the writes where nothing else stops a superseded leader: a restore's
// finish (it sets the changelog transaction and offsets, so it carries no expect_txn), a checkpoint-only write made
// before the new leader's first commit (its expect_txn still matches), and a batch of a restore the former leader
// was in the middle of (restore-put.lua: the entries it read would overwrite newer ones, silently). Each is refused
// and changes nothing. (The simulation cannot see the fence go: every such write it makes repeats or rewinds what
// only costs re-reading, and the next commit's expect_txn sends the new leader to restore; docs/testing.md.)

const open: BridgeRedis[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.quit()));
});

/** An account a first leader committed transaction 1 to, then lost to a second leader (its lease ran out). */
async function takenOver() {
  const redis = connectRedis(redisUrl());
  open.push(redis);
  const keys = accountKeys(uniqueName('rb-fence'), 'acct');
  const store = new SnapshotStore(redis, keys);
  const old = await new Lease(redis, keys, 60_000).renew();
  await store.commit(old, [[1, storedEntry(1)]], { watermark: 1_000 }, { txn: 1, offsets: { 0: 10 } });
  // The first leader pauses past its lease: Redis drops the key, and the second replica takes the account.
  await redis.del(keys.lease);
  const next = await new Lease(redis, keys, 60_000).renew();
  expect(next).toBeGreaterThan(old);
  return { redis, keys, store, old, next };
}

describe("commit.lua's lease-epoch fence", () => {
  it("refuses a superseded leader's restore finish, which would move the changelog transaction back", async () => {
    const { store, old, next } = await takenOver();
    // The new leader commits transaction 2; the former one wakes up and finishes the restore it read up to
    // transaction 1 (the changelog's checkpoint then, and the end markers' offsets).
    await store.commit(next, [[1, storedEntry(1, 2)]], { watermark: 2_000 }, { txn: 2, offsets: { 0: 20 } }, 1);
    const stale = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 1, epoch: old, watermark: 1_000, initialDone: true };
    await expect(store.restoreFinish(old, stale, { 0: 12 }, 'cluster')).rejects.toBeInstanceOf(FencedError);
    const state = await store.changelogState();
    expect(state.txn).toBe(2);
    expect(state.offsets).toEqual({ 0: 20 });
    const ckpt = await store.checkpoint();
    expect(ckpt.watermark).toBe(2_000);
    expect(ckpt.initialDone).toBe(false);
    expect((await store.read([1])).get(1)?.sequence).toBe(2);
  });

  it("refuses a superseded leader's checkpoint-only write though the changelog transaction it expects still holds", async () => {
    const { store, old, next } = await takenOver();
    // The new leader resumed the sweep and moved its cursor (Redis only: unchanged pages).
    const cursor = { kind: 'sweep' as const, cursor: 'page-9', startedAt: 1, seen: 18 };
    await store.commit(next, [], { sweep: cursor, lastIncrementalAt: 7_000 }, undefined, 1);
    const stale = { kind: 'sweep' as const, cursor: 'page-3', startedAt: 1, seen: 6 };
    await expect(
      store.commit(old, [], { sweep: stale, lastIncrementalAt: 5_000 }, undefined, 1),
    ).rejects.toBeInstanceOf(FencedError);
    const ckpt = await store.checkpoint();
    expect(ckpt.sweep).toEqual(cursor);
    expect(ckpt.lastIncrementalAt).toBe(7_000);
    expect(await store.changelogTxn()).toBe(1);
  });

  it("refuses a superseded leader's restore batch, which would write older entries over its successor's", async () => {
    const { redis, keys, store, old, next } = await takenOver();
    // The former leader froze in a tail restore it had read up to transaction 1; meanwhile the new leader committed
    // review 1 at sequence 2, and review 5 was deleted (sequence 4 kept for a comeback).
    await store.commit(next, [[1, storedEntry(1, 2)]], { watermark: 2_000 }, { txn: 2, offsets: { 0: 20 } }, 1);
    await redis.hset(keys.gone, '5', '4');
    const batch = store.restoreEntries(old, [
      [1, storedEntry(1)],
      [5, null, 2],
    ]);
    await expect(batch).rejects.toBeInstanceOf(FencedError);
    expect((await store.read([1])).get(1)?.sequence).toBe(2);
    expect(await store.goneSequences([5])).toEqual(new Map([[5, 4]]));
    expect(await redis.hget(keys.checkpoint, 'restore_token')).toBeNull();
  });
});
