import { randomUUID } from 'node:crypto';
import { Kafka, type Admin } from 'kafkajs';
import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import type { FingerprintKeyCopy } from '../core/fingerprint-key.js';
import { sleep } from '../core/clock.js';
import { changelogName } from './changelog-index.js';
import { kafkaOptions } from './publisher.js';

// The copy of a generated fingerprint key in the changelog topic (src/redis/fingerprint-key.ts says when it is
// written and read). One record per Redis key prefix (the key's own scope: two deployments that share a changelog
// topic keep their copies apart), key `fingerprint-key/<prefix>`, always in partition 0, so compaction keeps the
// last one and a read looks in one partition only. The key matches no record kind, so restores skip it. It is written outside any transaction (at once visible to read_committed readers; nothing else waits for it),
// and read only when Redis has no key or no confirmed copy: at the first start, after Redis lost the key, once
// after an upgrade. A read scans partition 0 from its start, at most what a full restore reads anyway.

/** Key of the copy's record in the changelog topic, for the deployment's Redis key prefix. */
export function fingerprintKeyRecord(prefix: string): string {
  return `fingerprint-key/${prefix}`;
}
const PARTITION = 0;

/**
 * The changelog copy of the generated fingerprint key of the deployment whose Redis key prefix is `prefix` (its
 * Kafka client made on first use).
 */
export function changelogKeyCopy(config: BridgeConfig['kafka'], prefix: string, logger: Logger): FingerprintKeyCopy {
  const topic = config.topics.changelog;
  const record = fingerprintKeyRecord(prefix);
  let kafka: Kafka | null = null;
  const client = (): Kafka => (kafka ??= new Kafka(kafkaOptions(config, logger)));
  return {
    name: changelogName(config.brokers, topic),
    async read() {
      return readCopy(client(), topic, record);
    },
    async write(secret: string) {
      const producer = client().producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      try {
        await producer.send({
          topic,
          acks: -1,
          messages: [{ key: record, value: secret, partition: PARTITION }],
        });
      } finally {
        await producer.disconnect().catch(() => undefined);
      }
      logger.info({ topic }, 'copied the generated fingerprint key to the changelog topic');
    },
  };
}

// The value of the last copy record in partition 0, or null when it has none.
async function readCopy(kafka: Kafka, topic: string, record: string): Promise<string | null> {
  const admin = kafka.admin();
  await admin.connect();
  let low: number;
  let high: number;
  try {
    const offsets = await topicOffsets(admin, topic);
    const p = offsets.find((o) => o.partition === PARTITION);
    if (!p) throw new Error(`changelog topic ${topic} has no partition ${PARTITION}`);
    low = Number(p.low);
    high = Number(p.high);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  if (high <= low) return null;

  // A group of its own that commits nothing (kafkajs has no manual assignment); read_uncommitted, so an open
  // transaction of the leader does not hold the read back: the copy is written outside transactions, and no
  // aborted record carries its key.
  const consumer = kafka.consumer({
    groupId: `reviews-bridge.fingerprint-key.${randomUUID()}`,
    readUncommitted: true,
    maxWaitTimeInMs: 200,
  });
  let found: string | null = null;
  let done = false;
  // Where a batch of partition 0 ended, also one of control records only (a transaction marker may be the last
  // record below the high watermark, and eachBatch never sees it).
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.partition === PARTITION && Number(payload.lastOffset) >= high - 1) done = true;
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (batch.partition !== PARTITION) {
          consumer.pause([{ topic, partitions: [batch.partition] }]);
          return;
        }
        for (const m of batch.messages) {
          if (Number(m.offset) >= high) break;
          if (m.key?.toString('utf8') === record && m.value) found = m.value.toString('utf8');
        }
      },
    });
    const deadline = Date.now() + 600_000;
    while (!done) {
      if (Date.now() > deadline) throw new Error(`reading the fingerprint key copy of ${topic} did not finish`);
      await sleep(50);
    }
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
  return found;
}

// The topic's offsets; a topic created a moment ago may answer NOT_LEADER_FOR_PARTITION for a while (a fresh
// broker): those are retried, as the changelog reader does.
async function topicOffsets(
  admin: Admin,
  topic: string,
): Promise<Array<{ partition: number; high: string; low: string }>> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await admin.fetchTopicOffsets(topic);
    } catch (err) {
      if (attempt >= 40 || (err as { retriable?: unknown }).retriable !== true) throw err;
      await sleep(250);
    }
  }
}
