import { describe, expect, it } from 'vitest';
import { redisForFile } from '../../helpers/file-redis.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { accountKeys } from '../../../src/redis/connection.js';
import { capturedLogger, startTestBridge, testEnv } from '../../helpers/bridge.js';
import { Oracle, readTopics, requestSweep, settle, summary, violations } from '../../helpers/oracle.js';
import { writeFileSync } from 'node:fs';
import { freePort, PrivateRedis, runDir, waitFor } from '../../helpers/processes.js';
import { openRedis, redisAddress } from '../../helpers/topologies.js';

// A Redis that keeps evicting (issue 46): 20,000 reviews on a Redis of the test's own whose maxmemory, under
// allkeys-lru, is lowered to its overhead plus 80 % of what the loaded snapshot takes, through a sweep and a
// history of status changes and edits; then maxmemory is raised. A read_committed reader must get no event twice,
// none invented, none lost, every status change as review.status_changed; /readyz must be 503, naming Redis's
// eviction, while the snapshot cannot be held. Before, the bridge restored over and over, published thousands of
// review.created again (repeated ids, and second ones with sequence 1 and new ids), and /readyz stayed ready.

const REVIEWS = 20_000;
const FRACTION = 0.8;
const redis = new PrivateRedis(await freePort(), 'redis-evicting', 'none');
const cleanups = redisForFile(redis);

/** A figure of INFO (memory or stats). */
const infoField = (info: string, name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? NaN);

interface Readyz {
  status: number;
  reason: string | null;
}

describe('fault: a Redis that keeps evicting the snapshot', () => {
  it('publishes nothing twice or invented, says why (/readyz 503), and delivers everything once memory is back', async () => {
    const sim = await startSimulator({ reviewCount: REVIEWS, seed: 46, rateLimit: null });
    cleanups.push(() => sim.close());
    const port = await freePort();
    const env = testEnv(sim.url, {
      REDIS_URL: redis.url,
      UPSTREAM_RATE_LIMIT_RPS: '500',
      POLL_INTERVAL_MS: '300',
      HTTP_PORT: String(port),
    });
    const topics = {
      created: env.KAFKA_TOPIC_CREATED!,
      statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
      updated: env.KAFKA_TOPIC_UPDATED!,
      deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
    };
    const account = env.BRIDGE_ACCOUNT!;
    const keys = accountKeys(env.REDIS_KEY_PREFIX!, account);
    // The test's own connection: a Redis evicting must not evict what the test reads with, so it reads only.
    const probe = openRedis(redisAddress(env), { maxRetriesPerRequest: 1 });
    cleanups.push(() => probe.quit());
    const checkpoint = () => probe.hgetall(keys.checkpoint).catch(() => ({}) as Record<string, string>);
    const overhead = infoField(await probe.info('memory'), 'used_memory');

    const { logger, lines } = capturedLogger(process.env.EVICT_LOG_LEVEL ?? 'info');
    const b = await startTestBridge(env, {}, logger);
    cleanups.push(() => b.stop());
    // The bridge's log, for a failure's diagnosis.
    cleanups.push(async () =>
      writeFileSync(`${runDir('redis-evicting')}/bridge.log`, lines.map((l) => JSON.stringify(l)).join('\n')),
    );
    const t0 = Date.now();
    await waitFor(async () => ((await checkpoint()).initial_done === '1' ? true : undefined), 240_000, 'the load');
    const progress = (what: string) => console.log(`[redis-evicting] ${what} after ${Date.now() - t0} ms`);
    progress('loaded');

    // What the snapshot needs: the loaded Redis less its overhead before the load.
    const loaded = infoField(await probe.info('memory'), 'used_memory');
    const maxmemory = Math.round(overhead + FRACTION * (loaded - overhead));
    // A sweep under way when memory runs short (its progress is in the checkpoint, restored with it).
    await requestSweep(redisAddress(env), env.REDIS_KEY_PREFIX!, account);
    await waitFor(async () => ((await checkpoint()).sweep_kind ? true : undefined), 60_000, 'the sweep to start');
    const oracle = new Oracle(sim.control, 46);
    const history = oracle.runHistory({ durationMs: 25_000, pauseMs: [20, 80] });
    await probe.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await probe.config('SET', 'maxmemory', String(maxmemory));
    const shortAt = Date.now();

    // /readyz while memory is short: 503 naming the eviction, once a restore saw it.
    const seen: Readyz[] = [];
    const readyz = async (): Promise<Readyz> => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      const body = (await res.json()) as { dependencies?: Record<string, { reason?: string }> };
      return { status: res.status, reason: body.dependencies?.redis?.reason ?? null };
    };
    const named = await waitFor(
      async () => {
        const r = await readyz();
        seen.push(r);
        return r.status === 503 && r.reason === 'evicting' ? r : undefined;
      },
      60_000,
      '/readyz to say Redis evicts',
    ).catch(() => null);
    progress(named ? '/readyz 503 evicting' : '/readyz never said evicting');
    const stats = await history;
    progress('history done');
    const evicted = infoField(await probe.info('stats'), 'evicted_keys');
    // Still short at the end of the history: still not ready.
    const stillShort = await readyz();

    // Memory is back.
    await probe.config('SET', 'maxmemory', '0');
    const backAt = Date.now();
    const ready = await waitFor(
      async () => ((await readyz()).status === 200 ? Date.now() : undefined),
      90_000,
      '/readyz once memory is back',
    );
    progress('ready again');
    await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, account, Date.now(), 240_000);
    progress('settled');

    const messages = await readTopics(Object.values(topics));
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    const tooSmall = lines.filter((l) => String(l.msg).includes('Redis maxmemory too small for the snapshot'));
    const resumed = lines.filter((l) => String(l.msg).includes('publishing resumes'));
    console.log(
      summary(`Redis evicting (allkeys-lru, maxmemory at ${FRACTION * 100} % of the snapshot's need)`, verdict, {
        history: stats,
        'used memory: overhead, loaded, maxmemory (bytes)': [overhead, loaded, maxmemory],
        'keys evicted': evicted,
        'readyz probes until it named the eviction':
          seen.length > 0 ? `${seen.filter((r) => r.status === 503).length} of ${seen.length} probes 503` : 'none',
        'readyz 503 -> 200 after memory was back (ms)': ready - backAt,
        'memory short for (ms)': backAt - shortAt,
        'log lines: too small, resumed': [tooSmall.length, resumed.length],
      }),
    );
    expect(evicted).toBeGreaterThan(0);
    expect(violations(verdict)).toEqual([]);
    expect(verdict.duplicates.extraDeliveries).toBe(0);
    expect(verdict.sequenceReuse).toEqual([]);
    expect(verdict.byType['review.created']).toBe(verdict.reviews);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
    expect(named).toEqual({ status: 503, reason: 'evicting' });
    expect(stillShort).toEqual({ status: 503, reason: 'evicting' });
    expect(tooSmall.length).toBeGreaterThanOrEqual(1);
    // One line per change of state, not one per restore.
    expect(tooSmall.length).toBe(resumed.length);
  }, 900_000);
});
