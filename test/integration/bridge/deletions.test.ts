import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectDeletions } from '../../../src/bridge/passes/deletions.js';
import { PagePipeline } from '../../../src/bridge/pipeline.js';
import { SeenIds } from '../../../src/core/deletion.js';
import { Lease } from '../../../src/redis/lease.js';
import { BridgeMetrics } from '../../../src/ops/metrics.js';
import type { KafkaPublisher } from '../../../src/kafka/publisher.js';
import { accountKeys, connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { readAll } from '../../helpers/kafka.js';
import { schemaErrors } from '../../helpers/schemas.js';
import { sampleEntry } from '../../helpers/entries.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// The deletion check at the end of a complete sweep, against the real Redis and Kafka: the reviews the sweep did
// not list get review.deleted and a tombstone, and their entries go; a listing that lost half the reviews deletes
// nothing and is counted as a refusal.

const topics = uniqueTopics('it-del');
const logger = pino({ level: 'silent' });
let publisher: KafkaPublisher;
let redis: BridgeRedis;

beforeAll(async () => {
  publisher = await connectedPublisher(topics);
  redis = connectRedis(redisUrl());
});
afterAll(async () => {
  await publisher.disconnect();
  await redis.quit();
});

async function setup(account: string) {
  const keys = accountKeys('rbtest', uniqueName(account));
  const store = new SnapshotStore(redis, keys);
  const epoch = await new Lease(redis, keys, 30_000).renew();
  const start = 50_000;
  // 400 reviews known before the sweep started, one written after it (created meanwhile).
  await store.commit(
    epoch,
    Array.from({ length: 400 }, (_, i): [number, SnapshotEntry] => [i + 1, sampleEntry(i + 1, start - 1, 2)]),
    {},
  );
  await store.commit(epoch, [[401, sampleEntry(401, start + 5, 2)]], {});
  return { store, epoch, start };
}

/** Runs the check over a fresh account of 400 + 1 reviews where the sweep listed the ids `saw` accepts. */
async function run(account: string, saw: (id: number) => boolean) {
  const { store, epoch, start } = await setup(account);
  const seen = new SeenIds();
  for (let id = 1; id <= 400; id++) if (saw(id)) seen.add(id);
  const metrics = new BridgeMetrics({ account: 'it' });
  const now = 1_800_000_000_000;
  const pipeline = new PagePipeline({
    snapshot: store,
    sink: publisher,
    metrics,
    logger,
    eventSource: 'urn:reviews-bridge:it',
    initialLoadMode: 'mark',
    clock: () => now,
  });
  const deps = { snapshot: store, sink: publisher, metrics, maxFraction: 0.01 };
  const result = await detectDeletions(pipeline, deps, epoch, (id) => seen.has(id), start);
  return { store, metrics, result };
}

describe('detectDeletions (src/bridge/passes/deletions.ts) on the real Redis and Kafka', () => {
  it('deletes the reviews a complete sweep missed: review.deleted, tombstone, entry removed, counted', async () => {
    const { store, metrics, result } = await run('del', (id) => id !== 17 && id !== 250);
    expect(result).toEqual({ deleted: 2 });
    expect([...(await store.read([16, 17, 250, 401])).keys()]).toEqual([16, 401]);
    expect(await store.size()).toBe(399);
    const deleted = (await readAll([topics.deleted], { untilCount: 2, timeoutMs: 30_000 })).map((m) =>
      JSON.parse(m.value),
    );
    expect(deleted.map((e) => [e.subject, e.sequence]).sort()).toEqual([
      ['17', 3],
      ['250', 3],
    ]);
    for (const e of deleted) expect(schemaErrors(e)).toEqual([]);
    const tombstones = await readAll([topics.state], { untilCount: 2, timeoutMs: 30_000 });
    expect(tombstones.map((m) => [m.key, m.value]).sort()).toEqual([
      ['17', ''],
      ['250', ''],
    ]);
    expect((await metrics.registry.getSingleMetricAsString('reviews_bridge_reviews_deleted_total')).trim()).toMatch(
      / 2$/,
    );
  });

  it('a listing that lost half the reviews deletes nothing and counts a refusal', async () => {
    const { store, metrics, result } = await run('refuse', (id) => id % 2 === 1);
    expect(result).toEqual({ refused: 200, known: 401 });
    expect(await store.size()).toBe(401);
    expect((await metrics.registry.getSingleMetricAsString('reviews_bridge_deletions_refused_total')).trim()).toMatch(
      / 1$/,
    );
  });
});
