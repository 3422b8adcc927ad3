import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BASE_EPOCH_MS, baseUpdatedDate, generateBaseReview, generateNewReview } from '../../../src/simulator/data.js';
import { hash32, mulberry32 } from '../../../src/simulator/prng.js';
import { ReviewSchema } from '../../../src/core/review.js';

const seedArb = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const idArb = fc.integer({ min: 1, max: 100_000_000 });

describe('prng', () => {
  it('mulberry32 repeats its sequence for a seed and stays in [0, 1)', () => {
    const a = mulberry32(42);
    const b = mulberry32(42);
    for (let i = 0; i < 1000; i++) {
      const value = a();
      expect(value).toBe(b());
      expect(value).toBeGreaterThanOrEqual(0);
      expect(value).toBeLessThan(1);
    }
  });

  it('hash32 spreads neighbouring inputs (no obvious collisions over 100k ids)', () => {
    const seen = new Set<number>();
    for (let id = 1; id <= 100_000; id++) seen.add(hash32(1, id, 1));
    expect(seen.size).toBeGreaterThan(99_990);
  });
});

describe('generated reviews', () => {
  it('are a pure function of (seed, id)', () => {
    fc.assert(
      fc.property(seedArb, idArb, (seed, id) => {
        expect(generateBaseReview(seed, id)).toEqual(generateBaseReview(seed, id));
      }),
    );
  });

  it('always pass the bridge schema and keep created <= updated < the base epoch', () => {
    fc.assert(
      fc.property(seedArb, idArb, (seed, id) => {
        const review = generateBaseReview(seed, id);
        expect(ReviewSchema.safeParse(review).success).toBe(true);
        expect(review.id).toBe(id);
        expect(review.updated_date).toBe(baseUpdatedDate(seed, id));
        expect(review.created_date as number).toBeLessThanOrEqual(review.updated_date as number);
        expect(review.updated_date as number).toBeLessThan(BASE_EPOCH_MS);
      }),
      { numRuns: 2000 },
    );
  });

  it('depend on the seed', () => {
    let differing = 0;
    for (let id = 1; id <= 100; id++) {
      if (JSON.stringify(generateBaseReview(1, id)) !== JSON.stringify(generateBaseReview(2, id))) differing++;
    }
    expect(differing).toBe(100);
  });

  it('carry every field of the spec table in the spec order when present', () => {
    const review = generateBaseReview(1, 1);
    const order = [
      'id',
      'headline',
      'rating',
      'comments',
      'nickname',
      'email',
      'location',
      'bottom_line',
      'locale',
      'type',
      'product_page_id',
      'merchant_group_id',
      'merchant_id',
      'created_date',
      'updated_date',
      'helpful_votes',
      'not_helpful_votes',
      'review_source',
      'client_publication_status',
      'pwr_publication_status',
    ];
    expect(Object.keys(review)).toEqual(order.filter((key) => key in review));
    expect(
      ['id', 'updated_date', 'client_publication_status', 'pwr_publication_status'].every((k) => k in review),
    ).toBe(true);
  });

  it('new reviews start pending with created = updated = now', () => {
    const review = generateNewReview(1, 5001, 1_750_000_000_000);
    expect(review).toMatchObject({
      id: 5001,
      created_date: 1_750_000_000_000,
      updated_date: 1_750_000_000_000,
      client_publication_status: 'PENDING',
      pwr_publication_status: 'PENDING',
      helpful_votes: 0,
    });
    expect(ReviewSchema.safeParse(review).success).toBe(true);
  });
});
