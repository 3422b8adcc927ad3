import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { accountKeys } from '../../src/redis/connection.js';
import { startTestBridge, testEnv, upstreamRequests } from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { waitFor } from '../helpers/processes.js';
import { newRedis } from '../helpers/services.js';

// An upstream whose data clock (the updated_date it stamps) runs 5 minutes behind, and 5 minutes ahead of, the
// clock its Date headers show (an API gateway and a database keeping different time): every status change (during
// the initial load, to reviews it already read, and after it) must arrive through polls alone, no sweep, both at
// the default settings and with a 10 s POLL_OVERLAP_MS. Watermarks come from the data (the largest updated_date
// committed); a Date header only seeds the initial load's probe and caps a record stamped far ahead.

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const REVIEWS = 2_000;
const PAGE = 50;

describe('upstream data clock apart from its Date headers', () => {
  for (const offsetMinutes of [-5, 5]) {
    for (const overlap of [undefined, '10000']) {
      const name = `${Math.abs(offsetMinutes)} min ${offsetMinutes < 0 ? 'behind' : 'ahead'}`;
      it(`delivers every change by polls with updated_date ${name}, ${overlap === undefined ? 'default settings' : `POLL_OVERLAP_MS=${overlap}`}`, async () => {
        const sim = await startSimulator({
          reviewCount: REVIEWS,
          seed: 38,
          rateLimit: null,
          dataClockOffsetMs: offsetMinutes * 60_000,
        });
        cleanups.push(() => sim.close());
        // The default poll interval (1 s) and overlap unless overridden; pages of 50 so the load takes a while.
        const env = testEnv(sim.url, {
          POLL_INTERVAL_MS: '1000',
          UPSTREAM_PAGE_SIZE: String(PAGE),
          UPSTREAM_RATE_LIMIT_RPS: '10',
        });
        if (overlap === undefined) delete env.POLL_OVERLAP_MS;
        else env.POLL_OVERLAP_MS = overlap;
        const b = await startTestBridge(env);
        cleanups.push(() => b.stop());
        const redis = newRedis();
        cleanups.push(() => redis.quit());
        const keys = accountKeys(env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);

        const changed = new Map<number, string>();
        const change = (id: number) => {
          // Always a real change: the other status than the one the review has.
          const to = sim.control.get(id)?.client_publication_status === 'APPROVED' ? 'REJECTED' : 'APPROVED';
          sim.control.setStatus(id, { client: to });
          changed.set(id, to);
        };
        await waitFor(
          async () => (Number((await redis.hget(keys.checkpoint, 'sweep_seen')) ?? 0) >= 600 ? true : undefined),
          60_000,
          'the initial load to be under way',
          50,
        );
        // Changes spread over the load's pages (two per upstream request, to reviews it has read and not yet read),
        // then over the polls after it (five per request).
        for (let i = 1; i <= 20; i++) {
          change(i * 50);
          if (i % 2 === 0) await upstreamRequests(sim, 1);
        }
        await waitFor(
          async () => ((await redis.hget(keys.checkpoint, 'initial_done')) === '1' ? true : undefined),
          120_000,
          'the load',
        );
        for (let i = 1; i <= 30; i++) {
          change(1_000 + i * 7);
          if (i % 5 === 0) await upstreamRequests(sim, 1);
        }

        // Every change arrives as a status_changed event with its final status.
        const finals = new Map<number, string>();
        await waitFor(
          async () => {
            for (const m of await readAll([env.KAFKA_TOPIC_STATUS_CHANGED!], { timeoutMs: 10_000 })) {
              const event = JSON.parse(m.value) as {
                data: { review: { id: number; client_publication_status: string } };
              };
              finals.set(event.data.review.id, event.data.review.client_publication_status);
            }
            return [...changed].every(([id, to]) => finals.get(id) === to) ? true : undefined;
          },
          45_000,
          `every change to arrive (${[...changed].filter(([id, to]) => finals.get(id) !== to).length} not yet)`,
          500,
        );
        // No sweep ran: the pages of full listings are the initial load's.
        expect(sim.control.stats().fullListingPages).toBeLessThanOrEqual(REVIEWS / PAGE + 1);
        expect((await b.store.checkpoint()).sweep).toBeNull();
      });
    }
  }
});
