import { randomBytes, randomUUID } from 'node:crypto';

// Where randomness enters the bridge's state: the generated fingerprint key and the restore tokens. A port, like
// the clock, so that the deterministic simulation (test/sim) draws them from its seed and a replay of a seed is
// byte-identical; production uses node:crypto.

/** A source of random values (node:crypto's in production, a seeded one in the simulation). */
export interface RandomSource {
  /** `n` random bytes. */
  bytes(n: number): Buffer;
  /** A random UUID (RFC 4122 version 4, as `crypto.randomUUID`). */
  uuid(): string;
}

/** The system's cryptographic random source. */
export const systemRandom: RandomSource = {
  bytes: (n) => randomBytes(n),
  uuid: () => randomUUID(),
};

/**
 * A source whose bytes come from `next` (a generator of uniform numbers in [0, 1), e.g. a seeded one); for
 * deterministic tests only: its values are not secret.
 */
export function randomFrom(next: () => number): RandomSource {
  const bytes = (n: number): Buffer => {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = Math.floor(next() * 256) & 0xff;
    return out;
  };
  return {
    bytes,
    uuid: () => {
      const b = bytes(16);
      b[6] = (b[6]! & 0x0f) | 0x40;
      b[8] = (b[8]! & 0x3f) | 0x80;
      const h = b.toString('hex');
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    },
  };
}
