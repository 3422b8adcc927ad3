import { describe, expect, it } from 'vitest';
import { randomFrom, systemRandom } from '../../../src/core/random.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// A counter-based generator: the same sequence every time.
function counter(): () => number {
  let i = 0;
  return () => (((i++ * 0.618033988749895) % 1) + 1) % 1;
}

describe('the random source port', () => {
  it('system: bytes of the asked length and version-4 UUIDs', () => {
    expect(systemRandom.bytes(32)).toHaveLength(32);
    expect(systemRandom.uuid()).toMatch(UUID_V4);
  });

  it('seeded: the same generator gives the same bytes and UUIDs, well-formed', () => {
    const [a, b] = [randomFrom(counter()), randomFrom(counter())];
    const drawn = [a.bytes(32).toString('hex'), a.uuid(), a.uuid()];
    expect([b.bytes(32).toString('hex'), b.uuid(), b.uuid()]).toEqual(drawn);
    expect(drawn[1]).toMatch(UUID_V4);
    expect(drawn[2]).not.toBe(drawn[1]);
  });
});
