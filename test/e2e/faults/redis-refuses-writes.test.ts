import { describe, expect, it } from 'vitest';
import { redisForFile } from '../../helpers/file-redis.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { accountKeys } from '../../../src/redis/connection.js';
import { pollsCommitted, startTestBridge, testEnv } from '../../helpers/bridge.js';
import { Oracle, readTopics, settle, summary, violations } from '../../helpers/oracle.js';
import { freePort, PrivateRedis, waitFor } from '../../helpers/processes.js';
import { openRedis, redisAddress } from '../../helpers/topologies.js';

// Redis refuses writes for tens of seconds in the middle of a history (maxmemory reached under noeviction: every
// write answers OOM, reads still work), on a Redis of the test's own. Kafka keeps committing nothing new meanwhile
// except what it committed before a Redis write failed; once Redis takes writes again, a read_committed reader must
// have received every change exactly once: a page Kafka committed and Redis refused is written to Redis before the
// next page is read, never derived and published again.

const REVIEWS = 2_000;
const REFUSAL_MS = 25_000;
const redis = new PrivateRedis(await freePort(), 'redis-refuses-writes', 'none');
const cleanups = redisForFile(redis);

describe('fault: Redis refuses writes for tens of seconds', () => {
  it('mid-history (maxmemory with noeviction): once writes come back, nothing twice, nothing lost', async () => {
    const sim = await startSimulator({ reviewCount: REVIEWS, seed: 63, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, { REDIS_URL: redis.url, UPSTREAM_RATE_LIMIT_RPS: '20', POLL_INTERVAL_MS: '300' });
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
    const checkpoint = () => probe.hgetall(keys.checkpoint).catch(() => ({}) as Record<string, string>);

    const b = await startTestBridge(env);
    cleanups.push(() => b.stop());
    await waitFor(async () => ((await checkpoint()).initial_done === '1' ? true : undefined), 120_000, 'the load');

    const oracle = new Oracle(sim.control, 63);
    const history = oracle.runHistory({ durationMs: REFUSAL_MS + 12_000, pauseMs: [20, 80] });
    await pollsCommitted(b, 3, Date.now(), 60_000);
    // Every write refused from now on: maxmemory far below what Redis holds, and nothing may be evicted.
    await probe.config('SET', 'maxmemory-policy', 'noeviction');
    await probe.config('SET', 'maxmemory', '1');
    const refusedAt = Date.now();
    const refused = await probe.set(`${env.REDIS_KEY_PREFIX}:probe`, '1').catch((err: Error) => err.message);
    expect(String(refused)).toMatch(/^OOM/);
    // Polls keep failing meanwhile; the history goes on changing reviews.
    await waitFor(async () => (Date.now() - refusedAt >= REFUSAL_MS ? true : undefined), REFUSAL_MS + 5_000, 'time');
    const stuckAt = Number((await checkpoint()).last_incremental_at ?? 0);
    await probe.config('SET', 'maxmemory', '0');
    const stats = await history;
    const historyEnd = Date.now();
    await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, account, historyEnd, 180_000);

    const messages = await readTopics(Object.values(topics));
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    console.log(
      summary(`Redis refused writes for ${REFUSAL_MS / 1000} s mid-history`, verdict, {
        history: stats,
        'last poll committed during the refusal (ms before it ended)': refusedAt + REFUSAL_MS - stuckAt,
      }),
    );
    // No poll committed to Redis while it refused writes.
    expect(stuckAt).toBeLessThanOrEqual(refusedAt + 1_000);
    expect(violations(verdict)).toEqual([]);
    expect(verdict.sequenceReuse).toEqual([]);
    expect(verdict.duplicates.extraDeliveries).toBe(0);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
  });
});
