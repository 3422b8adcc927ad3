import { describe, expect, it } from 'vitest';
import { chooseEncoding } from '../../../src/simulator/compression.js';
import {
  applyRecordFaults,
  FaultInjector,
  malform,
  MALFORMED_KINDS,
  malformedKind,
  NO_FAULTS,
} from '../../../src/simulator/faults.js';
import { generateBaseReview } from '../../../src/simulator/data.js';
import { TokenBucket } from '../../../src/simulator/rate-limit.js';
import { TokenRegistry } from '../../../src/simulator/tokens.js';
import { ReviewSchema } from '../../../src/core/review.js';

describe('TokenBucket', () => {
  it('lets a burst through, then refuses until refilled', () => {
    let now = 0;
    const bucket = new TokenBucket({ rps: 10 }, () => now);
    for (let i = 0; i < 10; i++) expect(bucket.admit().allowed).toBe(true);
    expect(bucket.admit()).toEqual({ allowed: false, status: 503, retryAfterSeconds: 1 });
    now += 100;
    expect(bucket.admit().allowed).toBe(true);
    expect(bucket.admit().allowed).toBe(false);
  });

  it('computes Retry-After from the refill time, or uses the configured value, or none', () => {
    const now = 0;
    const slow = new TokenBucket({ rps: 0.25, burst: 1, status: 429 }, () => now);
    slow.admit();
    expect(slow.admit()).toEqual({ allowed: false, status: 429, retryAfterSeconds: 4 });
    expect(new TokenBucket({ rps: 1, burst: 1, retryAfterSeconds: null }, () => now).admit()).toEqual({
      allowed: true,
    });
    const none = new TokenBucket({ rps: 1, burst: 1, retryAfterSeconds: null }, () => now);
    none.admit();
    expect(none.admit()).toMatchObject({ retryAfterSeconds: null });
  });

  it('never stores more than the burst', () => {
    let now = 0;
    const bucket = new TokenBucket({ rps: 5, burst: 2 }, () => now);
    now += 60_000;
    expect([bucket.admit(), bucket.admit(), bucket.admit()].map((a) => a.allowed)).toEqual([true, true, false]);
  });
});

describe('faults', () => {
  it('malforms the same ids for a seed and rate, in all three kinds, each failing the schema', () => {
    const kinds = new Set<string>();
    let count = 0;
    for (let id = 1; id <= 10_000; id++) {
      const kind = malformedKind(5, id, 0.1);
      expect(kind).toBe(malformedKind(5, id, 0.1));
      if (kind === null) continue;
      count++;
      kinds.add(kind);
      expect(ReviewSchema.safeParse(malform(generateBaseReview(5, id), kind)).success).toBe(false);
    }
    expect(count).toBeGreaterThan(900);
    expect(count).toBeLessThan(1100);
    expect([...kinds].sort()).toEqual([...MALFORMED_KINDS].sort());
  });

  it('leaves records untouched (same array) without record faults, and pads copies otherwise', () => {
    const records = [generateBaseReview(1, 1), generateBaseReview(1, 2)];
    expect(applyRecordFaults(records, NO_FAULTS, 1)).toBe(records);
    const padded = applyRecordFaults(records, { ...NO_FAULTS, padBytes: 10 }, 1);
    expect(padded.map((r) => r.padding)).toEqual(['xxxxxxxxxx', 'xxxxxxxxxx']);
    expect(records[0]).not.toHaveProperty('padding');
  });

  it('serves idless reviews without their id, in place and the same bytes each time; settable at runtime', () => {
    const records = [1, 2, 3].map((id) => generateBaseReview(1, id));
    const served = applyRecordFaults(records, { ...NO_FAULTS, idless: [2] }, 1);
    expect(served.map((r) => r.id)).toEqual([1, undefined, 3]);
    expect(served[1]).not.toHaveProperty('id');
    expect(JSON.stringify(applyRecordFaults(records, { ...NO_FAULTS, idless: [2] }, 1))).toBe(JSON.stringify(served));
    expect(records[1]).toHaveProperty('id', 2);
    const injector = new FaultInjector(1);
    injector.set({ idless: [3] });
    expect(injector.current().idless).toEqual([3]);
    expect(() => injector.set({ idless: [0] })).toThrow(/idless/);
  });

  it('draws errors and truncations from a seeded stream', () => {
    const draws = (seed: number) => {
      const injector = new FaultInjector(seed, { errorRate: 0.5, truncateRate: 0.5 });
      return Array.from({ length: 50 }, () => [injector.drawError(), injector.drawTruncation()]);
    };
    expect(draws(3)).toEqual(draws(3));
    expect(draws(3).flat()).toContain(null);
    expect(draws(3).flat()).toContain(true);
  });
});

describe('chooseEncoding', () => {
  it.each([
    [undefined, false, null],
    ['', true, 'gzip'],
    ['gzip, deflate, br', false, 'gzip'],
    ['br;q=1, gzip;q=0.8', false, 'br'],
    ['deflate', false, 'deflate'],
    ['identity', false, null],
    ['identity', true, 'gzip'],
    ['*;q=0.1, gzip;q=0', false, 'br'],
    ['GZIP', false, 'gzip'],
    ['zstd', false, null],
  ] as const)('%s (forced: %s) -> %s', (header, forced, expected) => {
    expect(chooseEncoding(header, forced)).toBe(expected);
  });
});

describe('TokenRegistry', () => {
  it('authenticates, issues opaque tokens, expires and revokes them', () => {
    let now = 1000;
    const registry = new TokenRegistry(
      [
        { id: 'a', secret: 'b', scope: 'reviews' },
        { id: 'c', secret: 'd', scope: 'none' },
      ],
      60,
      () => now,
    );
    expect(registry.authenticate('a', 'b')).toBe('reviews');
    expect(registry.authenticate('c', 'd')).toBe('none');
    expect(registry.authenticate('a', 'd')).toBeNull();
    const { token, expiresIn } = registry.issue('reviews');
    expect(expiresIn).toBe(60);
    expect(registry.check(token)).toBe('valid');
    expect(registry.check(registry.issue('none').token)).toBe('no-scope');
    now += 60_000;
    expect(registry.check(token)).toBe('expired');
    const fresh = registry.issue('reviews').token;
    registry.revokeAll();
    expect(registry.check(fresh)).toBe('unknown');
  });
});
