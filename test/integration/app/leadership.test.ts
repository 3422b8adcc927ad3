import { afterEach, describe, expect, it } from 'vitest';
import { AccountBridge, connectGate } from '../../../src/app/account.js';
import { StartSlots } from '../../../src/app/leadership.js';
import { loadConfig } from '../../../src/config/config.js';
import { createLogger } from '../../../src/ops/logger.js';
import { accountKeys, connectRedis, redisOptions } from '../../../src/redis/connection.js';
import { leaseHolder } from '../../../src/redis/lease.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { testEnv } from '../../helpers/bridge.js';
import { waitFor } from '../../helpers/processes.js';

// A replica that wins many leases at once starts their leaderships a few at a time (LEADERSHIP_START_CONCURRENCY),
// against a real Kafka, Redis and the simulator: never more than the bound connecting at once, the leases of those
// waiting kept all along (no new epoch), and every account led and loaded in the end.

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** StartSlots that record the most leaderships starting at once. */
class CountingSlots extends StartSlots {
  running = 0;
  peak = 0;
  starts = 0;

  override run<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return super.run(async () => {
      this.running += 1;
      this.starts += 1;
      this.peak = Math.max(this.peak, this.running);
      try {
        return await work();
      } finally {
        this.running -= 1;
      }
    }, signal);
  }
}

describe('leaderships start a few at a time', () => {
  it('with 12 accounts and a bound of 2: at most 2 start at once, no lease is lost while waiting, all end up led', async () => {
    const sim = await startSimulator({ reviewCount: 5, rateLimit: null });
    cleanups.push(() => sim.close());
    // One replica's accounts on shared topics (keys prefixed by the account, as loadAccounts does), a short lease
    // so that the waves outlast it: a lease not renewed while its leadership waits would be lost and taken anew.
    const base = testEnv(sim.url, { LEASE_TTL_MS: '2000', LEADERSHIP_START_CONCURRENCY: '2' });
    const configs = Array.from({ length: 12 }, (_, i) => {
      const config = loadConfig({ ...base, BRIDGE_ACCOUNT: `${base.BRIDGE_ACCOUNT}-${i}` });
      return { ...config, kafka: { ...config.kafka, keyPrefix: `${config.account}:` } };
    });
    expect(configs[0]!.leadership.startConcurrency).toBe(2);
    const redis = connectRedis(configs[0]!.redis, redisOptions(configs[0]!.redis), configs[0]!.redis.password);
    cleanups.push(() => redis.quit());
    const slots = new CountingSlots(configs[0]!.leadership.startConcurrency);
    const context = {
      redis,
      logger: createLogger('silent'),
      processMetrics: false,
      replica: 'r1',
      connectGate: connectGate(),
      startSlots: slots,
    };
    const bridges = configs.map((config) => new AccountBridge(config, context));
    cleanups.push(() => Promise.all(bridges.map((b) => b.stop())));
    for (const bridge of bridges) bridge.start();

    // Every lease is won at once (nobody else competes); the leaderships start in waves of at most 2. The epochs
    // each lease carried while they did: one per account, since a lease lost while waiting is won anew at another.
    const epochs = new Map<string, Set<number>>(bridges.map((b) => [b.account, new Set()]));
    await waitFor(
      async () => {
        for (const b of bridges) {
          const lease = await leaseHolder(redis, accountKeys(b.config.redis.keyPrefix, b.account));
          if (lease) epochs.get(b.account)!.add(lease.epoch);
        }
        const done = await Promise.all(bridges.map(async (b) => (await b.store.checkpoint()).initialDone));
        return done.every(Boolean) ? true : undefined;
      },
      120_000,
      'every account loaded',
    );
    expect(slots.peak).toBe(2);
    expect(slots.starts).toBe(12);
    expect(slots.load()).toEqual({ active: 0, waiting: 0 });
    for (const bridge of bridges) {
      expect(bridge.health()).toMatchObject({ role: 'leader', lastError: null });
      expect(bridge.publisher).not.toBeNull();
      expect((await leaseHolder(redis, accountKeys(bridge.config.redis.keyPrefix, bridge.account)))?.holder).toBe('r1');
      expect(epochs.get(bridge.account)!.size).toBe(1);
    }
  });
});
