import { EMPTY_CHANGELOG_CHECKPOINT } from '../../../src/core/changelog.js';
import { describe, expect, it } from 'vitest';
import { Lease } from '../../../src/redis/lease.js';
import { accountKeys, connectRedis, ReplicationError, type BridgeRedis } from '../../../src/redis/connection.js';
import { encodeEntry, fingerprint, type SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { FencedError, SnapshotLostError, SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';
import { waitFor } from '../../helpers/processes.js';
import { afterEach } from 'vitest';

const open: BridgeRedis[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.quit()));
});

function setup(ttlMs = 5_000) {
  const redis = connectRedis(redisUrl());
  open.push(redis);
  const keys = accountKeys(uniqueName('rb'), 'acct');
  return { redis, keys, store: new SnapshotStore(redis, keys), lease: new Lease(redis, keys, ttlMs) };
}

function entry(i: number, sequence = 1): SnapshotEntry {
  return {
    client: i % 3 === 0 ? 'REJECTED' : 'APPROVED',
    pwr: 'APPROVED',
    updatedDate: 1_700_000_000_000 + i,
    sequence,
    observedAt: 1_700_000_100_000,
    ...fingerprint({
      id: i,
      updated_date: 1,
      client_publication_status: 'x',
      pwr_publication_status: 'x',
      headline: `headline ${i}`,
      comments: `comment ${i}`,
      rating: (i % 5) + 1,
    }),
  };
}

describe('SnapshotStore', () => {
  it('commits entries and checkpoint atomically and reads them back in one round trip', async () => {
    const { store, lease } = setup();
    const epoch = await lease.renew();
    expect(epoch).toBeGreaterThan(0);
    const entries: [number, SnapshotEntry][] = [1, 2, 127, 128, 5_000_000].map((id) => [id, entry(id)]);
    await store.commit(epoch, entries, {
      watermark: 100,
      sweep: { kind: 'initial', cursor: 'c1', startedAt: 5, seen: 5 },
    });
    const read = await store.read([1, 2, 3, 127, 128, 5_000_000]);
    expect([...read.keys()].sort((a, b) => a - b)).toEqual([1, 2, 127, 128, 5_000_000]);
    expect(read.get(128)).toEqual(entry(128));
    expect(await store.size()).toBe(5);
    const ckpt = await store.checkpoint();
    expect(ckpt.watermark).toBe(100);
    expect(ckpt.sweep).toEqual({ kind: 'initial', cursor: 'c1', startedAt: 5, seen: 5 });
    expect(ckpt.initialDone).toBe(false);

    // Overwrites do not count as new reviews; the sweep state clears.
    await store.commit(epoch, [[1, entry(1, 2)]], { sweep: null, initialDone: true, lastSweepAt: 9 });
    expect(await store.size()).toBe(5);
    const after = await store.checkpoint();
    expect(after.sweep).toBeNull();
    expect(after.initialDone).toBe(true);
    expect(after.lastSweepAt).toBe(9);
    expect((await store.read([1])).get(1)?.sequence).toBe(2);
  });

  it('keeps what deletion detection remembers of unreadable records: none, an empty list, digests', async () => {
    const { store, lease } = setup();
    const epoch = await lease.renew();
    await store.commit(epoch, [], { lastSweepAt: 1 });
    expect(await store.checkpoint()).toMatchObject({ unreadable: null, deferredSweeps: 0, deferredReason: null });
    await store.commit(epoch, [], { unreadable: [], deferredSweeps: 0, deferredReason: null });
    expect((await store.checkpoint()).unreadable).toEqual([]);
    const digests = ['0123456789abcdef', '0123456789abcdef', 'fedcba9876543210'];
    await store.commit(epoch, [], { unreadable: digests, deferredSweeps: 2, deferredReason: 'new_unreadable' });
    expect(await store.checkpoint()).toMatchObject({
      unreadable: digests,
      deferredSweeps: 2,
      deferredReason: 'new_unreadable',
    });
    await store.commit(epoch, [], { unreadable: null, deferredSweeps: 0, deferredReason: null });
    expect(await store.checkpoint()).toMatchObject({ unreadable: null, deferredSweeps: 0, deferredReason: null });
    // A restore from the Kafka changelog brings them back.
    const restored = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 4, unreadable: digests, deferredSweeps: 1 };
    await store.restoreFinish(epoch, { ...restored, deferredReason: 'new_unreadable' }, {}, 'cluster');
    expect(await store.checkpoint()).toMatchObject({
      unreadable: digests,
      deferredSweeps: 1,
      deferredReason: 'new_unreadable',
    });
  });

  it('keeps the candidates of the remembered records, and restores them from the changelog', async () => {
    const { store, lease } = setup();
    const epoch = await lease.renew();
    await store.commit(epoch, [], { unreadable: ['aa', 'bb'] });
    // Written before candidates existed: unknown.
    expect((await store.checkpoint()).unreadableCandidates).toBeNull();
    const candidates = { aa: [3, 70_000_000], bb: [] };
    await store.commit(epoch, [], { unreadableCandidates: candidates });
    expect((await store.checkpoint()).unreadableCandidates).toEqual(candidates);
    await store.commit(epoch, [], { unreadableCandidates: {} });
    expect((await store.checkpoint()).unreadableCandidates).toEqual({});
    await store.commit(epoch, [], { unreadableCandidates: null });
    expect((await store.checkpoint()).unreadableCandidates).toBeNull();
    const restored = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 2, unreadable: ['aa'], unreadableCandidates: { aa: [5] } };
    await store.restoreFinish(epoch, restored, {}, 'cluster');
    expect(await store.checkpoint()).toMatchObject({ unreadable: ['aa'], unreadableCandidates: { aa: [5] } });
  });

  it('keeps the review.deleted sequence of removed reviews for a comeback, also through a restore', async () => {
    const { store, lease } = setup();
    const epoch = await lease.renew();
    await store.commit(
      epoch,
      [
        [1, entry(1, 4)],
        [2, entry(2, 1)],
        [300, entry(300, 2)],
      ],
      {},
    );
    expect(
      await store.removeEntries(epoch, [
        [1, entry(1, 4)],
        [300, entry(300, 2)],
        [2, entry(2, 9)],
      ]),
    ).toBe(2);
    // Review 2 changed meanwhile (another entry): not removed, not gone.
    expect(await store.goneSequences([1, 2, 300, 4])).toEqual(
      new Map([
        [1, 5],
        [300, 3],
      ]),
    );
    expect(await store.size()).toBe(1);
    // A full restore clears the memory with the snapshot and writes the changelog's deletion markers back.
    await store.clearForRestore();
    expect(await store.goneSequences([1, 300])).toEqual(new Map());
    await store.restoreEntries(epoch, [
      [1, null, 5],
      [2, entry(2, 1)],
      [7, null],
    ]);
    expect(await store.goneSequences([1, 2, 7])).toEqual(new Map([[1, 5]]));
  });

  it('refuses to finish a restore whose last restored entries a failover lost (restore token), finishes a whole one', async () => {
    const { redis, keys, store, lease } = setup();
    const epoch = await lease.renew();
    const restored = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 6, initialDone: true, watermark: 5 };
    await store.clearForRestore();
    await store.restoreEntries(epoch, [
      [1, entry(1, 1)],
      [2, entry(2, 1)],
    ]);
    await store.restoreEntries(epoch, [[1, entry(1, 2)]]);
    // A failover to a replica without the last pipeline of the restore: its entry and its token are gone (Redis
    // replicates one connection's writes in order), the earlier ones stay: review 1 reads at sequence 1 again.
    await redis.hset(keys.bucket(0), '1', encodeEntry(entry(1, 1)));
    const [token] = (await redis.hmget(keys.checkpoint, 'restore_token')) as [string];
    expect(token).toMatch(/:2$/);
    await redis.hset(keys.checkpoint, 'restore_token', token.replace(/:2$/, ':1'));
    await expect(store.restoreFinish(epoch, restored, { 0: 7 }, 'cluster')).rejects.toBeInstanceOf(SnapshotLostError);
    expect(await store.changelogTxn()).toBe(0);
    // Restored again, whole: it finishes, and the token is gone from the checkpoint.
    await store.clearForRestore();
    await store.restoreEntries(epoch, [
      [1, entry(1, 2)],
      [2, entry(2, 1)],
    ]);
    await store.restoreFinish(epoch, restored, { 0: 7 }, 'cluster');
    expect(await store.changelogTxn()).toBe(6);
    expect((await store.read([1])).get(1)?.sequence).toBe(2);
    expect(await redis.hget(keys.checkpoint, 'restore_token')).toBeNull();
  });

  it('never moves the watermark back', async () => {
    const { store, lease } = setup();
    const epoch = await lease.renew();
    await store.commit(epoch, [], { watermark: 500 });
    await store.commit(epoch, [], { watermark: 400 });
    expect((await store.checkpoint()).watermark).toBe(500);
    await store.commit(epoch, [], { watermark: 600 });
    expect((await store.checkpoint()).watermark).toBe(600);
  });

  it('refuses a commit under a superseded epoch and leaves everything as it was', async () => {
    const { redis, keys, store, lease } = setup(300);
    const old = await lease.renew();
    await store.commit(old, [[1, entry(1)]], { watermark: 1_000 });
    // The old leader pauses past its lease (Redis expires it); another replica takes over.
    await waitFor(
      async () => ((await redis.exists(keys.lease)) === 0 ? true : undefined),
      5_000,
      'the lease to expire',
      20,
    );
    const other = new Lease(redis, keys, 300);
    const next = await other.renew();
    expect(next).toBeGreaterThan(old);
    await expect(
      store.commit(
        old,
        [
          [1, entry(1, 9)],
          [2, entry(2)],
        ],
        { watermark: 2_000 },
      ),
    ).rejects.toBeInstanceOf(FencedError);
    expect((await store.checkpoint()).watermark).toBe(1_000);
    expect((await store.read([1])).get(1)?.sequence).toBe(1);
    expect((await store.read([2])).size).toBe(0);
    await store.commit(next, [], { watermark: 1_500 });
    expect((await store.checkpoint()).watermark).toBe(1_500);
  });

  it('keeps one leader per account and hands over on release', async () => {
    const { redis, keys } = setup();
    const a = new Lease(redis, keys, 5_000);
    const b = new Lease(redis, keys, 5_000);
    const ea = await a.renew();
    expect(ea).toBeGreaterThan(0);
    expect(await b.renew()).toBe(0);
    expect(await a.renew()).toBe(ea);
    await a.release();
    const eb = await b.renew();
    expect(eb).toBeGreaterThan(ea);
  });

  it('never hands an epoch out twice, even when a failover lost the last increment of the counter', async () => {
    const { redis, keys, lease } = setup();
    const first = await lease.renew();
    // What a promoted replica may look like: the lease and the counter's last increment never arrived.
    await redis.del(keys.lease);
    await redis.set(keys.epoch, String(first - 1));
    // A failover takes at least Sentinel's down-after time (seconds); a few ms are enough for the clock to move.
    const at = Date.now();
    await waitFor(() => (Date.now() > at ? true : undefined), 1_000, 'the clock to move', 1);
    const other = new Lease(redis, keys, 5_000);
    expect(await other.renew()).toBeGreaterThan(first);
  });

  it('refuses to build on a commit, lease or checkpoint that no replica acknowledged', async () => {
    const keys = accountKeys(uniqueName('rb'), 'acct');
    // The shared test Redis has no replica, so a client that needs one acknowledgement never gets it.
    const redis = connectRedis({
      target: { kind: 'standalone', url: redisUrl() },
      waitReplicas: 1,
      waitTimeoutMs: 50,
    });
    open.push(redis);
    const store = new SnapshotStore(redis, keys);
    await expect(new Lease(redis, keys, 5_000).renew()).rejects.toBeInstanceOf(ReplicationError);
    await expect(store.checkpoint()).rejects.toBeInstanceOf(ReplicationError);
    const epoch = Number((await redis.get(keys.lease))!.split('|')[1]);
    await expect(store.commit(epoch, [[1, entry(1)]], { watermark: 5 })).rejects.toBeInstanceOf(ReplicationError);
    // The writes themselves happened on the primary; only their durability is unconfirmed.
    expect(await redis.hget(keys.checkpoint, 'watermark')).toBe('5');
  });

  it('stores a review in at most 200 bytes of Redis memory', async () => {
    const { redis, keys, store, lease } = setup();
    const epoch = await lease.renew();
    const n = 12_800;
    for (let start = 1; start <= n; start += 1_000) {
      const batch: [number, SnapshotEntry][] = [];
      for (let id = start; id < start + 1_000 && id <= n; id++) batch.push([id, entry(id)]);
      await store.commit(epoch, batch, {});
    }
    let bytes = 0;
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', keys.bucketPattern, 'COUNT', 1_000);
      cursor = next;
      for (const key of found) bytes += (await redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
    } while (cursor !== '0');
    const perReview = bytes / n;
    console.log(`snapshot: ${perReview.toFixed(1)} bytes per review in Redis (${n} reviews)`);
    expect(perReview).toBeLessThanOrEqual(200);
    expect(await store.size()).toBe(n);
  });

  it('lists every entry of the account by scanning its buckets, and only its own', async () => {
    const { store, lease, redis, keys } = setup();
    const epoch = await lease.renew();
    const ids = [0, 1, 127, 128, 129, 1_000, 77_777, 5_000_000];
    await store.commit(
      epoch,
      ids.map((id) => [id, entry(id)]),
      {},
    );
    // Another account under the same prefix must not appear.
    const other = new SnapshotStore(redis, accountKeys(keys.epoch.split(':')[0]!, 'other'));
    await redis.set(accountKeys(keys.epoch.split(':')[0]!, 'other').epoch, '1');
    await other.commit(1, [[3, entry(3)]], {});
    const seen: [number, SnapshotEntry][] = [];
    for await (const batch of store.scanEntries(2)) seen.push(...batch);
    expect(seen.map(([id]) => id).sort((a, b) => a - b)).toEqual(ids);
    expect(new Map(seen).get(77_777)).toEqual(entry(77_777));
  });

  it('removes entries fenced by the epoch, and only those unchanged since the deletion was decided', async () => {
    const { store, lease, redis, keys } = setup();
    const epoch = await lease.renew();
    await store.commit(
      epoch,
      [1, 2, 3, 200].map((id) => [id, entry(id)]),
      {},
    );
    // Review 2 was seen again (sequence moved) after the sweep decided to delete it: it stays.
    await store.commit(epoch, [[2, entry(2, 5)]], {});
    expect(
      await store.removeEntries(epoch, [
        [1, entry(1)],
        [2, entry(2)],
        [200, entry(200)],
      ]),
    ).toBe(2);
    expect([...(await store.read([1, 2, 3, 200])).keys()]).toEqual([2, 3]);
    expect(await store.size()).toBe(2);
    // Removing again is a no-op; a stale epoch is refused and removes nothing.
    expect(await store.removeEntries(epoch, [[1, entry(1)]])).toBe(0);
    await redis.incr(keys.epoch);
    await expect(store.removeEntries(epoch, [[3, entry(3)]])).rejects.toBeInstanceOf(FencedError);
    expect(await store.size()).toBe(2);
  });

  it('keeps a pause flag with the time of the first pause until resumed', async () => {
    const { store } = setup();
    expect(await store.pausedSince()).toBeNull();
    await store.pause(1_000);
    await store.pause(2_000);
    expect(await store.pausedSince()).toBe(1_000);
    expect(await store.resume()).toBe(true);
    expect(await store.pausedSince()).toBeNull();
    expect(await store.resume()).toBe(false);
  });
});
