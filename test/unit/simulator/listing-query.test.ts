import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lowerBoundMs, parseListingQuery, type UpdatedDateRule } from '../../../src/simulator/listing-query.js';

const rule: UpdatedDateRule = { unit: 'ms', comparison: 'gte' };
const parse = (query: string, maxId = 1000, r = rule) => parseListingQuery(new URLSearchParams(query), maxId, r);

describe('parseListingQuery', () => {
  it('defaults to the first page of 100 without a filter', () => {
    expect(parse('')).toEqual({ ok: true, query: { startId: 1, limit: 100, minUpdated: null, fromCursor: false } });
  });

  it('accepts limits 1..100 and cursors 1..maxId', () => {
    expect(parse('limit=1&next_page=1000')).toEqual({
      ok: true,
      query: { startId: 1000, limit: 1, minUpdated: null, fromCursor: true },
    });
    expect(parse('limit=100')).toMatchObject({ ok: true, query: { limit: 100 } });
  });

  it.each(['limit=0', 'limit=101', 'limit=abc', 'limit=', 'limit=1e2', 'limit=+5', 'limit=2.0'])('rejects %s', (q) => {
    expect(parse(q)).toEqual({ ok: false, error: expect.stringContaining('limit') });
  });

  it.each(['next_page=0', 'next_page=1001', 'next_page=abc', 'next_page=', 'next_page=01', 'next_page=-1'])(
    'rejects %s as an unknown cursor',
    (q) => {
      expect(parse(q)).toEqual({ ok: false, error: expect.stringContaining('next_page') });
    },
  );

  it.each(['updated_date=x', 'updated_date=-1', 'updated_date=', 'updated_date=1.5'])('rejects %s', (q) => {
    expect(parse(q)).toEqual({ ok: false, error: expect.stringContaining('updated_date') });
  });
});

describe('lowerBoundMs', () => {
  const rules: UpdatedDateRule[] = [
    { unit: 'ms', comparison: 'gte' },
    { unit: 'ms', comparison: 'gt' },
    { unit: 's', comparison: 'gte' },
    { unit: 's', comparison: 'gt' },
  ];

  it('matches a record exactly when the rule, read literally, says so', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...rules),
        fc.integer({ min: 0, max: 2_000_000_000_000 }),
        fc.integer({ min: 0, max: 2_000_000_000_000 }),
        (r, updated, rawValue) => {
          const value = r.unit === 's' ? Math.floor(rawValue / 1000) : rawValue;
          const recordInUnit = r.unit === 's' ? Math.floor(updated / 1000) : updated;
          const expected = r.comparison === 'gte' ? recordInUnit >= value : recordInUnit > value;
          expect(updated >= lowerBoundMs(value, r)).toBe(expected);
        },
      ),
    );
  });
});
