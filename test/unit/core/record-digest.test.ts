import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { jsonChunks, recordDigest } from '../../../src/core/record-digest.js';

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

describe('recordDigest', () => {
  it('property: the text is exactly JSON.stringify, so digests already remembered in Redis stay valid', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        expect([...jsonChunks(value)].join('')).toBe(JSON.stringify(value));
        expect(recordDigest(value)).toBe(sha1(JSON.stringify(value)));
      }),
      { numRuns: 1000 },
    );
  });

  it('matches JSON.stringify on the corner cases of parsed and built values', () => {
    const parsed = JSON.parse('{"__proto__":{"a":1},"constructor":null,"2":"x","b":[1,"\\u2028",{}],"é":"\\ud800"}');
    expect([...jsonChunks(parsed)].join('')).toBe(JSON.stringify(parsed));
    const built = { a: undefined, b: [undefined, () => 1, NaN, -0, 1e21], c: 'x'.repeat(200_000) };
    expect([...jsonChunks(built)].join('')).toBe(JSON.stringify(built));
    expect(recordDigest(undefined)).toBe(sha1('undefined'));
  });

  it('digests a record nested a million levels deep, where JSON.stringify throws', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1_000_000; i++) deep = i % 2 ? { a: deep } : [deep];
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    const digest = recordDigest(deep);
    expect(digest).toMatch(/^[0-9a-f]{40}$/);
    expect(recordDigest(deep)).toBe(digest);
    // Three walks of a million levels take about 2 s on an idle core; a CI machine running other work needs more.
  }, 30_000);
});
