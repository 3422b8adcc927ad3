import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { backoffDelay, parseRetryAfter, sleep } from '../../../src/upstream/retry.js';

describe('backoffDelay (full jitter)', () => {
  const policy = { baseMs: 100, capMs: 5000 };

  it('draws from [0, base * 2^attempt) and never exceeds the cap', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (attempt, r) => {
        const delay = backoffDelay(attempt, policy, () => r);
        const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** attempt);
        return delay >= 0 && delay < ceiling && delay <= policy.capMs;
      }),
    );
  });

  it('grows the ceiling exponentially until the cap', () => {
    const top = (attempt: number) => backoffDelay(attempt, policy, () => 0.999999);
    expect([0, 1, 2, 3, 4, 5, 6, 10].map(top)).toEqual([99, 199, 399, 799, 1599, 3199, 4999, 4999]);
  });

  it('can be zero (full jitter spreads retries down to immediate)', () => {
    expect(backoffDelay(3, policy, () => 0)).toBe(0);
  });
});

describe('parseRetryAfter', () => {
  it('reads delta seconds', () => {
    expect(parseRetryAfter('3')).toBe(3);
    expect(parseRetryAfter(' 0 ')).toBe(0);
    expect(parseRetryAfter(['7', '9'])).toBe(7);
  });

  it('reads an HTTP date relative to now', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });

  it('returns null for absent or unreadable values', () => {
    expect(parseRetryAfter(undefined)).toBeNull();
    expect(parseRetryAfter('')).toBeNull();
    expect(parseRetryAfter('soon')).toBeNull();
    expect(parseRetryAfter('-1')).toBeNull();
  });

  it('caps absurd values', () => {
    expect(parseRetryAfter('86400', Date.now(), 120)).toBe(120);
  });
});

describe('sleep', () => {
  it('rejects with the abort reason', async () => {
    const controller = new AbortController();
    const pending = sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(pending).rejects.toThrow('stop');
  });

  it('resolves after the delay', async () => {
    await expect(sleep(1)).resolves.toBeUndefined();
  });
});
