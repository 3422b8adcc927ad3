import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { accountKeys } from '../../src/redis/connection.js';
import { startTestBridge, testEnv, upstreamRequests } from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { waitFor } from '../helpers/processes.js';
import { newRedis } from '../helpers/services.js';

// The upstream's clock 10 minutes behind ours, and 10 minutes ahead, with the default overlap window (5 min):
// every status change (during the initial load, to reviews it already read, and after it) must arrive through
// polls alone, no sweep. Watermarks and caps come from the upstream's own time (its updated_date values and the
// Date headers of its answers), never from the bridge's clock. Latency figures are printed, not asserted.

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const REVIEWS = 2_000;

describe('upstream clock skew', () => {
  for (const skewMinutes of [-10, 10]) {
    it(`delivers every change by polls with the upstream ${Math.abs(skewMinutes)} min ${skewMinutes < 0 ? 'behind' : 'ahead'}`, async () => {
      const sim = await startSimulator({
        reviewCount: REVIEWS,
        seed: 31,
        rateLimit: null,
        clockSkewMs: skewMinutes * 60_000,
      });
      cleanups.push(() => sim.close());
      // The default overlap (5 min) and the default poll interval (1 s), pages of 50 so the load takes a while.
      const env = testEnv(sim.url, {
        POLL_OVERLAP_MS: '300000',
        POLL_INTERVAL_MS: '1000',
        UPSTREAM_PAGE_SIZE: '50',
        UPSTREAM_RATE_LIMIT_RPS: '10',
      });
      const b = await startTestBridge(env);
      cleanups.push(() => b.stop());
      const redis = newRedis();
      cleanups.push(() => redis.quit());
      const keys = accountKeys(env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);

      // Changes while the initial load runs (to reviews it has already read), then after it.
      const changedAt = new Map<number, { at: number; to: string }>();
      const change = (id: number) => {
        // Always a real change: the other status than the one the review has.
        const to = sim.control.get(id)?.client_publication_status === 'APPROVED' ? 'REJECTED' : 'APPROVED';
        sim.control.setStatus(id, { client: to });
        changedAt.set(id, { at: Date.now(), to });
      };
      await waitFor(
        async () => (Number((await redis.hget(keys.checkpoint, 'sweep_seen')) ?? 0) >= 600 ? true : undefined),
        60_000,
        'the initial load to be under way',
        50,
      );
      // The history's schedule: changes spread over the load's pages (two per upstream request), and below over
      // the polls (five per request).
      for (let id = 1; id <= 20; id++) {
        change(id * 10);
        if (id % 2 === 0) await upstreamRequests(sim, 1);
      }
      await waitFor(
        async () => ((await redis.hget(keys.checkpoint, 'initial_done')) === '1' ? true : undefined),
        120_000,
        'the load',
      );
      for (let id = 1; id <= 20; id++) {
        change(1000 + id * 7);
        if (id % 5 === 0) await upstreamRequests(sim, 1);
      }

      // Every change arrives as a status_changed event with its final status; no sweep ran.
      const finals = new Map<number, { status: string; timestamp: number }>();
      await waitFor(
        async () => {
          for (const m of await readAll([env.KAFKA_TOPIC_STATUS_CHANGED!], { timeoutMs: 10_000 })) {
            const event = JSON.parse(m.value) as {
              data: { review: { id: number; client_publication_status: string } };
            };
            finals.set(event.data.review.id, {
              status: event.data.review.client_publication_status,
              timestamp: m.timestamp,
            });
          }
          return [...changedAt].every(([id, c]) => finals.get(id)?.status === c.to) ? true : undefined;
        },
        60_000,
        'every change to arrive',
        500,
      );
      expect(await redis.hget(keys.checkpoint, 'last_sweep_at')).not.toBeNull(); // the initial load
      expect(sim.control.stats().fullListingPages).toBeLessThanOrEqual(REVIEWS / 50 + 1);
      const delays = [...changedAt].map(([id, c]) => finals.get(id)!.timestamp - c.at).sort((a, b) => a - b);
      const q = (p: number) => delays[Math.min(delays.length - 1, Math.ceil((p / 100) * delays.length) - 1)];
      const offset = (await b.app.metrics.registry.metrics()).match(
        /reviews_bridge_upstream_clock_offset_seconds\{[^}]*\} (\S+)/,
      );
      console.log(
        `[clock skew ${skewMinutes} min] ${delays.length} changes delivered by polls; delay p50 ${q(50)} ms, p99 ${q(99)} ms, max ${delays.at(-1)} ms; estimated offset ${offset?.[1]} s`,
      );
      expect(Math.abs(Number(offset?.[1]) - skewMinutes * 60)).toBeLessThan(5);
    });
  }
});
