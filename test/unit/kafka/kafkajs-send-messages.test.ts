import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

// patches/kafkajs+2.2.4.patch, sendMessages: a send that meets a dead partition leader retries every partition not
// yet acknowledged, at its current leader. kafkajs 2.2.4 kept acknowledgements per broker: a partition whose
// leadership moved to a broker that had already answered was never sent, and send() resolved without its records
// (kafkajs issue #1303; in a transaction, a commit without them). kafkajs' own sendMessages runs here over a
// cluster whose metadata moves a partition between attempts, as the three-broker failover test kills its leader.
// Each message's partition is chosen once per send: a retry does not ask the (round-robin) partitioner again.

const require = createRequire(import.meta.url);

interface Message {
  key: string | null;
  value: string;
  partition?: number;
}
interface PartitionData {
  partition: number;
  firstSequence: number;
  messages: Message[];
}
interface TopicData {
  topic: string;
  partitions: PartitionData[];
}
interface Answer {
  topicName: string;
  partition: number;
  errorCode: number;
  baseOffset: string;
}
type Send = (args: {
  acks: number;
  timeout: number;
  topicMessages: { topic: string; messages: Message[] }[];
}) => Promise<Answer[]>;
type Retrier = (fn: unknown) => Promise<unknown>;
type Partitioner = (args: {
  topic: string;
  partitionMetadata: { partitionId: number; leader: number }[];
  message: Message;
}) => number;

const createSendMessages = require('kafkajs/src/producer/sendMessages') as (deps: Record<string, unknown>) => Send;
const createRetry = require('kafkajs/src/retry') as (options: Record<string, number>) => Retrier;
// The partitioner the bridge's producers use (Partitioners.DefaultPartitioner): round-robin for keyless messages.
const createDefaultPartitioner = require('kafkajs/src/producer/partitioners/default') as () => Partitioner;
const { KafkaJSConnectionError } = require('kafkajs/src/errors') as {
  KafkaJSConnectionError: new (message: string) => Error;
};

const TOPIC = 'reviews.created';

/** A broker that records what it was asked to write, answers after `delayMs`, or fails while `dead`. */
class FakeBroker {
  readonly requests: { partition: number; firstSequence: number; keys: (string | null)[] }[][] = [];
  /** The value of every message it wrote, in order. */
  readonly written: string[] = [];
  dead = false;
  /** Fails only this many more requests, when set (a broker that comes back). */
  failures: number | null = null;
  delayMs = 0;

  constructor(readonly nodeId: number) {}

  async produce({ topicData }: { topicData: TopicData[] }) {
    if (this.dead || (this.failures !== null && this.failures-- > 0))
      throw new KafkaJSConnectionError(`connect ECONNREFUSED (broker ${this.nodeId})`);
    const partitions = topicData.flatMap((t) => t.partitions);
    this.written.push(...partitions.flatMap((p) => p.messages.map((m) => m.value)));
    this.requests.push(
      partitions.map((p) => ({
        partition: p.partition,
        firstSequence: p.firstSequence,
        keys: p.messages.map((m) => m.key),
      })),
    );
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    return {
      topics: topicData.map((t) => ({
        topicName: t.topic,
        partitions: t.partitions.map((p) => ({
          partition: p.partition,
          errorCode: 0,
          baseOffset: String(p.firstSequence),
        })),
      })),
    };
  }
}

/** Cluster metadata of one topic whose partition leaders `moveOnRefresh` changes at the next metadata refresh. */
function fakeCluster(leaders: Record<number, number>, brokers: FakeBroker[]) {
  const current = { ...leaders };
  let moveOnRefresh: Record<number, number> = {};
  return {
    moveOnRefresh(moves: Record<number, number>) {
      moveOnRefresh = moves;
    },
    targetTopics: new Set([TOPIC]),
    refreshMetadataIfNecessary: async () => undefined,
    refreshMetadata: async () => {
      Object.assign(current, moveOnRefresh);
      moveOnRefresh = {};
    },
    addMultipleTargetTopics: async () => undefined,
    isConnected: () => true,
    removeBroker: () => undefined,
    findTopicPartitionMetadata: () =>
      Object.entries(current).map(([partitionId, leader]) => ({ partitionId: Number(partitionId), leader })),
    findLeaderForPartitions: (_topic: string, partitions: string[]) => {
      const out: Record<string, number[]> = {};
      for (const p of partitions) (out[current[Number(p)]!] ??= []).push(Number(p));
      return out;
    },
    findBroker: async ({ nodeId }: { nodeId: string }) => brokers.find((b) => b.nodeId === Number(nodeId))!,
  };
}

/** An idempotent producer's sequences and broker locks (one request at a time per broker), as kafkajs keeps them. */
function fakeEosManager() {
  const sequences = new Map<number, number>();
  const locks = new Map<number, Promise<void>>();
  const releases = new Map<number, () => void>();
  return {
    isTransactional: () => false,
    getTransactionalId: () => undefined,
    getProducerId: () => 7,
    getProducerEpoch: () => 0,
    getSequence: (_topic: string, partition: number) => sequences.get(partition) ?? 0,
    updateSequence: (_topic: string, partition: number, n: number) =>
      sequences.set(partition, (sequences.get(partition) ?? 0) + n),
    async acquireBrokerLock(broker: FakeBroker) {
      while (locks.has(broker.nodeId)) await locks.get(broker.nodeId);
      locks.set(broker.nodeId, new Promise<void>((resolve) => releases.set(broker.nodeId, resolve)));
    },
    releaseBrokerLock(broker: FakeBroker) {
      const release = releases.get(broker.nodeId);
      locks.delete(broker.nodeId);
      releases.delete(broker.nodeId);
      release?.();
    },
  };
}

function sendOver(
  cluster: ReturnType<typeof fakeCluster>,
  partitioner: Partitioner = ({ message }) => message.partition!,
): Send {
  return createSendMessages({
    logger: { debug: () => undefined, error: () => undefined, warn: () => undefined, info: () => undefined },
    cluster,
    partitioner,
    eosManager: fakeEosManager(),
    retrier: createRetry({ retries: 5, initialRetryTime: 5, maxRetryTime: 20, factor: 0, multiplier: 1 }),
  });
}

const messages: Message[] = [
  { key: 'a', value: '1', partition: 0 },
  { key: 'b', value: '2', partition: 1 },
  { key: 'c', value: '3', partition: 0 },
];

describe('kafkajs patch (sendMessages): a partition leader that dies mid-send', () => {
  it('sends the dead leader’s partition to its new leader, even one that already answered for another', async () => {
    const [one, two] = [new FakeBroker(1), new FakeBroker(2)];
    const cluster = fakeCluster({ 0: 1, 1: 2 }, [one, two]);
    one.dead = true;
    cluster.moveOnRefresh({ 0: 2 });

    const answers = await sendOver(cluster)({ acks: -1, timeout: 30_000, topicMessages: [{ topic: TOPIC, messages }] });

    // Partition 1 was written once; partition 0 reached broker 2 after the move, with the sequence it had.
    expect(two.requests).toEqual([
      [{ partition: 1, firstSequence: 0, keys: ['b'] }],
      [{ partition: 0, firstSequence: 0, keys: ['a', 'c'] }],
    ]);
    expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
    expect(answers.every((a) => a.topicName === TOPIC && a.errorCode === 0)).toBe(true);
  });

  it('does not write again what an earlier attempt’s slow request got acknowledged while the retry waited', async () => {
    const [one, two] = [new FakeBroker(1), new FakeBroker(2)];
    const cluster = fakeCluster({ 0: 1, 1: 2 }, [one, two]);
    one.dead = true;
    // Broker 2 answers the first attempt after the retry has started and is waiting for its lock.
    two.delayMs = 60;
    cluster.moveOnRefresh({ 0: 2 });

    const answers = await sendOver(cluster)({ acks: -1, timeout: 30_000, topicMessages: [{ topic: TOPIC, messages }] });

    const written = two.requests.flat().map((r) => r.partition);
    expect(written.filter((p) => p === 1)).toHaveLength(1);
    expect(written.filter((p) => p === 0)).toHaveLength(1);
    expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
  });

  it('sends each partition once when no leader dies', async () => {
    const [one, two] = [new FakeBroker(1), new FakeBroker(2)];
    const answers = await sendOver(fakeCluster({ 0: 1, 1: 2 }, [one, two]))({
      acks: -1,
      timeout: 30_000,
      topicMessages: [{ topic: TOPIC, messages }],
    });
    expect(one.requests).toEqual([[{ partition: 0, firstSequence: 0, keys: ['a', 'c'] }]]);
    expect(two.requests).toEqual([[{ partition: 1, firstSequence: 0, keys: ['b'] }]]);
    expect(answers).toHaveLength(2);
  });

  it('keeps each keyless message in the partition first chosen for it, so a retry writes each exactly once', async () => {
    // Keyless messages (a dead letter of a record without a readable id) go round-robin: chosen again on the
    // retry, the partition that was acknowledged kept its first messages and the retried one got others, so one
    // message was written twice and two never (kafkajs 2.2.4 and the patch before this one).
    const [one, two] = [new FakeBroker(1), new FakeBroker(2)];
    one.failures = 1;
    const keyless: Message[] = ['m1', 'm2', 'm3'].map((value) => ({ key: null, value }));

    const answers = await sendOver(
      fakeCluster({ 0: 1, 1: 2 }, [one, two]),
      createDefaultPartitioner(),
    )({
      acks: -1,
      timeout: 30_000,
      topicMessages: [{ topic: TOPIC, messages: keyless }],
    });

    expect([...one.written, ...two.written].sort()).toEqual(['m1', 'm2', 'm3']);
    expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
  });
});
