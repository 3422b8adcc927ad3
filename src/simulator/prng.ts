// Cheap deterministic randomness. A record is a pure function of (seed, id), so a million reviews need no memory:
// each record re-derives its own generator from a hash of its coordinates.

/** A source of uniform floats in [0, 1). */
export type Random = () => number;

/** Mixes up to three 32-bit integers into one well-spread 32-bit value (murmur3 finaliser over a simple combine). */
export function hash32(a: number, b: number, c = 0): number {
  let h =
    Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^
    Math.imul(b + 0x632be5ab, 0xc2b2ae35) ^
    Math.imul(c ^ 0x27d4eb2f, 0x165667b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A hash of (a, b, c) as a float in [0, 1), for one-off decisions that must not consume a generator. */
export function hashUnit(a: number, b: number, c = 0): number {
  return hash32(a, b, c) / 4294967296;
}

/** Mulberry32: a tiny, fast generator; good enough for test data, not for cryptography. */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [min, max], both inclusive. */
export function intBetween(random: Random, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/** One element of a non-empty list. */
export function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}
