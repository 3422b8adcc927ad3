import { describe, expect, it } from 'vitest';
import { Lease } from '../../../src/redis/lease.js';
import { LeaseKeeper } from '../../../src/bridge/lease-keeper.js';
import type { AccountKeys, BridgeRedis } from '../../../src/redis/connection.js';
import { FakeLease, silentLogger } from '../../helpers/fakes.js';
import { turns, waitFor } from '../../helpers/wait.js';

describe('LeaseKeeper', () => {
  it('never starts a renewal while the previous one is pending, however slow Redis answers', async () => {
    const lease = new FakeLease();
    lease.delayTurns = 50;
    const keeper = new LeaseKeeper(lease, { periodMs: 5, logger: silentLogger });
    keeper.start();
    // The loop's own renewal joins the one under way instead of sending another.
    const joined = await Promise.all([keeper.renewNow(), keeper.renewNow(), keeper.renewNow()]);
    await waitFor(() => (lease.renewals >= 3 ? true : undefined), 5_000, 'three renewals', 5);
    await keeper.stop();
    expect(joined).toEqual([1, 1, 1]);
    expect(lease.maxInFlight).toBe(1);
    expect(lease.renewals).toBeGreaterThanOrEqual(3);
  });

  it('reports a lost lease once, when another replica takes it', async () => {
    const lease = new FakeLease();
    const lost: number[] = [];
    const keeper = new LeaseKeeper(lease, { periodMs: 5, logger: silentLogger, onLost: (e) => lost.push(e) });
    await keeper.renewNow();
    lease.epoch = 2;
    lease.leading = false;
    await keeper.renewNow();
    await keeper.renewNow();
    expect(lost).toEqual([1]);
  });

  it('release stops renewing and gives the lease up', async () => {
    const lease = new FakeLease();
    let sleeps = 0;
    const keeper = new LeaseKeeper(lease, {
      periodMs: 5,
      logger: silentLogger,
      // The keeper's period on a fake clock: each wait is one turn of the event loop.
      sleep: async (_ms, signal) => {
        sleeps += 1;
        await new Promise((r) => setImmediate(r));
        if (signal.aborted) throw signal.reason;
      },
    });
    keeper.start();
    await waitFor(() => (lease.renewals >= 2 ? true : undefined), 5_000, 'two renewals', 1);
    await keeper.release();
    const after = { renewals: lease.renewals, sleeps };
    await turns();
    expect({ renewals: lease.renewals, sleeps }).toEqual(after);
    expect(lease.released).toBe(1);
  });
});

describe('Lease', () => {
  it('stamps a renewal with the time the request was sent, so its view expires no later than the lease', async () => {
    let now = 1_000;
    // Redis answers 400 ms after the request was sent; the ttl started when it ran the script.
    const pipeline = {
      bridgeLeaseAcquire: () => pipeline,
      // The epoch counter is there (see the integration test of a counter evicted under a held lease).
      exists: () => pipeline,
      exec: async () => {
        now += 400;
        return [
          [null, 7],
          [null, 1],
        ];
      },
    };
    const redis = { durability: { replicas: 0, timeoutMs: 0 }, pipeline: () => pipeline } as unknown as BridgeRedis;
    const lease = new Lease(redis, { lease: 'l', epoch: 'e' } as AccountKeys, 1_000, () => now);
    expect(await lease.renew()).toBe(7);
    now = 1_999;
    expect(lease.current()).toBe(7);
    // 1 000 ms after sending: the lease may have expired at Redis, so this replica must not think it leads.
    now = 2_000;
    expect(lease.current()).toBe(0);
  });
});
