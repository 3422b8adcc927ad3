import { describe, expect, it } from 'vitest';
import { accountKeys } from '../../../src/redis/connection.js';
import { FAULT_ROUNDS, faultRounds, runFailover, type Fault } from '../../helpers/failover.js';
import { waitFor } from '../../helpers/processes.js';
import { uniqueName } from '../../helpers/services.js';
import { RedisTopology } from '../../helpers/topologies.js';

// A Redis Cluster of three primaries with one replica each (scripts/redis-topology.sh cluster); the bridge connects
// with REDIS_CLUSTER_NODES, and every key of its account shares one {account} hash tag, so the lease, checkpoint,
// snapshot buckets and dead-letter memory all live on one primary. That primary is SIGKILLed from inside a commit,
// in the middle of the initial load and again while polling; the cluster promotes its replica (node timeout 2 s),
// and the killed node is started again and rejoins as the new replica.

const topology = await RedisTopology.forFile('cluster');

describe('failover: Redis Cluster', () => {
  it("the account's primary killed mid-commit, its replica promoted: nothing lost, the checkpoint never goes back", async () => {
    const account = uniqueName('e2e');
    const slotKey = accountKeys('rbtest', account).checkpoint;
    const killPrimary = (during: Fault['during']): Fault => {
      let primary = 0;
      return {
        name: "SIGKILL of the account's primary",
        during,
        from: 'commit',
        inject: async () => {
          primary = await topology.primaryPort(slotKey);
          await topology.kill(primary);
        },
        heal: async () => {
          const t0 = Date.now();
          const next = await waitFor(
            async () => {
              const now = await topology.primaryPort(slotKey);
              return now !== primary ? now : undefined;
            },
            60_000,
            'the cluster to promote the replica',
            100,
          );
          const promotedAfterMs = Date.now() - t0;
          await topology.startMember(primary);
          return { from: primary, to: next, promotedAfterMs };
        },
      };
    };
    const result = await runFailover({
      describe: () => topology.describe(),
      title: "Redis Cluster: the account's primary killed mid-commit",
      seed: 79,
      env: { ...topology.env, BRIDGE_ACCOUNT: account, REDIS_KEY_PREFIX: 'rbtest' },
      confirmReplicas: 1,
      faults: faultRounds(killPrimary('initial'), () => killPrimary('polling')),
    });
    expect(result.faults).toHaveLength(1 + FAULT_ROUNDS);
  });
});
