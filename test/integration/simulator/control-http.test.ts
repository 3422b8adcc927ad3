import { describe, expect, it } from 'vitest';
import { SimulatorControlError } from '../../../src/simulator/control-client.js';
import { SimulatorHttpControl } from '../../../src/simulator/index.js';
import { call, list, requestToken, sim, token, type Envelope } from './helpers.js';

// The HTTP control interface (for a simulator in another process) drives the same state as the in-process one.

describe('HTTP control interface and SimulatorHttpControl', () => {
  it('creates, changes, edits and reads reviews', async () => {
    const simulator = await sim({ reviewCount: 50 });
    const control = new SimulatorHttpControl(`${simulator.url}/`);
    const since = Date.now();

    const created = await control.createReview({ headline: 'Over HTTP' });
    expect(created).toMatchObject({ id: 51, headline: 'Over HTTP' });
    expect(await control.reviewCount()).toBe(51);

    const changed = await control.setStatus(10, { client: 'APPROVED', pwr: 'REJECTED' });
    expect(changed).toMatchObject({
      id: 10,
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'REJECTED',
    });
    const edited = await control.edit(10, { rating: 2 });
    expect(edited).toMatchObject({ rating: 2, updated_date: changed.updated_date });

    expect(await control.get(10)).toEqual(simulator.control.get(10));
    expect(await control.get(999)).toBeNull();

    const page = (await list(simulator.url, await token(simulator.url), { updated_date: since })).json() as Envelope;
    expect(page.reviews.map((r) => r.id)).toEqual([10, 51]);
  });

  it('sets faults and rate limits, revokes tokens, reads and resets stats', async () => {
    const simulator = await sim();
    const control = new SimulatorHttpControl(simulator.url);
    const accessToken = await token(simulator.url);

    await control.setFaults({ errorRate: 1, errorStatuses: [504] });
    expect((await list(simulator.url, accessToken)).status).toBe(504);
    await control.setFaults({ errorRate: 0 });

    await control.revokeTokens();
    expect((await list(simulator.url, accessToken)).status).toBe(401);

    await control.setRateLimit({ rps: 1, burst: 1, status: 429 });
    await requestToken(simulator.url);
    expect((await requestToken(simulator.url)).status).toBe(429);
    await control.setRateLimit(null);
    expect((await requestToken(simulator.url)).status).toBe(200);

    const stats = await control.stats();
    expect(stats).toMatchObject({ requests: 6, throttled: 1, tokensIssued: 3 });
    expect(stats.byStatus).toEqual({ '200': 3, '504': 1, '401': 1, '429': 1 });
    await control.resetStats();
    expect(await control.stats()).toEqual({
      requests: 0,
      byStatus: {},
      throttled: 0,
      tokensIssued: 0,
      fullListingPages: 0,
    });
  });

  it('answers 404 for unknown reviews and routes, 400 for bad input, without counting control calls', async () => {
    const simulator = await sim();
    const control = new SimulatorHttpControl(simulator.url);
    await expect(control.setStatus(999, { client: 'APPROVED' })).rejects.toMatchObject({ status: 404 });
    await expect(control.edit(1, { id: 5 })).rejects.toMatchObject({ status: 400 });
    await expect(control.setFaults({ errorRate: 5 })).rejects.toThrow(SimulatorControlError);
    await expect(control.setRateLimit({ rps: 0 })).rejects.toMatchObject({ status: 400 });
    expect((await call(`${simulator.url}/_control/nothing`)).status).toBe(404);
    const bad = await call(`${simulator.url}/_control/reviews`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(201);
    expect(simulator.control.stats().requests).toBe(0);
  });

  it('removes a review over HTTP and a broken listing drops about the configured fraction', async () => {
    const simulator = await sim({ reviewCount: 400 });
    const control = new SimulatorHttpControl(simulator.url);
    await control.removeReview(7);
    expect(await control.get(7)).toBeNull();
    await expect(control.removeReview(7)).rejects.toMatchObject({ status: 404 });
    await control.restoreReview(7);
    expect(await control.get(7)).toMatchObject({ id: 7 });
    await expect(control.restoreReview(7)).rejects.toMatchObject({ status: 404 });
    await control.removeReview(7);
    const ids = async () => {
      const bearer = await token(simulator.url);
      const seen: number[] = [];
      let cursor: string | undefined;
      do {
        const page = (
          await list(simulator.url, bearer, cursor ? { limit: 100, next_page: cursor } : { limit: 100 })
        ).json() as Envelope;
        seen.push(...page.reviews.map((r) => r.id as number));
        cursor = page.next_page as string | undefined;
      } while (cursor);
      return seen;
    };
    const full = await ids();
    expect(full).toHaveLength(399);
    expect(full).not.toContain(7);
    await control.setFaults({ dropRate: 0.5 });
    const broken = await ids();
    expect(broken.length).toBeGreaterThan(120);
    expect(broken.length).toBeLessThan(280);
    expect(broken.every((id) => full.includes(id))).toBe(true);
    // The same reviews are dropped on every read, as a consistently broken listing would.
    expect(await ids()).toEqual(broken);
  });
});
