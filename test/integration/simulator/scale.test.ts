import { describe, expect, it } from 'vitest';
import { ReviewSchema } from '../../../src/core/review.js';
import { list, sim, token, type Envelope } from './helpers.js';

// A million-review account without gigabytes: base reviews are computed from (seed, id) on demand.

describe('a 1,000,000-review simulator', () => {
  it('starts and serves the first, a middle and the last page, and incremental queries over its changes', async () => {
    const simulator = await sim({ reviewCount: 1_000_000 });
    expect(simulator.control.reviewCount()).toBe(1_000_000);
    const accessToken = await token(simulator.url);

    const first = (await list(simulator.url, accessToken)).json() as Envelope;
    expect(first.reviews.map((r) => r.id)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(first.next_page).toBe('101');

    const middle = (await list(simulator.url, accessToken, { next_page: 500_001 })).json() as Envelope;
    expect(middle.reviews[0]?.id).toBe(500_001);
    expect(middle.reviews.every((r) => ReviewSchema.safeParse(r).success)).toBe(true);

    const last = (await list(simulator.url, accessToken, { next_page: 999_951 })).json() as Envelope;
    expect(last.count).toBe(50);
    expect(last.reviews.at(-1)?.id).toBe(1_000_000);
    expect(last.next_page).toBeUndefined();

    const since = Date.now();
    simulator.control.setStatus(777_777, { client: 'APPROVED' });
    simulator.control.createReview();
    const incremental = (await list(simulator.url, accessToken, { updated_date: since })).json() as Envelope;
    expect(incremental.reviews.map((r) => r.id)).toEqual([777_777, 1_000_001]);

    // A filter reaching back into the generated history walks the ids; it still answers a full page.
    const historic = (
      await list(simulator.url, accessToken, { updated_date: 0, next_page: 999_901 })
    ).json() as Envelope;
    expect(historic.count).toBe(100);
  });
});
