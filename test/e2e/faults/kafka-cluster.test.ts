import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_ROUNDS, faultRounds, runFailover, type Fault } from '../../helpers/failover.js';
import { uniqueName } from '../../helpers/services.js';
import { KafkaCluster } from '../../helpers/topologies.js';
import { waitFor } from '../../helpers/processes.js';

// A three-broker KRaft cluster (scripts/kafka-cluster.sh); the bridge creates its topics with three replicas and
// min.insync.replicas 2 (its default on a cluster of three). The broker leading the partition being written is
// SIGKILLed inside a commit (its page's events just acknowledged) in the middle of the initial load, and again while
// polling; each time the member is started again once the others have taken over its partitions. The producer's
// acks=all batch must fail over to the new leaders: nothing lost, and (exactly-once, read_committed) nothing twice.

const cluster = await KafkaCluster.onFreePorts();

beforeAll(async () => {
  await cluster.start();
}, 180_000);
afterAll(async () => {
  await cluster.clean();
}, 120_000);

describe('failover: three-broker Kafka', () => {
  it('the partition leader killed mid initial load and mid poll: nothing lost, nothing invented', async () => {
    const id = uniqueName('kafka3');
    const topic = `${id}.created`;
    const statusTopic = `${id}.status_changed`;
    const killLeader = (during: Fault['during'], of: string): Fault => {
      let member = 0;
      return {
        name: `SIGKILL of the leader of ${of.endsWith('created') ? 'created' : 'status_changed'}/0`,
        during,
        from: 'commit',
        inject: async () => {
          member = await cluster.leaderOf(of, 0);
          await cluster.kill(member);
        },
        heal: async () => {
          // The others elect new leaders (after the dead broker's session times out); then it comes back.
          const t0 = Date.now();
          const next = await waitFor(
            async () => {
              const leader = await cluster.leaderOf(of, 0);
              return leader !== member ? leader : undefined;
            },
            60_000,
            'a new partition leader',
            200,
          );
          const electedMs = Date.now() - t0;
          await cluster.startMember(member);
          return { killed: member, newLeader: next, newLeaderAfterMs: electedMs };
        },
      };
    };
    const faults = faultRounds(killLeader('initial', topic), () => killLeader('polling', statusTopic));
    const result = await runFailover({
      title: 'three-broker Kafka: partition leader killed mid initial load and mid poll',
      seed: 71,
      env: {
        KAFKA_BROKERS: cluster.brokers.join(','),
        KAFKA_TOPIC_CREATED: topic,
        KAFKA_TOPIC_STATUS_CHANGED: statusTopic,
        KAFKA_TOPIC_UPDATED: `${id}.updated`,
        KAFKA_TOPIC_DEAD_LETTER: `${id}.dead_letter`,
      },
      brokers: cluster.brokers,
      faults,
    });
    expect(result.faults).toHaveLength(1 + FAULT_ROUNDS);
    // Exactly once for the oracle's read_committed reader: a leader's death costs no event twice either.
    expect(result.republished).toBe(0);
    // A broker's metadata lists only live replicas: the member started last may still be rejoining, so wait for it.
    const settings = await waitFor(
      async () => {
        const s = await cluster.topicSettings(topic);
        return s.replicas === 3 ? s : undefined;
      },
      60_000,
      'three live replicas of the topic',
      500,
    ).catch(() => cluster.topicSettings(topic));
    expect(settings).toEqual({ replicas: 3, minInsyncReplicas: '2' });
  });
});
