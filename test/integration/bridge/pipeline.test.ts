import type { ConfigResourceTypes } from 'kafkajs';
import { afterEach, describe, expect, it } from 'vitest';
import { Lease } from '../../../src/redis/lease.js';
import { BridgeMetrics } from '../../../src/ops/metrics.js';
import { PagePipeline } from '../../../src/bridge/pipeline.js';
import { accountKeys, connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { page, review, silentLogger } from '../../helpers/fakes.js';
import { readAll, testKafka } from '../../helpers/kafka.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// The pipeline's quarantine against a real broker: a topic whose max.message.bytes was lowered below one review's
// event makes Kafka refuse that record (MESSAGE_TOO_LARGE) on every try; the rest of the page must still get through.

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((c) => c()));
});

describe('PagePipeline on Kafka and Redis', () => {
  it('quarantines the review whose record Kafka refuses and publishes the rest of its page', async () => {
    const topics = uniqueTopics('quarantine');
    const publisher = await connectedPublisher(topics);
    closers.push(() => publisher.disconnect());
    const admin = testKafka().admin();
    await admin.connect();
    closers.push(() => admin.disconnect());
    // An operator lowers the topic's limit after the bridge read it at start: the bridge still fits events to the
    // old limit, and Kafka refuses the large one (MESSAGE_TOO_LARGE) on every try.
    await admin.alterConfigs({
      validateOnly: false,
      resources: [
        {
          type: 2 as ConfigResourceTypes.TOPIC,
          name: topics.created,
          configEntries: [{ name: 'max.message.bytes', value: '4000' }],
        },
      ],
    });
    const redis: BridgeRedis = connectRedis(redisUrl());
    closers.push(() => redis.quit());
    const keys = accountKeys(uniqueName('rb'), 'acct');
    const store = new SnapshotStore(redis, keys);
    const epoch = await new Lease(redis, keys, 30_000).renew();
    const metrics = new BridgeMetrics({ account: 'acct' });
    const pipeline = new PagePipeline({
      snapshot: store,
      sink: publisher,
      metrics,
      logger: silentLogger,
      eventSource: 'urn:test',
      initialLoadMode: 'mark',
    });

    const p = page([review(1), review(2, { comments: 'x'.repeat(10_000) }), review(3)]);
    const attempt = async () => {
      const run = pipeline.open('incremental', epoch);
      await run.submit(p);
      await run.commit({});
    };
    for (let i = 0; i < 3; i++) await expect(attempt()).rejects.toThrow();
    await attempt();

    const read = await readAll([topics.created, topics.deadLetter], { untilCount: 3, timeoutMs: 20_000 });
    // The failed tries may have published reviews 1 and 3 already (at least once, same ids): distinct keys count.
    const created = new Set(read.filter((m) => m.topic === topics.created).map((m) => m.key));
    expect([...created].sort()).toEqual(['1', '3']);
    const dead = read.filter((m) => m.topic === topics.deadLetter);
    expect(dead).toHaveLength(1);
    expect(JSON.parse(dead[0]!.value)).toMatchObject({ reason: 'quarantined', record: { id: 2, reference: true } });
    expect(dead[0]!.value).not.toContain('xxxx');
    expect([...(await store.read([1, 2, 3])).keys()].sort()).toEqual([1, 3]);
    expect(await metrics.registry.metrics()).toMatch(
      /reviews_bridge_records_quarantined_total\{reason="record_refused"[^}]*\} 1/,
    );
  });
});
