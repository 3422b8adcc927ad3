import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ReviewSchema } from '../../../src/core/review.js';
import { list, sim, token, walk, type Envelope } from './helpers.js';

// Faults the bridge must survive: server errors, slow answers, bodies cut midway, malformed records, oversized
// bodies. All switchable at runtime.

describe('fault injection', () => {
  it('answers the configured error statuses at errorRate 1 and recovers at 0', async () => {
    const simulator = await sim({ faults: { errorRate: 1, errorStatuses: [502, 504] } });
    const accessToken = await token(simulator.url);
    const statuses = new Set<number>();
    for (let i = 0; i < 20; i++) statuses.add((await list(simulator.url, accessToken)).status);
    expect([...statuses].sort()).toEqual([502, 504]);
    simulator.control.setFaults({ errorRate: 0 });
    expect((await list(simulator.url, accessToken)).status).toBe(200);
  });

  it('fails roughly errorRate of the listing requests, never the token endpoint', async () => {
    const simulator = await sim({ faults: { errorRate: 0.3 } });
    const accessToken = await token(simulator.url);
    let failed = 0;
    for (let i = 0; i < 200; i++) {
      const { status } = await list(simulator.url, accessToken, { limit: 1 });
      if (status !== 200) {
        expect([500, 502, 503, 504]).toContain(status);
        failed++;
      }
    }
    expect(failed).toBeGreaterThan(30);
    expect(failed).toBeLessThan(90);
    expect(simulator.control.stats().tokensIssued).toBe(1);
  });

  it('truncates bodies: the full Content-Length is announced, the connection drops midway', async () => {
    const simulator = await sim({ faults: { truncateRate: 1 } });
    const accessToken = await token(simulator.url);
    const response = await request(`${simulator.url}/v1/reviews`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    expect(response.statusCode).toBe(200);
    expect(Number(response.headers['content-length'])).toBeGreaterThan(1000);
    await expect(response.body.text()).rejects.toThrow();
    simulator.control.setFaults({ truncateRate: 0 });
    expect((await list(simulator.url, accessToken)).status).toBe(200);
  });

  it('truncates compressed bodies too', async () => {
    const simulator = await sim({ faults: { truncateRate: 1 } });
    const accessToken = await token(simulator.url);
    const response = await request(`${simulator.url}/v1/reviews`, {
      headers: { authorization: `Bearer ${accessToken}`, 'accept-encoding': 'gzip' },
    });
    expect(response.headers['content-encoding']).toBe('gzip');
    await expect(response.body.arrayBuffer()).rejects.toThrow();
  });

  it('serves malformed records among good ones, the same ids every time for a seed', async () => {
    const simulator = await sim({ reviewCount: 1000, faults: { malformedRate: 0.05 } });
    const accessToken = await token(simulator.url);
    const records = (await walk(simulator.url, accessToken)).flatMap((p) => p.reviews);
    expect(records).toHaveLength(1000);
    const bad = records.filter((r) => !ReviewSchema.safeParse(r).success);
    expect(bad.length).toBeGreaterThan(20);
    expect(bad.length).toBeLessThan(90);
    // All three kinds: id not an integer, updated_date missing, status not a string.
    expect(bad.some((r) => r.id === 'abc')).toBe(true);
    expect(bad.some((r) => typeof r.id === 'number' && !('updated_date' in r))).toBe(true);
    expect(bad.some((r) => typeof r.client_publication_status === 'number')).toBe(true);

    const again = (await walk(simulator.url, accessToken)).flatMap((p) => p.reviews);
    expect(again).toEqual(records);
    const twin = await sim({ reviewCount: 1000, faults: { malformedRate: 0.05 } });
    const twinRecords = (await walk(twin.url, await token(twin.url))).flatMap((p) => p.reviews);
    expect(twinRecords).toEqual(records);
  });

  it('keeps malformed records out of get() (the control view is the true record)', async () => {
    const simulator = await sim({ faults: { malformedRate: 1 } });
    const page = (await list(simulator.url, await token(simulator.url), { limit: 5 })).json() as Envelope;
    expect(page.reviews.every((r) => !ReviewSchema.safeParse(r).success)).toBe(true);
    expect(ReviewSchema.safeParse(simulator.control.get(1)).success).toBe(true);
  });

  it('adds latency to answers', async () => {
    const simulator = await sim({ faults: { latencyMs: 300 } });
    const accessToken = await token(simulator.url);
    const started = performance.now();
    expect((await list(simulator.url, accessToken, { limit: 1 })).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('closes promptly while requests wait out injected latency', async () => {
    const simulator = await sim({ faults: { latencyMs: 60_000 } });
    const pending = request(`${simulator.url}/v1/reviews`).then(
      () => 'answered',
      () => 'failed',
    );
    // fixed wait: lets the request reach the server before it closes; the simulator counts requests only when
    // answered, so there is no event to wait for. Were it to arrive late, it would fail all the same.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await simulator.close();
    expect(await pending).toBe('failed');
  });

  it('inflates records with padBytes to produce oversized bodies', async () => {
    const simulator = await sim({ faults: { padBytes: 50_000 } });
    const accessToken = await token(simulator.url);
    const answer = await list(simulator.url, accessToken);
    expect(answer.status).toBe(200);
    expect(answer.raw.length).toBeGreaterThan(100 * 50_000);
    expect((answer.json() as Envelope).reviews[0]?.padding).toHaveLength(50_000);
  });

  it('rejects invalid fault settings with a message naming the setting', async () => {
    const simulator = await sim();
    expect(() => simulator.control.setFaults({ errorRate: 2 })).toThrow(/faults\.errorRate/);
    expect(() => simulator.control.setFaults({ errorStatuses: [200] })).toThrow(/faults\.errorStatuses/);
    expect(() => simulator.control.setFaults({ latencyMs: -1 })).toThrow(/faults\.latencyMs/);
  });
});
