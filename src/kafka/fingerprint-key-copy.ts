import { randomUUID } from 'node:crypto';
import { Kafka, type Admin } from 'kafkajs';
import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import type { FingerprintKeyCopy, LegacyKeyCopy } from '../core/fingerprint-key.js';
import { fingerprintKeyId, parseCopy, type KeyEncryptionKey } from '../core/fingerprint-key-wrap.js';
import { DEPLOYMENT_HEADER } from '../core/identity.js';
import { sleep } from '../core/clock.js';
import { changelogName } from './changelog-index.js';
import { kafkaOptions } from './publisher.js';

// The copy of a generated fingerprint key in the changelog topic (src/redis/fingerprint-key.ts says when it is
// written and read), only ever wrapped with the key-encryption key of FINGERPRINT_KEK_FILE
// (src/core/fingerprint-key-wrap.ts): a reader of the topic without that file learns the deployment, the prefix and
// two ids, nothing of the key. One record per Redis key prefix (the key's own scope: two deployments that share a
// changelog topic keep their copies apart), key `fingerprint-key-wrapped/<prefix>`, always in partition 0, so
// compaction keeps the last one and a read looks in one partition only. The key matches no record kind, so
// restores skip it. It is written outside any transaction (at once visible to read_committed readers; nothing else
// waits for it), and read only when Redis has no key or no confirmed copy: at the first start, after Redis lost the
// key, once after an upgrade or a new KEK. A read scans partition 0 from its start, at most what a full restore
// reads anyway.
//
// Versions before this one wrote the key in plain form under `fingerprint-key/<prefix>`. Such a copy is read only
// to recover a key Redis lost before it was wrapped, and is tombstoned once a key file or a wrapped copy is in
// place, whatever the mode (LegacyKeyCopy): compaction then drops the plain value.

/** Key of the wrapped copy's record in the changelog topic, for the deployment's Redis key prefix. */
export function fingerprintKeyRecord(prefix: string): string {
  return `fingerprint-key-wrapped/${prefix}`;
}

/** Key of the plain copy earlier versions wrote (tombstoned now). */
export function legacyFingerprintKeyRecord(prefix: string): string {
  return `fingerprint-key/${prefix}`;
}
const PARTITION = 0;

/** Headers of a wrapped copy: who wrote it and which key it holds (ids only), readable without parsing the value. */
const KEY_ID_HEADER = 'bridge-fingerprint-key-id';
const KEK_ID_HEADER = 'bridge-fingerprint-kek-id';

/**
 * The changelog copies of the deployment whose Redis key prefix is `prefix`: the generated key's, wrapped with
 * `kek` (null without a KEK: none), and the plain one of earlier versions. They share one Kafka client (made on
 * first use) and one scan: the copy's read also looks at the plain copy, so the plain copy's next step (recover or
 * retire) needs no second scan of partition 0.
 */
export function changelogKeyCopies(
  config: BridgeConfig['kafka'],
  prefix: string,
  kek: KeyEncryptionKey | null,
  logger: Logger,
): { copy: FingerprintKeyCopy | null; legacy: LegacyKeyCopy } {
  const client = kafkaClient(config, logger);
  const topic = config.topics.changelog;
  const plainRecord = legacyFingerprintKeyRecord(prefix);
  // The plain copy's last value as the copy's last read saw it, taken by the plain copy's next call only, and only
  // within the leadership step that read it (a minute): older, it is read again.
  let seen: { value: string | null; at: number } | null = null;
  const lastPlain = async (): Promise<string | null> => {
    const known = seen;
    seen = null;
    if (known && Date.now() - known.at < 60_000) return known.value;
    return (await readLast(client(), topic, [plainRecord])).get(plainRecord) ?? null;
  };
  return {
    copy: kek ? wrappedCopy(config, prefix, kek, client, logger, (value) => (seen = { value, at: Date.now() })) : null,
    legacy: legacyKeyCopy(config, prefix, client, lastPlain, logger),
  };
}

// The changelog copy, wrapped with `kek`, of the generated key; `sawPlain` gets the plain copy's last value seen by
// each read.
function wrappedCopy(
  config: BridgeConfig['kafka'],
  prefix: string,
  kek: KeyEncryptionKey,
  client: () => Kafka,
  logger: Logger,
  sawPlain: (value: string | null) => void,
): FingerprintKeyCopy {
  const topic = config.topics.changelog;
  const record = fingerprintKeyRecord(prefix);
  const plainRecord = legacyFingerprintKeyRecord(prefix);
  const owner = { deployment: config.identity?.deployment ?? '', prefix };
  return {
    // With the KEK's id: a new KEK is a new copy to confirm, so the key is wrapped again under it.
    name: `${changelogName(config.brokers, topic)}#kek=${kek.id}`,
    async read() {
      const last = await readLast(client(), topic, [record, plainRecord]);
      sawPlain(last.get(plainRecord) ?? null);
      const value = last.get(record);
      return value ? kek.unwrap(value, owner) : null;
    },
    async write(secret: string) {
      const value = kek.wrap(secret, owner);
      const { keyId, kekId } = parseCopy(value);
      await send(client(), topic, {
        key: record,
        value,
        headers: { [DEPLOYMENT_HEADER]: owner.deployment, [KEY_ID_HEADER]: keyId, [KEK_ID_HEADER]: kekId },
      });
      logger.info({ topic, keyId, kekId }, 'copied the generated fingerprint key, wrapped, to the changelog topic');
    },
  };
}

// The plain copy earlier versions kept in the changelog topic: read to recover a lost key, then tombstoned.
function legacyKeyCopy(
  config: BridgeConfig['kafka'],
  prefix: string,
  client: () => Kafka,
  lastPlain: () => Promise<string | null>,
  logger: Logger,
): LegacyKeyCopy {
  const topic = config.topics.changelog;
  const record = legacyFingerprintKeyRecord(prefix);
  return {
    name: changelogName(config.brokers, topic),
    read: lastPlain,
    async retire() {
      const last = await lastPlain();
      if (!last) return false;
      await send(client(), topic, { key: record, value: null });
      // Once per deployment and changelog (Redis remembers it): the id says which key past event ids were built
      // with, the key itself stays out of the log.
      logger.warn(
        { topic, keyId: fingerprintKeyId(last) },
        'tombstoned the plain copy of the fingerprint key an earlier version wrote to the changelog topic; compaction drops it once its segment is cleaned',
      );
      return true;
    },
  };
}

// A Kafka client made on first use.
function kafkaClient(config: BridgeConfig['kafka'], logger: Logger): () => Kafka {
  let kafka: Kafka | null = null;
  return () => (kafka ??= new Kafka(kafkaOptions(config, logger)));
}

// Writes one record to partition 0 and waits until every in-sync replica has it.
async function send(
  kafka: Kafka,
  topic: string,
  message: { key: string; value: string | null; headers?: Record<string, string> },
): Promise<void> {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: [{ ...message, partition: PARTITION }] });
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
}

// The value of the last record of each of `records` in partition 0 (null: a tombstone; absent: none).
async function readLast(kafka: Kafka, topic: string, records: readonly string[]): Promise<Map<string, string | null>> {
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
  const found = new Map<string, string | null>();
  if (high <= low) return found;

  // A group of its own that commits nothing (kafkajs has no manual assignment); read_uncommitted, so an open
  // transaction of the leader does not hold the read back: the copy is written outside transactions, and no
  // aborted record carries its key.
  const consumer = kafka.consumer({
    groupId: `reviews-bridge.fingerprint-key.${randomUUID()}`,
    readUncommitted: true,
    maxWaitTimeInMs: 200,
  });
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
          const key = m.key?.toString('utf8');
          if (key !== undefined && records.includes(key)) found.set(key, m.value ? m.value.toString('utf8') : null);
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
