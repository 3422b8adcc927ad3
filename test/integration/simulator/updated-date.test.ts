import { describe, expect, it } from 'vitest';
import { list, sim, token, walk, type Envelope } from './helpers.js';

// Spec, List reviews: updated_date is "used for incremental ingestion of content changed since a point in time";
// its unit and comparison are open, so both are settings. Field notes: clients make them configurable.

async function idsSince(url: string, accessToken: string, updatedDate: number): Promise<unknown[]> {
  const pages = await walk(url, accessToken, { updated_date: updatedDate });
  return pages.flatMap((p) => p.reviews.map((r) => r.id));
}

describe('GET /v1/reviews updated_date', () => {
  it('with the defaults (ms, >=) returns exactly the reviews updated at or after the instant', async () => {
    const simulator = await sim();
    const changed = simulator.control.setStatus(42, { client: 'APPROVED', pwr: 'APPROVED' });
    const stamp = changed.updated_date as number;
    const accessToken = await token(simulator.url);
    expect(await idsSince(simulator.url, accessToken, stamp)).toEqual([42]);
    expect(await idsSince(simulator.url, accessToken, stamp + 1)).toEqual([]);
  });

  it('with comparison gt excludes the review updated at exactly that instant', async () => {
    const simulator = await sim({ updatedDateComparison: 'gt' });
    const stamp = simulator.control.setStatus(7, { pwr: 'REJECTED' }).updated_date as number;
    const accessToken = await token(simulator.url);
    expect(await idsSince(simulator.url, accessToken, stamp)).toEqual([]);
    expect(await idsSince(simulator.url, accessToken, stamp - 1)).toEqual([7]);
  });

  it('with unit s compares whole seconds (>=)', async () => {
    const simulator = await sim({ updatedDateUnit: 's' });
    const stamp = simulator.control.setStatus(9, { client: 'REJECTED' }).updated_date as number;
    const seconds = Math.floor(stamp / 1000);
    const accessToken = await token(simulator.url);
    expect(await idsSince(simulator.url, accessToken, seconds)).toEqual([9]);
    expect(await idsSince(simulator.url, accessToken, seconds + 1)).toEqual([]);
  });

  it('with unit s and gt needs a strictly later second', async () => {
    const simulator = await sim({ updatedDateUnit: 's', updatedDateComparison: 'gt' });
    const stamp = simulator.control.setStatus(9, { client: 'REJECTED' }).updated_date as number;
    const seconds = Math.floor(stamp / 1000);
    const accessToken = await token(simulator.url);
    expect(await idsSince(simulator.url, accessToken, seconds)).toEqual([]);
    expect(await idsSince(simulator.url, accessToken, seconds - 1)).toEqual([9]);
  });

  it('reaches into the generated history: filtered result equals the full listing filtered by hand', async () => {
    const simulator = await sim({ reviewCount: 400 });
    simulator.control.setStatus(3, { client: 'APPROVED' });
    const accessToken = await token(simulator.url);
    const everything = (await walk(simulator.url, accessToken)).flatMap((p) => p.reviews);
    const dates = everything.map((r) => r.updated_date as number).sort((a, b) => a - b);
    const bound = dates[Math.floor(dates.length / 2)] as number;
    const expected = everything.filter((r) => (r.updated_date as number) >= bound).map((r) => r.id);
    expect(expected.length).toBeGreaterThan(150);
    expect(await idsSince(simulator.url, accessToken, bound)).toEqual(expected);
  });

  it('pages a filtered listing with the same cursor rule', async () => {
    const simulator = await sim({ reviewCount: 500 });
    const before = Date.now() - 1;
    const touched = [480, 5, 250, 251, 99, 1, 333];
    for (const id of touched) simulator.control.setStatus(id, { client: 'APPROVED' });
    const accessToken = await token(simulator.url);
    const pages = await walk(simulator.url, accessToken, { updated_date: before, limit: 3 });
    expect(pages.map((p) => p.count)).toEqual([3, 3, 1]);
    expect(pages.flatMap((p) => p.reviews.map((r) => r.id))).toEqual([...touched].sort((a, b) => a - b));
    expect(pages[0]?.next_page).toBe('250');
  });

  it('answers 400 with a JSON error for a value that is not a non-negative integer', async () => {
    const { url } = await sim();
    const accessToken = await token(url);
    for (const value of ['abc', '-1', '1.5', '2024-01-01', '']) {
      const answer = await list(url, accessToken, { updated_date: value });
      expect(answer.status, `updated_date=${value}`).toBe(400);
      expect(answer.json()).toEqual({ error: expect.stringContaining('updated_date') });
    }
  });

  it('returns an empty page, without cursor, when nothing changed since', async () => {
    const { url } = await sim();
    const page = (await list(url, await token(url), { updated_date: Date.now() })).json() as Envelope;
    expect(page).toEqual({ count: 0, reviews: [] });
  });
});
