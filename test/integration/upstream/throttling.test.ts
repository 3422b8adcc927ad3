import { describe, expect, it } from 'vitest';
import { drain, range, testClient, type HookLog, perTestResources } from './helpers.js';
import { waitFor } from '../../helpers/processes.js';

// A client configured far above what the upstream allows must still finish its pass: the limiter adapts (AIMD),
// Retry-After pauses everything, and the number of throttled answers stays bounded.

const { simulator, track } = perTestResources();

/** For each throttled answer, the gap until the next request was sent. */
function gapsAfterThrottle(log: HookLog): number[] {
  const gaps: number[] = [];
  log.requests.forEach((req, i) => {
    const next = log.requests[i + 1];
    if ((req.status === 429 || req.status === 503) && next) gaps.push(next.sentAt - req.doneAt);
  });
  return gaps;
}

describe('upstream client under throttling (simulator)', () => {
  it('survives a 429 storm with Retry-After: pass completes, Retry-After honoured, rate reduced', async () => {
    const sim = await simulator({
      reviewCount: 600,
      rateLimit: { rps: 4, burst: 4, status: 429, retryAfterSeconds: 1 },
    });
    const { client, log } = track(testClient(sim.url, { pageSize: 25, rateLimitRps: 40 }));
    const lowest: number[] = [];

    const pass = await drain(client, {}, () => {
      lowest.push(client.limiterState().currentRps);
    });

    expect(pass.reviews.map((r) => r.id)).toEqual(range(600));
    const stats = sim.control.stats();
    expect(stats.throttled).toBeGreaterThan(0);
    // Bounded: the limiter settles near the upstream's rate instead of hammering it (24 pages + 1 token).
    expect(stats.throttled).toBeLessThan(12);
    expect(log.throttled.every((t) => t.status === 429 && t.retryAfter === 1)).toBe(true);
    expect(Math.min(...lowest)).toBeLessThan(40);
    // Retry-After: 1 held every request back for (about) a second; a little slack for timer granularity.
    for (const gap of gapsAfterThrottle(log)) expect(gap).toBeGreaterThanOrEqual(990);
    expect(log.retries.filter((r) => r.reason === 'status_429')).toHaveLength(stats.throttled);
  });

  it('adapts to 503 throttling without Retry-After (backoff and multiplicative decrease only)', async () => {
    const sim = await simulator({
      reviewCount: 600,
      rateLimit: { rps: 4, burst: 2, status: 503, retryAfterSeconds: null },
    });
    const { client, log } = track(testClient(sim.url, { pageSize: 25, rateLimitRps: 40 }));
    const rates: number[] = [];

    const pass = await drain(client, {}, () => {
      rates.push(client.limiterState().currentRps);
    });

    expect(pass.reviews).toHaveLength(600);
    const stats = sim.control.stats();
    expect(stats.throttled).toBeGreaterThan(0);
    expect(stats.throttled).toBeLessThan(12);
    expect(log.throttled.every((t) => t.status === 503 && t.retryAfter === null)).toBe(true);
    expect(Math.min(...rates)).toBeLessThanOrEqual(10);
  });

  it('recovers: after the storm the limiter climbs back to its configured rate', async () => {
    const sim = await simulator({ reviewCount: 60, rateLimit: { rps: 4, burst: 1, status: 503 } });
    // A fast recovery so that the test need not wait the default ~10 s per doubling.
    const { client } = track(
      testClient(sim.url, { pageSize: 20, rateLimitRps: 20, limiter: { recoveryDoublingSeconds: 0.3 } }),
    );
    const rates: number[] = [];
    await drain(client, {}, () => {
      rates.push(client.limiterState().currentRps);
    });
    expect(sim.control.stats().throttled).toBeGreaterThan(0);
    expect(Math.min(...rates)).toBeLessThan(20);
    sim.control.setRateLimit(null);
    // Recovery doubles the rate every 0.3 s back to the configured 20/s (a few seconds at most).
    await waitFor(
      () => (client.limiterState().currentRps === 20 ? true : undefined),
      10_000,
      'the rate to recover',
      20,
    );
    expect(client.limiterState().currentRps).toBe(20);
  });
});
