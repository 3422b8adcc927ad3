import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { accountKeys } from '../../../src/redis/connection.js';

// Redis Cluster hashes only the first {...} of a key: every key of an account must have the account there, so the
// lease, checkpoint, snapshot buckets, count and dead-letter memory share one slot (scripts and pipelines need it).
const hashTag = (key: string): string | null => {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : null;
};

describe('accountKeys', () => {
  it('puts every key of an account in the account hash tag (one Redis Cluster slot)', () => {
    const account = fc.stringMatching(/^[A-Za-z0-9_.-]{1,64}$/);
    const prefix = fc.stringMatching(/^[A-Za-z0-9_.:-]{1,32}$/);
    fc.assert(
      fc.property(account, prefix, fc.nat(), fc.stringMatching(/^[0-9a-f]{1,40}$/), (a, p, bucket, digest) => {
        const k = accountKeys(p, a);
        // Every key the layout has, so that a key added later cannot miss the tag unnoticed.
        const keys = Object.values(k).map((v) => (typeof v === 'function' ? v(digest as never) : v));
        keys.push(k.deadLettered(digest), k.bucket(bucket));
        expect(keys.length).toBeGreaterThan(10);
        for (const key of keys) expect(hashTag(String(key))).toBe(a);
      }),
    );
  });
});
