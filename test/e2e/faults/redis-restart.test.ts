import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { redisForFile } from '../../helpers/file-redis.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestBridge, testEnv } from '../../helpers/bridge.js';
import {
  CheckpointMonitor,
  Oracle,
  readTopics,
  requestSweep,
  settle,
  summary,
  violations,
} from '../../helpers/oracle.js';
import { PrivateRedis, waitFor } from '../../helpers/processes.js';

// A private redis-server with persistence like production (append-only file, fsync on every write) is crashed
// (SIGKILL) in the middle of the initial load, and later shut down gracefully (SIGTERM) in the middle of a sweep,
// each time started again on the same data a few seconds later. The bridge must pause (commits fail, nothing is
// acknowledged as done), then take the lease again and catch up; the checkpoint and the snapshot must come back
// exactly as acknowledged, so nothing is lost or re-announced as new.

const PORT = Number(process.env.FAULT_REDIS_PORT ?? 36479);
const OUTAGE_MS = Number(process.env.FAULT_REDIS_OUTAGE_MS ?? 5_000);
const redis = new PrivateRedis(PORT);
const cleanups = redisForFile(redis);

describe('fault: Redis restarted', () => {
  it('pauses while Redis is away, then catches up; nothing lost, checkpoint intact', async () => {
    const sim = await startSimulator({ reviewCount: 500, seed: 41, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, {
      REDIS_URL: redis.url,
      UPSTREAM_PAGE_SIZE: '10',
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
    const monitor = new CheckpointMonitor(redis.url, env.REDIS_KEY_PREFIX!, account, 100);
    cleanups.push(() => monitor.stop());
    const b = await startTestBridge(env);
    cleanups.push(() => b.stop());
    const oracle = new Oracle(sim.control, 41);
    const history = oracle.runHistory({
      durationMs: 2 * OUTAGE_MS + 25_000,
      pauseMs: [30, 150],
      passRunning: () => monitor.sweepRunning,
    });

    const outages: Record<string, unknown>[] = [];
    const outage = async (how: 'SIGKILL' | 'SIGTERM') => {
      const before = { ...monitor.last };
      if (how === 'SIGKILL') await redis.kill();
      else await redis.stop();
      // fixed wait: the fault itself, Redis down past the lease's ttl (LEASE_TTL_MS 3 s). Waiting instead for the
      // bridge's 'lease could not be renewed in time' line timed out once after a graceful stop (not understood yet).
      await sleep(OUTAGE_MS);
      const health = b.app.loop.health();
      const restarted = Date.now();
      await redis.start();
      // Everything acknowledged before the outage is still there (the monitor would flag a regression otherwise).
      const after = await waitFor(
        () => (monitor.lastOkAt > restarted ? { ...monitor.last } : undefined),
        10_000,
        'a sample',
      );
      outages.push({
        how,
        at: before.sweep_kind ?? 'polling',
        seenBefore: before.sweep_seen,
        seenAfter: after.sweep_seen,
        health,
      });
    };

    // 1. Crash in the middle of the initial load.
    await waitFor(
      () => (monitor.last.sweep_kind === 'initial' && Number(monitor.last.sweep_seen) >= 100 ? true : undefined),
      60_000,
      'the initial load to be under way',
      20,
    );
    await outage('SIGKILL');
    // 2. Graceful restart in the middle of a sweep, after the initial load.
    await waitFor(() => (monitor.last.initial_done === '1' ? true : undefined), 60_000, 'the initial load');
    await requestSweep(redis.url, env.REDIS_KEY_PREFIX!, account);
    await waitFor(
      () => (monitor.last.sweep_kind === 'sweep' && Number(monitor.last.sweep_seen) >= 100 ? true : undefined),
      30_000,
      'a sweep to be under way',
      20,
    );
    await outage('SIGTERM');

    const stats = await history;
    const historyEnd = Date.now();
    await settle(redis.url, env.REDIS_KEY_PREFIX!, account, historyEnd, 120_000);
    const report = await monitor.stop();
    const messages = await readTopics(Object.values(topics));
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    console.log(
      summary('Redis crashed and restarted (AOF, fsync always)', verdict, {
        outages,
        'settled after the history ended (ms)': Date.now() - historyEnd,
        history: stats,
        checkpoint: report,
      }),
    );
    expect(report.failedSamples).toBeGreaterThan(0); // the monitor did see Redis go away
    expect(violations(verdict, { tolerateDetectionDrift: true })).toEqual([]);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
    expect(report.regressions).toEqual([]);
    expect(await b.store.size()).toBe(verdict.reviews);
  });
});
