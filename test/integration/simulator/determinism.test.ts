import { describe, expect, it } from 'vitest';
import { ReviewSchema } from '../../../src/core/review.js';
import { sim, token, walk } from './helpers.js';

// Reproducible data: a failing test or benchmark can be rerun against exactly the same upstream.

describe('generated data', () => {
  it('is identical for the same seed across simulator instances', async () => {
    const a = await sim({ seed: 7, reviewCount: 300 });
    const b = await sim({ seed: 7, reviewCount: 300 });
    const pagesA = await walk(a.url, await token(a.url));
    const pagesB = await walk(b.url, await token(b.url));
    expect(JSON.stringify(pagesB)).toBe(JSON.stringify(pagesA));
  });

  it('differs for another seed', async () => {
    const a = await sim({ seed: 7, reviewCount: 100 });
    const b = await sim({ seed: 8, reviewCount: 100 });
    const reviewsA = (await walk(a.url, await token(a.url))).flatMap((p) => p.reviews);
    const reviewsB = (await walk(b.url, await token(b.url))).flatMap((p) => p.reviews);
    expect(reviewsA.map((r) => r.id)).toEqual(reviewsB.map((r) => r.id));
    expect(reviewsA.filter((r, i) => r.headline !== reviewsB[i]?.headline).length).toBeGreaterThan(50);
  });

  it('fits the bridge schema and the spec table, with the variety clients must handle', async () => {
    const simulator = await sim({ reviewCount: 3000 });
    const reviews = (await walk(simulator.url, await token(simulator.url))).flatMap((p) => p.reviews);
    for (const review of reviews) expect(ReviewSchema.safeParse(review).success).toBe(true);

    const statuses = new Set(reviews.flatMap((r) => [r.client_publication_status, r.pwr_publication_status]));
    expect(statuses).toEqual(new Set(['PENDING', 'APPROVED', 'REJECTED', 'ON_HOLD']));
    expect(new Set(reviews.map((r) => r.type))).toEqual(new Set(['Review']));
    expect(reviews.every((r) => /^[a-z]{2}_[A-Z]{2}$/.test(r.locale as string))).toBe(true);
    expect(
      reviews.every((r) => Number.isInteger(r.rating) && (r.rating as number) >= 1 && (r.rating as number) <= 5),
    ).toBe(true);
    expect(reviews.every((r) => (r.created_date as number) <= (r.updated_date as number))).toBe(true);
    expect(reviews.every((r) => (r.updated_date as number) < Date.now())).toBe(true);
    // Optional fields come present, null, and missing.
    expect(reviews.some((r) => r.location === null)).toBe(true);
    expect(reviews.some((r) => !('location' in r))).toBe(true);
    expect(reviews.some((r) => r.email === null)).toBe(true);
    expect(reviews.some((r) => typeof r.email === 'string')).toBe(true);
  });
});
