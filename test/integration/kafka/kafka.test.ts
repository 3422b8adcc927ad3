import { Partitioners, type Producer } from 'kafkajs';
import { afterEach, describe, expect, it } from 'vitest';
import { createTopics, readAll, testKafka } from '../../helpers/kafka.js';
import { uniqueName } from '../../helpers/services.js';

// Proves the test broker (scripts/kafka.sh: Kafka 3.9 KRaft, or whatever KAFKA_BROKERS names) does what the bridge
// relies on with kafkajs 2.2.4: admin topic creation, the idempotent producer with acks=all, and consumer groups
// that deliver keys, headers and per-partition order intact.

const producers: Producer[] = [];
afterEach(async () => {
  await Promise.all(producers.splice(0).map((p) => p.disconnect()));
});

async function idempotentProducer(): Promise<Producer> {
  const producer = testKafka(uniqueName('producer')).producer({
    idempotent: true,
    // kafkajs guarantees order with the idempotent producer only with one request in flight.
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  });
  producers.push(producer);
  await producer.connect();
  return producer;
}

describe('Kafka broker', () => {
  it('creates topics through the admin API with the requested partitions', async () => {
    const topic = uniqueName('it-admin');
    const admin = testKafka(uniqueName('admin')).admin();
    await admin.connect();
    try {
      const created = await admin.createTopics({
        topics: [{ topic, numPartitions: 3, replicationFactor: 1 }],
        waitForLeaders: true,
      });
      expect(created).toBe(true);
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      expect(topics[0]?.partitions.map((p) => p.partitionId).sort()).toEqual([0, 1, 2]);
      expect(await admin.listTopics()).toContain(topic);
      // Creating it again is reported, not an error: helpers and the bridge may create topics idempotently.
      expect(await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] })).toBe(false);
    } finally {
      await admin.disconnect();
    }
  });

  it('round-trips keys, values and headers in per-partition order (idempotent producer, acks=all)', async () => {
    const created = uniqueName('it-created');
    const changed = uniqueName('it-changed');
    await createTopics([created, changed], 3);
    const producer = await idempotentProducer();

    const keys = ['101', '202', '303', '404', '505'];
    const sent = Array.from({ length: 40 }, (_, i) => ({
      topic: i % 4 === 0 ? changed : created,
      key: keys[i % keys.length] ?? '',
      seq: i,
    }));
    // Two batches, to exercise sequence numbers of the idempotent producer across requests.
    for (const chunk of [sent.slice(0, 20), sent.slice(20)]) {
      const metadata = await producer.sendBatch({
        acks: -1,
        topicMessages: [created, changed].map((topic) => ({
          topic,
          messages: chunk
            .filter((m) => m.topic === topic)
            .map((m) => ({
              key: m.key,
              value: JSON.stringify({ seq: m.seq, text: `grüße ${m.seq}` }),
              headers: { 'content-type': 'application/cloudevents+json', 'ce-seq': String(m.seq) },
            })),
        })),
      });
      expect(metadata.every((m) => m.errorCode === 0)).toBe(true);
    }

    const received = await readAll([created, changed], { timeoutMs: 30_000 });
    expect(received).toHaveLength(sent.length);
    for (const message of received) {
      const body = JSON.parse(message.value) as { seq: number; text: string };
      const original = sent[body.seq];
      expect(original).toBeDefined();
      expect(message.topic).toBe(original?.topic);
      expect(message.key).toBe(original?.key);
      expect(body.text).toBe(`grüße ${body.seq}`);
      expect(message.headers).toEqual({ 'content-type': 'application/cloudevents+json', 'ce-seq': String(body.seq) });
    }
    // One key always lands on one partition, and a partition is read in the order it was written.
    const byKeyAndTopic = new Map<string, { partition: number; seqs: number[] }>();
    for (const message of received) {
      const id = `${message.topic}/${message.key}`;
      const entry = byKeyAndTopic.get(id) ?? { partition: message.partition, seqs: [] };
      expect(message.partition).toBe(entry.partition);
      entry.seqs.push((JSON.parse(message.value) as { seq: number }).seq);
      byKeyAndTopic.set(id, entry);
    }
    for (const { seqs } of byKeyAndTopic.values()) expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    // No duplicates: offsets per partition are unique and dense.
    const offsets = new Set(received.map((m) => `${m.topic}/${m.partition}/${m.offset}`));
    expect(offsets.size).toBe(received.length);
  });

  it('readAll waits for records produced after it started (untilCount) and returns after a quiet period', async () => {
    const topic = uniqueName('it-late');
    await createTopics([topic], 2);
    const producer = await idempotentProducer();
    let fetching!: () => void;
    const joined = new Promise<void>((resolve) => (fetching = resolve));
    const reading = readAll([topic], { untilCount: 3, idleMs: 300, timeoutMs: 30_000, onFetching: fetching });
    // Produced once the reader fetches: the records really come after it started.
    await joined;
    await producer.send({
      topic,
      acks: -1,
      messages: ['a', 'b', 'c'].map((value) => ({ key: value, value })),
    });
    const received = await reading;
    expect(received.map((m) => m.value).sort()).toEqual(['a', 'b', 'c']);
    expect(await readAll([topic], { timeoutMs: 30_000 })).toHaveLength(3);
  });

  it('readAll rejects a topic that does not exist instead of reading it as empty', async () => {
    await expect(readAll([uniqueName('it-never-created')], { timeoutMs: 30_000 })).rejects.toThrow(/topic-partition/);
  });

  it('resumes a consumer group from its committed offsets', async () => {
    const topic = uniqueName('it-group');
    const groupId = uniqueName('it-group');
    await createTopics([topic], 1);
    const producer = await idempotentProducer();
    await producer.send({ topic, acks: -1, messages: [1, 2, 3].map((n) => ({ key: 'k', value: `m${n}` })) });

    const consumeOnce = async (expected: number): Promise<string[]> => {
      const consumer = testKafka(uniqueName('group-consumer')).consumer({
        groupId,
        sessionTimeout: 6_000,
        heartbeatInterval: 500,
        maxWaitTimeInMs: 100,
      });
      const values: string[] = [];
      await consumer.connect();
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`only got ${values.join(',')}`)), 30_000);
          void consumer.run({
            eachMessage: async ({ message }) => {
              values.push(message.value?.toString() ?? '');
              if (values.length === expected) {
                clearTimeout(timer);
                resolve();
              }
            },
          });
        });
      } finally {
        // disconnect commits the resolved offsets (autoCommit) before leaving the group.
        await consumer.disconnect();
      }
      return values;
    };

    expect(await consumeOnce(3)).toEqual(['m1', 'm2', 'm3']);
    await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: 'm4' }] });
    expect(await consumeOnce(1)).toEqual(['m4']);
  });
});
