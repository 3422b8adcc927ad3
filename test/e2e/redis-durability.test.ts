import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { testEnv } from '../helpers/bridge.js';
import { runCliFull } from '../helpers/processes.js';
import { redisUrl } from '../helpers/services.js';
import { RedisTopology } from '../helpers/topologies.js';

// A bridge asked to wait for more Redis replicas than the primary has would wait for ever: it stops at start-up
// within seconds, with one line naming REDIS_WAIT_REPLICAS and the choices (a single Redis without replicas, and a
// Redis Cluster whose primaries have one replica each asked for two). REDIS_WAIT_FOR_REPLICAS=true starts anyway.

const cluster = await RedisTopology.forFile('cluster');
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('Redis durability the topology cannot meet', () => {
  it('stops at start-up with one line naming the setting, on a single Redis and on a Cluster', async () => {
    const sim = await startSimulator({ reviewCount: 10, rateLimit: null });
    cleanups.push(() => sim.close());
    for (const [redisEnv, wanted, has] of [
      [{ REDIS_URL: redisUrl(), REDIS_WAIT_REPLICAS: '1' }, 1, 0],
      [{ ...cluster.env, REDIS_WAIT_REPLICAS: '2' }, 2, 1],
    ] as const) {
      const started = Date.now();
      const result = await runCliFull('run', testEnv(sim.url, redisEnv), 30_000);
      expect(result.code).toBe(2);
      expect(Date.now() - started).toBeLessThan(20_000);
      const lines = result.stderr.trim().split('\n');
      expect(lines.at(-1)).toMatch(
        new RegExp(`REDIS_WAIT_REPLICAS=${wanted} cannot be met: the primary \\S+ has ${has} replica`),
      );
      expect(lines.at(-1)).toContain('REDIS_WAIT_FOR_REPLICAS=true');
    }
  });

  it('starts (and waits for a replica) when told to', async () => {
    const sim = await startSimulator({ reviewCount: 10, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, { REDIS_URL: redisUrl(), REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_FOR_REPLICAS: 'true' });
    // Still running after 5 s: runCliFull times out (its own kill) instead of returning an exit code of 2.
    const result = await runCliFull('run', env, 5_000).catch((err: unknown) => ({
      code: -1,
      stdout: '',
      stderr: String(err),
    }));
    expect(result.code).not.toBe(2);
  });
});
