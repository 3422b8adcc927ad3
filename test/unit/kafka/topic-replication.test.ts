import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { topicReplication } from '../../../src/kafka/publisher.js';

describe('topicReplication', () => {
  it('defaults to three copies with two in sync on a cluster of three or more, fewer on smaller clusters', () => {
    expect(topicReplication(null, 1)).toEqual({ replicationFactor: 1, minInsyncReplicas: 1 });
    expect(topicReplication(null, 2)).toEqual({ replicationFactor: 2, minInsyncReplicas: 1 });
    expect(topicReplication(null, 3)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(topicReplication(null, 9)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(topicReplication(1, 3)).toEqual({ replicationFactor: 1, minInsyncReplicas: 1 });
  });

  it('refuses a factor larger than the cluster, naming the setting', () => {
    expect(() => topicReplication(3, 1)).toThrow(/KAFKA_REPLICATION_FACTOR=3 .* 1 broker/);
  });

  it('never asks for more in-sync replicas than copies, nor fewer than one', () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 1, max: 10 }), { nil: null }),
        fc.integer({ min: 1, max: 20 }),
        (rf, n) => {
          if (rf !== null && rf > n) return;
          const r = topicReplication(rf, n);
          expect(r.replicationFactor).toBeLessThanOrEqual(n);
          expect(r.minInsyncReplicas).toBeGreaterThanOrEqual(1);
          expect(r.minInsyncReplicas).toBeLessThan(Math.max(2, r.replicationFactor));
        },
      ),
    );
  });
});
