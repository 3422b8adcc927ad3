import { Writable } from 'node:stream';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BridgeConfig } from '../../../src/config/config.js';
import { KafkaPublisher } from '../../../src/kafka/publisher.js';
import { FAULT_ROUNDS, faultRounds, runFailover, type Fault } from '../../helpers/failover.js';
import { uniqueTopics } from '../../helpers/publisher.js';
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
  // Member 3 joins in the first test, as a broker that registers late.
  await cluster.start([1, 2]);
}, 180_000);
afterAll(async () => {
  await cluster.clean();
}, 120_000);

/** A publisher of the bridge on the cluster whose log lines the test reads (as parsed JSON objects). */
function publisherOn(replicationFactor: number | null, topics = uniqueTopics('late')) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const config: BridgeConfig['kafka'] = {
    brokers: cluster.brokers,
    clientId: uniqueName('late-broker'),
    ssl: false,
    sasl: null,
    topics,
    createTopics: true,
    partitions: 2,
    replicationFactor,
    exactlyOnce: false,
    transactionalId: uniqueName('late-tx'),
    transactionTimeoutMs: 60_000,
  };
  return { publisher: new KafkaPublisher(config, 'it', pino({ level: 'info' }, sink)), lines, topics };
}

describe('topic durability: a broker that registers late', () => {
  it("unset factor: the start waits for the brokers' default replication, then creates every topic with it", async () => {
    // Member 3 has never registered (a slow start, a broker being replaced): the brokers' default factor of 3
    // cannot be met yet. Before, the bridge created its topics with the two brokers it saw, for good.
    expect(await cluster.registeredBrokers()).toBe(2);
    const { publisher, lines, topics } = publisherOn(null);
    const connected = publisher.connect();
    try {
      const waiting = await waitFor(
        () => lines.find((l) => String(l.msg).startsWith('waiting for Kafka brokers')),
        60_000,
        'the bridge saying it waits for brokers',
      );
      expect(waiting.msg).toMatch(/default\.replication\.factor \(KAFKA_REPLICATION_FACTOR is unset\)/);
      expect(waiting.registered).toBe(2);
      await cluster.startMember(3);
      await connected;
    } finally {
      await connected.catch(() => undefined);
      await publisher.disconnect();
    }
    expect(lines.some((l) => l.msg === 'brokers registered; topics created')).toBe(true);
    for (const topic of Object.values(topics)) {
      expect(await cluster.topicSettings(topic)).toEqual({ replicas: 3, minInsyncReplicas: '2' });
    }
  }, 240_000);

  it('KAFKA_REPLICATION_FACTOR=3 while a broker restarts: exactly three copies, never fewer', async () => {
    await cluster.stopMember(3);
    try {
      await waitFor(async () => ((await cluster.registeredBrokers()) === 2 ? true : undefined), 60_000, '2 brokers');
      const { publisher, topics } = publisherOn(3);
      try {
        await publisher.connect();
      } finally {
        await publisher.disconnect();
      }
      // The restarting broker stays registered (fenced) and holds its replica once back.
      for (const topic of [topics.created, topics.changelog]) {
        expect(await cluster.topicSettings(topic)).toMatchObject({ minInsyncReplicas: '2' });
      }
      await cluster.startMember(3);
      for (const topic of [topics.created, topics.changelog]) {
        const settings = await waitFor(
          async () => {
            const s = await cluster.topicSettings(topic);
            return s.replicas === 3 ? s : undefined;
          },
          60_000,
          'three live replicas',
          200,
        );
        expect(settings).toEqual({ replicas: 3, minInsyncReplicas: '2' });
      }
    } finally {
      await cluster.startMember(3);
    }
  }, 240_000);

  it('an existing topic weaker than asked is reported at connect, by topic', async () => {
    const topics = uniqueTopics('weak');
    const admin = new Kafka({ clientId: 'weak-topic', brokers: cluster.brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic: topics.created, numPartitions: 2, replicationFactor: 2 }] });
    } finally {
      await admin.disconnect();
    }
    const { publisher, lines } = publisherOn(null, topics);
    try {
      await publisher.connect();
      expect([...publisher.durabilityShortfalls()]).toEqual([[topics.created, '2 replicas where 3 are asked']]);
      const warned = lines.filter((l) => String(l.msg).startsWith('a topic is less durable'));
      expect(warned.map((l) => l.topic)).toEqual([topics.created]);
    } finally {
      await publisher.disconnect();
    }
  }, 120_000);
});

describe('failover: three-broker Kafka', () => {
  it('the partition leader killed mid initial load and mid poll: nothing lost, nothing invented', async () => {
    await cluster.startMember(3); // a no-op after the tests above; they may have been filtered out
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
