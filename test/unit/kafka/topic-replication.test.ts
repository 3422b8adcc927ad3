import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { durabilityShortfall, topicDurability } from '../../../src/kafka/publisher.js';

describe('topicDurability', () => {
  it("unset, takes the brokers' defaults (KIP-464), never a count of the brokers registered at one instant", () => {
    expect(topicDurability(null)).toEqual({ replicationFactor: -1, minInsyncReplicas: null });
  });

  it('set, asks exactly that factor, with two in sync from three copies', () => {
    expect(topicDurability(1)).toEqual({ replicationFactor: 1, minInsyncReplicas: 1 });
    expect(topicDurability(2)).toEqual({ replicationFactor: 2, minInsyncReplicas: 1 });
    expect(topicDurability(3)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(topicDurability(5)).toEqual({ replicationFactor: 5, minInsyncReplicas: 2 });
  });

  it('never asks for more in-sync replicas than copies, nor fewer than one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 }), (rf) => {
        const r = topicDurability(rf);
        expect(r.replicationFactor).toBe(rf);
        expect(r.minInsyncReplicas).toBeGreaterThanOrEqual(1);
        expect(r.minInsyncReplicas).toBeLessThan(Math.max(2, rf));
      }),
    );
  });
});

describe('durabilityShortfall', () => {
  it('names each way a topic is weaker than asked', () => {
    const asked = { replicas: 3, minInsyncReplicas: 2 };
    expect(durabilityShortfall(asked, { replicas: 3, minInsyncReplicas: 2 })).toBeNull();
    expect(durabilityShortfall(asked, { replicas: 2, minInsyncReplicas: 2 })).toBe('2 replicas where 3 are asked');
    expect(durabilityShortfall(asked, { replicas: 3, minInsyncReplicas: 1 })).toBe(
      'min.insync.replicas=1 where 2 is asked',
    );
    expect(durabilityShortfall(asked, { replicas: 2, minInsyncReplicas: 1 })).toMatch(/2 replicas .*, min\.insync/);
  });

  it('a topic at least as strong as asked is never reported', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.nat(3),
        fc.nat(3),
        (r, m, dr, dm) => {
          expect(
            durabilityShortfall({ replicas: r, minInsyncReplicas: m }, { replicas: r + dr, minInsyncReplicas: m + dm }),
          ).toBeNull();
        },
      ),
    );
  });
});
