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
// store, publisher, upstream client, lease and loop) works as one, starts after what it is told to wait for, and
// stops cleanly (lease released, nothing left running).

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
  const bridge = new AccountBridge(config, { redis, logger, processMetrics: false, probesKafka: true, replica: 'r1' });
  cleanups.push(() => bridge.stop());
  return { sim, config, redis, bridge, keys: accountKeys(config.redis.keyPrefix, config.account) };
}

describe('AccountBridge', () => {
  it('leads its account, loads it into Kafka and Redis, and releases the lease on stop', async () => {
    const { config, redis, bridge, keys } = await account(120);
    expect(bridge.account).toBe(config.account);
    bridge.start();
    await bridge.running();
    expect(bridge.kafkaConnected).toBe(true);
    await waitFor(async () => ((await bridge.store.checkpoint()).initialDone ? true : undefined), 60_000, 'the load');
    expect(bridge.health()).toMatchObject({ ok: true, role: 'leader', lastError: null });
    expect(await bridge.store.size()).toBe(120);
    const created = await readAll([config.kafka.topics.created], { untilCount: 120, timeoutMs: 30_000 });
    expect(created).toHaveLength(120);
    // Its metrics carry the account label.
    expect(await bridge.metrics.registry.metrics()).toContain(`account="${config.account}"`);
    expect((await leaseHolder(redis, keys))?.holder).toBe('r1');
    await bridge.stop();
    expect(await leaseHolder(redis, keys)).toBeNull();
  });

  it('a stop while it waits for the account it starts after ends the wait at once, and nothing connects', async () => {
    const { bridge } = await account(10);
    let release!: () => void;
    const after = new Promise<void>((resolve) => (release = resolve));
    bridge.start(after);
    // The wait for `after` lasts up to 15 s; a stop must not sit it out.
    const started = Date.now();
    await bridge.stop();
    await bridge.running();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(bridge.kafkaConnected).toBe(false);
    release();
  });
});
