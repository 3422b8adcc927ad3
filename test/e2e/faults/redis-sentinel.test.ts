import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_ROUNDS, faultRounds, runFailover, type Fault } from '../../helpers/failover.js';
import { waitFor } from '../../helpers/processes.js';
import { RedisTopology } from '../../helpers/topologies.js';

// Redis with a replica and three Sentinels (scripts/redis-topology.sh sentinel); the bridge connects through the
// Sentinels (REDIS_SENTINELS) and needs one replica to acknowledge each commit and lease change (the default on a
// replicated Redis). From inside a commit (its page's events just published): a SENTINEL FAILOVER in the middle of
// the initial load and again while polling; with FAULT_TOPOLOGY_ROUNDS >= 2 also a SIGKILL of the primary while
// polling (the killed server is started again once the replica has been promoted, and rejoins as the new replica). Nothing may be lost or invented, and the confirmed
// checkpoint must never go back.

const topology = await RedisTopology.onFreePorts('sentinel');

beforeAll(async () => {
  await topology.start();
}, 60_000);
afterAll(async () => {
  await topology.stop();
}, 60_000);

describe('failover: Redis with Sentinel', () => {
  it('SENTINEL FAILOVER mid-commit (and a SIGKILL of the primary in the long variant): nothing lost, the checkpoint never goes back', async () => {
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
    const failover = (during: Fault['during']): Fault => ({
      name: 'SENTINEL FAILOVER',
      during,
      from: 'commit',
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
      },
    });
    const killPrimary = (): Fault => ({
      name: 'SIGKILL of the primary',
      during: 'polling',
      from: 'commit',
      inject: async () => {
        primary = await topology.primaryPort();
        await topology.kill(primary);
      },
      heal: async () => {
        const t0 = Date.now();
        const next = await promoted();
        const promotedAfterMs = Date.now() - t0;
        // Back on its append-only file; Sentinel turns it into the new primary's replica.
        await topology.startMember(primary);
        return { from: primary, to: next, promotedAfterMs };
      },
    });
    const result = await runFailover({
      title: 'Redis Sentinel: failover and primary SIGKILL mid-commit',
      seed: 73,
      env: topology.env,
      confirmReplicas: 1,
      // The SIGKILL round runs in the long variant (FAULT_TOPOLOGY_ROUNDS >= 2): in 1 of 3 full runs on a loaded
      // 2-core machine the bridge had not committed again 120 s after the kill (not diagnosed yet).
      faults: faultRounds(failover('initial'), (round) => (round % 2 === 0 ? failover('polling') : killPrimary())),
    });
    expect(result.faults).toHaveLength(1 + FAULT_ROUNDS);
  });
});
