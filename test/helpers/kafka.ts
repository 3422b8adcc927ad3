import { randomBytes } from 'node:crypto';
import { Kafka, logLevel, type IHeaders, type KafkaConfig } from 'kafkajs';
import { kafkaBrokers } from './services.js';
import { pollUntil } from './wait.js';

/** One record as a test sees it: decoded to strings, with its position in the log. */
export interface ReadMessage {
  topic: string;
  partition: number;
  /** Offset as a decimal string (Kafka offsets are 64-bit). */
  offset: string;
  key: string | null;
  /** UTF-8 value; a tombstone (null value) reads as ''. */
  value: string;
  /** The value's bytes as read by readAll (a framed value is not UTF-8); null for a tombstone. */
  bytes?: Buffer | null;
  headers: Record<string, string | string[]>;
  /** Record timestamp, ms since the epoch. */
  timestamp: number;
}

/** Options of readAll. */
export interface ReadAllOptions {
  /**
   * Keep reading until at least this many records arrived (also records produced after the call). Without it,
   * readAll returns once it has read up to the end offsets the topics had when it was called.
   */
  untilCount?: number;
  /** After the stop condition holds, keep reading until no record arrived for this long (catches stragglers). */
  idleMs?: number;
  /** Fail (with what was read so far in the message) when the stop condition does not hold within this time. */
  timeoutMs: number;
  /** Called once, when the consumer has joined its group and fetches (a test can then produce "later" records). */
  onFetching?: () => void;
}

/** A kafkajs client for the provided broker with test-friendly retries and kafkajs' own logging off. */
export function testKafka(clientId = uniqueClientId('test'), config: Partial<KafkaConfig> = {}): Kafka {
  return new Kafka({
    clientId,
    brokers: kafkaBrokers(),
    connectionTimeout: 3_000,
    requestTimeout: 15_000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 },
    // Errors reach the test as rejected promises; kafkajs' log lines would only repeat them noisily.
    logLevel: logLevel.NOTHING,
    ...config,
  });
}

/** Creates topics (no-op for ones that exist) and waits until every partition has a leader. */
export async function createTopics(names: string[], partitions = 1): Promise<void> {
  const admin = testKafka(uniqueClientId('create-topics')).admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: names.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
      waitForLeaders: true,
      timeout: 15_000,
    });
  } finally {
    await admin.disconnect();
  }
}

/** Deletes a topic and waits until the cluster no longer lists it (what an operator's `kafka-topics --delete` does). */
export async function deleteTopic(topic: string): Promise<void> {
  const admin = testKafka(uniqueClientId('delete-topic')).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic] });
    await pollUntil(async () => ((await admin.listTopics()).includes(topic) ? undefined : true), {
      timeoutMs: 30_000,
      what: `topic ${topic} to be deleted`,
    });
  } finally {
    await admin.disconnect();
  }
}

/**
 * Reads every record of the given topics from the beginning through a real consumer in a fresh consumer group
 * (what a downstream service would see), in per-partition order. Always disconnects the consumer.
 */
export async function readAll(topics: string[], options: ReadAllOptions): Promise<ReadMessage[]> {
  const kafka = testKafka(uniqueClientId('read-all'));
  const ends = await endOffsets(kafka, topics);
  const positions = new Map<string, bigint>();
  const messages: ReadMessage[] = [];
  let lastMessageAt = Date.now();

  const consumer = kafka.consumer({
    groupId: uniqueClientId('read-all'),
    // The kafkajs defaults (30 s session, 60 s rebalance, 5 s fetch wait) make a one-shot read take seconds.
    sessionTimeout: 6_000,
    rebalanceTimeout: 5_000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1_000 },
  });
  // END_BATCH_PROCESS also fires for batches holding only control records (transaction markers), so the
  // position reaches the end offset even when the last records of a partition are not messages.
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    positions.set(`${payload.topic}:${payload.partition}`, BigInt(payload.lastOffset) + 1n);
  });
  // With idleMs the quiet period must be spent really fetching, not still joining the group.
  let fetching = false;
  consumer.on(consumer.events.FETCH, () => {
    if (!fetching) options.onFetching?.();
    fetching = true;
  });
  let crashed: unknown;
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    // kafkajs restarts by itself after retriable errors (e.g. the group coordinator still loading on a fresh broker).
    if (!payload.restart) crashed = payload.error;
  });

  const started = Date.now();
  try {
    await consumer.connect();
    await consumer.subscribe({ topics, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        messages.push({
          topic,
          partition,
          offset: message.offset,
          key: message.key === null ? null : message.key.toString('utf8'),
          value: message.value === null ? '' : message.value.toString('utf8'),
          bytes: message.value,
          headers: decodeHeaders(message.headers),
          timestamp: Number(message.timestamp),
        });
        lastMessageAt = Date.now();
      },
    });

    let satisfiedAt: number | undefined;
    const wanted = options.untilCount === undefined ? 'the end offsets' : `${options.untilCount} records`;
    await pollUntil(
      () => {
        if (crashed !== undefined) throw new Error(`readAll: consumer crashed: ${String(crashed)}`);
        const satisfied =
          (fetching || !options.idleMs) &&
          (options.untilCount === undefined
            ? [...ends].every(([tp, end]) => (positions.get(tp) ?? 0n) >= end)
            : messages.length >= options.untilCount);
        if (!satisfied) {
          satisfiedAt = undefined;
          return undefined;
        }
        satisfiedAt ??= Date.now();
        return Date.now() - Math.max(satisfiedAt, lastMessageAt) >= (options.idleMs ?? 0) ? true : undefined;
      },
      {
        timeoutMs: options.timeoutMs - (Date.now() - started),
        what: wanted,
        intervalMs: 20,
        onTimeout: () =>
          new Error(
            `readAll(${topics.join(', ')}): read ${messages.length} records but not ${wanted} within ` +
              `${options.timeoutMs} ms; last: ${JSON.stringify(messages.slice(-3))}`,
          ),
      },
    );
  } finally {
    await consumer.disconnect();
  }
  return messages;
}

// End offsets (high watermarks) per "topic:partition"; partitions whose start equals their end are already done.
/** kafkajs' names of the errors a partition answers while its leader is being elected or made known. */
const LEADER_MOVING = new Set(['NOT_LEADER_FOR_PARTITION', 'LEADER_NOT_AVAILABLE']);

async function endOffsets(kafka: Kafka, topics: string[]): Promise<Map<string, bigint>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const ends = new Map<string, bigint>();
    for (const topic of topics) {
      // A topic the bridge created a moment ago may answer NOT_LEADER until its leader is known everywhere: that is
      // tried again (a missing topic fails at once: reading it as empty would hide a test's wrong topic name).
      const offsets = await pollUntil(
        async () => {
          try {
            return await admin.fetchTopicOffsets(topic);
          } catch (err) {
            if (LEADER_MOVING.has(String((err as { type?: unknown }).type))) return undefined;
            throw err;
          }
        },
        { timeoutMs: 30_000, intervalMs: 250, what: `the end offsets of ${topic}` },
      );
      for (const p of offsets) {
        if (BigInt(p.high) > BigInt(p.low)) ends.set(`${topic}:${p.partition}`, BigInt(p.high));
      }
    }
    return ends;
  } finally {
    await admin.disconnect();
  }
}

function decodeHeaders(headers: IHeaders | undefined): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.map((v) => v.toString()) : value.toString();
  }
  return out;
}

function uniqueClientId(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}
