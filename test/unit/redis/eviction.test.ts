import { describe, expect, it } from 'vitest';
import { evictionRisk, parseMemoryPolicy } from '../../../src/redis/eviction.js';

// What the Redis memory policy risks, as the start-up warning says it.

const INFO =
  '# Memory\r\nused_memory:1048576\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:allkeys-lru\r\n';

describe('the Redis eviction policy at start', () => {
  it('reads the policy and the limit from INFO memory', () => {
    expect(parseMemoryPolicy(INFO)).toEqual({ policy: 'allkeys-lru', maxmemory: 104_857_600 });
    expect(parseMemoryPolicy('# Memory\r\nused_memory:1\r\n')).toBeNull();
  });

  it('says nothing of noeviction without a limit; names the setting and the risk of every other case', () => {
    const at = (policy: string, maxmemory: number) => evictionRisk({ primary: '10.0.0.1:6379', policy, maxmemory });
    expect(at('noeviction', 0)).toBeNull();
    expect(at('noeviction', 1_000)).toMatch(/refuses writes once it holds maxmemory 1000 bytes.*commits nothing/);
    expect(at('allkeys-lru', 1_000)).toMatch(/^IMPORTANT: .*maxmemory-policy allkeys-lru.*full restore.*noeviction/);
    // A limit set later makes the policy bite: warned already.
    expect(at('allkeys-lfu', 0)).toMatch(/maxmemory 0 \(no limit\) for now/);
    expect(at('volatile-ttl', 1_000)).toMatch(/keys with an expiry \(the lease/);
  });
});
