import { describe, expect, it } from 'vitest';
import { FAULT_ROUNDS, runFailover, type Fault } from '../../helpers/failover.js';
import { waitFor } from '../../helpers/processes.js';
import { RedisTopology } from '../../helpers/topologies.js';

// Redis with a replica and three Sentinels (scripts/redis-topology.sh sentinel); the bridge connects through the
// Sentinels (REDIS_SENTINELS) and needs one replica to acknowledge each commit and lease change (the default on a
// replicated Redis). From inside a commit (its page's events just published): a SENTINEL FAILOVER in the middle of
// the initial load, then while polling a SENTINEL FAILOVER and a SIGKILL of the primary (started again once the
// replica is promoted; it rejoins as the new replica), FAULT_TOPOLOGY_ROUNDS times. Each fault waits for a settled
// Sentinel deployment first. Nothing may be lost or invented, and the confirmed checkpoint must never go back.

const topology = await RedisTopology.forFile('sentinel');

describe('failover: Redis with Sentinel', () => {
  it('SENTINEL FAILOVER and a SIGKILL of the primary, mid-commit: nothing lost, the checkpoint never goes back', async () => {
    let primary = 0;
    const promoted = () =>
      waitFor(
        async () => {
          const now = await topology.primaryPort();
          return now !== primary ? now : undefined;
        },
        60_000,
        'Sentinel to promote the replica',
        100,
      );
    // Sentinel re-discovers its peers through a new primary and refuses a second failover within twice its
    // failover-timeout (5 s): a kill sooner after a failover may never be repaired, by design of Sentinel.
    let lastFailoverAt = 0;
    const settled = async (): Promise<void> => {
      await waitFor(
        async () => (Date.now() - lastFailoverAt >= 10_000 && (await topology.sentinelsSettled()) ? true : undefined),
        60_000,
        'Sentinel to settle after the last failover',
        200,
      );
    };
    const failover = (during: Fault['during']): Fault => ({
      name: 'SENTINEL FAILOVER',
      during,
      from: 'commit',
      ready: settled,
      inject: async () => {
        primary = await topology.primaryPort();
        const sentinel = topology.member(topology.base + 2);
        try {
          await sentinel.call('SENTINEL', 'FAILOVER', 'bridge');
        } finally {
          sentinel.disconnect();
        }
        // The commit goes out once the replica is promoted: to the old primary, which Sentinel demotes only
        // seconds later and whose writes are then discarded (so no replica can acknowledge them).
        await promoted();
        lastFailoverAt = Date.now();
      },
    });
    const killPrimary = (): Fault => ({
      name: 'SIGKILL of the primary',
      during: 'polling',
      from: 'commit',
      ready: settled,
      inject: async () => {
        primary = await topology.primaryPort();
        await topology.kill(primary);
      },
      heal: async () => {
        const t0 = Date.now();
        const next = await promoted();
        lastFailoverAt = Date.now();
        const promotedAfterMs = Date.now() - t0;
        // Back on its append-only file; Sentinel turns it into the new primary's replica.
        await topology.startMember(primary);
        return { from: primary, to: next, promotedAfterMs };
      },
    });
    const result = await runFailover({
      describe: () => topology.describe(),
      title: 'Redis Sentinel: failover and primary SIGKILL mid-commit',
      seed: 73,
      env: topology.env,
      confirmReplicas: 1,
      // Each round while polling: a SENTINEL FAILOVER, then a SIGKILL of the primary it left.
      faults: [
        failover('initial'),
        ...Array.from({ length: FAULT_ROUNDS }, () => [failover('polling'), killPrimary()]).flat(),
      ],
    });
    expect(result.faults).toHaveLength(1 + 2 * FAULT_ROUNDS);
  }, 360_000);
});
