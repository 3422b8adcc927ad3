import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReviewSchema } from '../../../src/core/review.js';
import { fullReview, plainReview, validateRecords } from '../../../src/upstream/validate.js';

// validateRecords skips zod for records that surely pass it (plainReview): it must accept only what ReviewSchema
// accepts, and return what ReviewSchema returns, key order included (the order is the order of the JSON that
// events and state rows carry).

const anyValue = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  fc.string({ maxLength: 70 }),
  fc.constantFrom('', 'A', 'x'.repeat(64), 'x'.repeat(65), 'APPROVED'),
  fc.integer(),
  fc.constantFrom(-1, 0, -0, 1.5, 2 ** 53, 2 ** 53 - 1, -(2 ** 53), Number.NaN, Infinity, -Infinity, 1e300),
  fc.double(),
  fc.jsonValue({ maxDepth: 2 }),
);
const good = {
  id: fc.oneof(fc.nat(), fc.constantFrom(0, 2 ** 53 - 1)),
  updated_date: fc.nat(),
  client_publication_status: fc.constantFrom('APPROVED', 'REJECTED', 'a', 'x'.repeat(64)),
  pwr_publication_status: fc.constantFrom('PENDING', 'Approved'),
  headline: fc.option(fc.string()),
  rating: fc.option(fc.integer({ min: -5, max: 5 })),
  comments: fc.option(fc.string()),
  created_date: fc.option(fc.nat()),
};
const fieldNames = [...Object.keys(ReviewSchema.shape), 'extra', 'zeta', '__proto__', 'constructor', 'toString'];

/** An object as JSON.parse builds it from these entries: `__proto__` an own key, later duplicates winning. */
function parsedObject(entries: [string, unknown][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries)
    Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

/** Whether the fast path's review is what ReviewSchema returns for `raw`: same keys in the same order, same values. */
function sameAsZod(raw: unknown, review: Record<string, unknown>): boolean {
  const zod = ReviewSchema.safeParse(raw);
  return (
    zod.success &&
    JSON.stringify(Object.keys(review)) === JSON.stringify(Object.keys(zod.data)) &&
    Object.keys(review).every((k) => Object.is(review[k], (zod.data as Record<string, unknown>)[k])) &&
    Object.getPrototypeOf(review) === Object.getPrototypeOf(zod.data)
  );
}

/** Records close to valid ones: some fields dropped, some replaced by anything, unknown keys added, keys shuffled. */
const record = fc
  .tuple(
    fc.record(good, { requiredKeys: ['id', 'updated_date', 'client_publication_status', 'pwr_publication_status'] }),
    fc.array(fc.tuple(fc.constantFrom(...fieldNames), anyValue), { maxLength: 4 }),
    fc.subarray(Object.keys(good)),
    fc.boolean(),
  )
  .map(([base, changes, dropped, reverse]) => {
    const entries: [string, unknown][] = Object.entries(base).filter(([k]) => !dropped.slice(0, 1).includes(k));
    for (const [k, v] of changes) entries.push([k, v]);
    if (reverse) entries.reverse();
    return parsedObject(entries);
  });

/** Records with every schema field (the usual upstream record, built by one literal), sometimes more or less. */
const optionalText = fc.option(fc.string({ maxLength: 20 }));
const optionalNumber = fc.option(fc.integer());
const full = fc
  .tuple(
    fc.record({
      ...good,
      nickname: optionalText,
      email: optionalText,
      location: optionalText,
      bottom_line: optionalText,
      locale: optionalText,
      type: optionalText,
      product_page_id: optionalText,
      merchant_group_id: optionalNumber,
      merchant_id: optionalNumber,
      helpful_votes: optionalNumber,
      not_helpful_votes: optionalNumber,
      review_source: optionalText,
    }),
    fc.array(fc.tuple(fc.constantFrom(...fieldNames), anyValue), { maxLength: 2 }),
    fc.boolean(),
  )
  .map(([base, changes, reverse]) => {
    const entries: [string, unknown][] = Object.entries(base);
    for (const [k, v] of changes) entries.push([k, v]);
    if (reverse) entries.reverse();
    return parsedObject(entries);
  });

describe('validation fast path (plainReview)', () => {
  it('builds a full record in the schema order of its fields', () => {
    const raw = Object.fromEntries(Object.keys(ReviewSchema.shape).map((k, i) => [k, i]));
    expect(Object.keys(fullReview(raw))).toEqual(Object.keys(ReviewSchema.shape));
    expect(Object.values(fullReview(raw))).toEqual(Object.keys(ReviewSchema.shape).map((_, i) => i));
  });

  it('matches ReviewSchema on records with every field, some with more or with bad values (property)', () => {
    let fullShape = 0;
    fc.assert(
      fc.property(full, (raw) => {
        const review = plainReview(raw);
        if (review === null) return true;
        if (Object.keys(review).length === Object.keys(ReviewSchema.shape).length) fullShape++;
        return sameAsZod(raw, review);
      }),
      { numRuns: 2000 },
    );
    expect(fullShape).toBeGreaterThan(100);
  }, 60_000);

  it('accepts only what ReviewSchema accepts, and returns the same review with the same key order (property)', () => {
    let fast = 0;
    fc.assert(
      fc.property(fc.oneof(record, anyValue), (raw) => {
        const review = plainReview(raw);
        if (review === null) return true;
        fast++;
        return sameAsZod(raw, review);
      }),
      { numRuns: 3000 },
    );
    // The fast path is taken (for a few hundred of the generated records).
    expect(fast).toBeGreaterThan(100);
  }, 60_000);

  it('is taken for the usual record, from JSON', () => {
    const raw = JSON.parse(
      '{"zeta":1,"comments":"c","id":5,"__proto__":{"x":1},"updated_date":1700000000000,"client_publication_status":"A",' +
        '"pwr_publication_status":"B","rating":null}',
    ) as unknown;
    const review = plainReview(raw);
    expect(review).not.toBeNull();
    expect(JSON.stringify(review)).toBe(JSON.stringify(ReviewSchema.parse(raw)));
    // (The bounds refuse a `__proto__` key before either.)
    const { __proto__: _, ...listed } = raw as Record<string, unknown>;
    expect(JSON.stringify(validateRecords([listed]).reviews)).toBe(JSON.stringify([ReviewSchema.parse(listed)]));
  });
});
