import { afterEach, describe, expect, it } from 'vitest';
import { AccountBridge } from '../../../src/app/account.js';
import { loadConfig } from '../../../src/config/config.js';
import { createLogger } from '../../../src/ops/logger.js';
import { accountKeys, connectRedis, redisOptions } from '../../../src/redis/connection.js';
import { leaseHolder } from '../../../src/redis/lease.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { testEnv } from '../../helpers/bridge.js';
import { readAll } from '../../helpers/kafka.js';
import { waitFor } from '../../helpers/processes.js';

// One account's bridge on its own, against a real Kafka, Redis and the simulator: what AccountBridge wires (its
// store, publisher, upstream client, lease and loop) works as one, holds a producer and an upstream client only
// while it leads, and stops cleanly (lease released, nothing left running).

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function account(reviewCount: number) {
  const sim = await startSimulator({ reviewCount, rateLimit: null });
  cleanups.push(() => sim.close());
  const config = loadConfig(testEnv(sim.url));
  const redis = connectRedis(config.redis, redisOptions(config.redis), config.redis.password);
  cleanups.push(() => redis.quit());
  const logger = createLogger('silent');
  const replica = (name: string) => {
    const bridge = new AccountBridge(config, { redis, logger, processMetrics: false, replica: name });
    cleanups.push(() => bridge.stop());
    return bridge;
  };
  const bridge = replica('r1');
  return { sim, config, redis, bridge, replica, keys: accountKeys(config.redis.keyPrefix, config.account) };
}

describe('AccountBridge', () => {
  it('leads its account, loads it into Kafka and Redis, and releases the lease on stop', async () => {
    const { config, redis, bridge, keys } = await account(120);
    expect(bridge.account).toBe(config.account);
    expect(bridge.publisher).toBeNull();
    bridge.start();
    await waitFor(async () => ((await bridge.store.checkpoint()).initialDone ? true : undefined), 60_000, 'the load');
    expect(bridge.health()).toMatchObject({ ok: true, role: 'leader', lastError: null });
    expect(bridge.publisher).not.toBeNull();
    expect(bridge.source).not.toBeNull();
    expect(await bridge.store.size()).toBe(120);
    const created = await readAll([config.kafka.topics.created], { untilCount: 120, timeoutMs: 30_000 });
    expect(created).toHaveLength(120);
    // Its metrics carry the account label.
    expect(await bridge.metrics.registry.metrics()).toContain(`account="${config.account}"`);
    expect((await leaseHolder(redis, keys))?.holder).toBe('r1');
    await bridge.stop();
    expect(await leaseHolder(redis, keys)).toBeNull();
  });

  it('a replica that stands by holds no producer nor upstream client, and builds them when it takes over', async () => {
    const { bridge, replica, keys, redis } = await account(10);
    bridge.start();
    await waitFor(async () => ((await bridge.store.checkpoint()).initialDone ? true : undefined), 60_000, 'the load');
    const standby = replica('r2');
    standby.start();
    await waitFor(() => (standby.health().role === 'standby' ? true : undefined), 30_000, 'r2 standing by');
    expect(standby.publisher).toBeNull();
    expect(standby.source).toBeNull();
    // The leader stops and releases its lease: the standby takes the account over and builds its adapters then.
    await bridge.stop();
    await waitFor(() => (standby.health().role === 'leader' ? true : undefined), 60_000, 'r2 leading');
    await waitFor(() => (standby.publisher !== null ? true : undefined), 30_000, "r2's producer");
    expect(standby.source).not.toBeNull();
    expect((await leaseHolder(redis, keys))?.holder).toBe('r2');
    await standby.stop();
    expect(standby.publisher).toBeNull();
  });
});
