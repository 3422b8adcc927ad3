import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisForFile } from '../../helpers/file-redis.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { accountKeys } from '../../../src/redis/connection.js';
import { pollsCommitted, startTestBridge, testEnv } from '../../helpers/bridge.js';
import { Oracle, readTopics, settle, summary, violations } from '../../helpers/oracle.js';
import { PrivateRedis, waitFor } from '../../helpers/processes.js';
import { openRedis, redisAddress, RedisTopology } from '../../helpers/topologies.js';

// Redis is a cache of the Kafka changelog. Its every key is dropped (FLUSHALL: a restart without persistence, a
// failover to an empty replica, a flush) twice: in the middle of the initial load, and later while status changes
// and edits arrive; on a single Redis, and on a Redis Cluster with every primary flushed. Read back with a
// read_committed consumer: every event exactly once, no second review.created, no sequence restarted, every change
// delivered, and the account is not listed in full again.

const PORT = Number(process.env.FAULT_REDIS_LOSS_PORT ?? 36489);
const REVIEWS = 3_000;
const redis = new PrivateRedis(PORT, `redis-loss-${PORT}`, 'none');
const cluster = await RedisTopology.forFile('cluster');
const cleanups = redisForFile(redis);

describe('fault: Redis loses every key', () => {
  it('a single Redis: restored from the Kafka changelog, exactly once, no restarted sequence, no re-listing', async () => {
    await scenario('a single Redis', { REDIS_URL: redis.url });
  });

  it('a Redis Cluster with every primary flushed: the same', async () => {
    await scenario('a Redis Cluster', cluster.env);
  });
});

async function scenario(name: string, redisEnv: Record<string, string>): Promise<void> {
  const sim = await startSimulator({ reviewCount: REVIEWS, seed: 77, rateLimit: null });
  cleanups.push(() => sim.close());
  const env = testEnv(sim.url, {
    ...redisEnv,
    UPSTREAM_RATE_LIMIT_RPS: '20',
    POLL_INTERVAL_MS: '500',
    LEASE_TTL_MS: '3000',
  });
  const topics = {
    created: env.KAFKA_TOPIC_CREATED!,
    statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
    updated: env.KAFKA_TOPIC_UPDATED!,
    deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
  };
  const account = env.BRIDGE_ACCOUNT!;
  const keys = accountKeys(env.REDIS_KEY_PREFIX!, account);
  const probe = openRedis(redisAddress(env), { maxRetriesPerRequest: 1 });
  cleanups.push(() => probe.quit());
  // Every key of every primary: a flush of a whole Cluster is one FLUSHALL per primary.
  const flush = async () => {
    const nodes = probe instanceof Cluster ? probe.nodes('master') : [probe];
    await Promise.all(nodes.map((n) => n.flushall()));
  };
  const checkpoint = () => probe.hgetall(keys.checkpoint).catch(() => ({}) as Record<string, string>);

  const b = await startTestBridge(env);
  cleanups.push(() => b.stop());

  // 1. Every key gone in the middle of the initial load.
  await waitFor(
    async () => {
      const c = await checkpoint();
      return c.sweep_kind === 'initial' && Number(c.sweep_seen) >= 1_000 ? true : undefined;
    },
    60_000,
    'the initial load to be under way',
    20,
  );
  await flush();
  await waitFor(async () => ((await checkpoint()).initial_done === '1' ? true : undefined), 120_000, 'the load');
  const afterLoad = sim.control.stats().fullListingPages;

  // 2. Every key gone again while changes arrive.
  const oracle = new Oracle(sim.control, 77);
  const history = oracle.runHistory({ durationMs: 12_000, pauseMs: [20, 80] });
  // The second flush lands once the bridge has committed three polls into the twelve-second history (changes it
  // has taken into the snapshot are lost with it).
  await pollsCommitted(b, 3);
  await flush();
  const stats = await history;
  const historyEnd = Date.now();
  // Polls must catch up by themselves, before settle() asks for a sweep.
  await waitFor(
    async () => (Number((await checkpoint()).last_incremental_at ?? 0) > historyEnd ? true : undefined),
    60_000,
    'a poll after the history',
  );
  const fullListingPages = sim.control.stats().fullListingPages;
  await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, account, historyEnd, 120_000);

  const messages = await readTopics(Object.values(topics));
  const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
  const createdPerReview = new Map<string, number>();
  for (const m of messages) {
    if (m.topic !== topics.created) continue;
    createdPerReview.set(m.key ?? '', (createdPerReview.get(m.key ?? '') ?? 0) + 1);
  }
  const restores = (await b.app.metrics.registry.metrics()).match(
    /reviews_bridge_restores_total\{[^}]*kind="full"[^}]*\} (\d+)/,
  );
  console.log(
    summary(`${name} lost every key twice (FLUSHALL), Kafka intact`, verdict, {
      history: stats,
      'full listing pages (one listing is 30)': { afterLoad, beforeSettle: fullListingPages },
      'full restores': restores?.[1],
    }),
  );
  expect(violations(verdict)).toEqual([]);
  expect(verdict.sequenceReuse).toEqual([]);
  expect(verdict.duplicates.extraDeliveries).toBe(0);
  expect([...createdPerReview.values()].filter((n) => n > 1)).toEqual([]);
  expect(createdPerReview.size).toBe(verdict.reviews);
  expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
  // One listing of 3,000 reviews is 30 pages; the interrupted load resumes, it does not start over.
  expect(fullListingPages).toBeLessThan(40);
  expect(Number(restores?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
}
