import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { CLAIM_HEADERS, type ClaimSeen } from '../core/claims.js';
import { sleep } from '../core/clock.js';

// Reads back the heartbeats of the last few intervals (src/core/claims.ts judges them): read only, uncommitted
// (heartbeats are their own transactions, and a claim is a claim whether or not its transaction is complete), from
// the first record at or after `since` to each partition's end as it was when the read began. A read serves every
// account of the process that starts within a few seconds (many leaderships start together): one consumer group
// join instead of one each. It is reused only while it is young against the window (a sixth of it, 5 s at most):
// a live installation heartbeats three times per window, so a read that young has seen it unless it started since.

/** How long a read's answer is reused by leaderships starting after it (ms). */
const REUSE_MS = 5_000;

const recent = new Map<string, { at: number; read: Promise<ClaimSeen[]> }>();

/** Heartbeats with claim headers written to `topic` since `since` (ms); none when the topic does not exist. */
export async function recentClaims(
  kafka: Kafka,
  where: { brokers: readonly string[]; topic: string; groupPrefix: string },
  since: number,
  logger: Logger,
  now: () => number = Date.now,
): Promise<ClaimSeen[]> {
  const key = `${[...where.brokers].sort().join(',')}/${where.topic}`;
  const cached = recent.get(key);
  if (cached && now() - cached.at <= Math.min(REUSE_MS, (now() - since) / 6)) {
    const seen = await cached.read.catch(() => null);
    if (seen) return seen.filter((h) => h.at >= since);
  }
  const read = readClaims(kafka, where.topic, where.groupPrefix, since, logger);
  recent.set(key, { at: now(), read });
  read.catch(() => (recent.get(key)?.read === read ? recent.delete(key) : undefined));
  return read;
}

// A topic created a moment ago may answer NOT_LEADER_FOR_PARTITION for a while (a fresh broker): retried, as the
// changelog reader does.
async function retryingNotLeader<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (attempt >= 40 || (err as { retriable?: unknown }).retriable !== true) throw err;
      await sleep(250);
    }
  }
}

async function readClaims(
  kafka: Kafka,
  topic: string,
  groupPrefix: string,
  since: number,
  logger: Logger,
): Promise<ClaimSeen[]> {
  const admin = kafka.admin();
  await admin.connect();
  let ranges: Array<{ partition: number; from: number; end: number }>;
  try {
    if (!(await admin.listTopics()).includes(topic)) return [];
    const [starts, ends] = await retryingNotLeader(() =>
      Promise.all([admin.fetchTopicOffsetsByTimestamp(topic, since), admin.fetchTopicOffsets(topic)]),
    );
    ranges = ends.map((e) => ({
      partition: e.partition,
      from: Number(starts.find((s) => s.partition === e.partition)?.offset ?? e.high),
      end: Number(e.high),
    }));
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  const remaining = new Set(ranges.filter((r) => r.from < r.end).map((r) => r.partition));
  const seen: ClaimSeen[] = [];
  if (remaining.size === 0) return seen;
  const endOf = new Map(ranges.map((r) => [r.partition, r.end]));
  // A group of its own that commits nothing (kafkajs has no manual assignment), as the changelog reader's.
  const consumer = kafka.consumer({
    groupId: `${groupPrefix}.claims.${randomUUID()}`,
    readUncommitted: true,
    // A one-shot read: kafkajs' defaults (5 s fetch wait, 60 s rebalance) would make every leadership's start slow.
    maxWaitTimeInMs: 200,
    sessionTimeout: 10_000,
    rebalanceTimeout: 10_000,
    heartbeatInterval: 1_000,
  });
  let finish!: () => void;
  let fail!: (err: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  done.catch(() => undefined);
  const timer = setTimeout(() => fail(new Error(`reading the heartbeats of ${topic} took over 60 s`)), 60_000);
  // Where a partition's read stands, from every batch (one of only transaction markers included): done at its end.
  const reached = (partition: number, last: number): void => {
    if (!remaining.has(partition) || last < endOf.get(partition)! - 1) return;
    remaining.delete(partition);
    consumer.pause([{ topic, partitions: [partition] }]);
    if (remaining.size === 0) finish();
  };
  const off = consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    const p = payload as { partition: number; highWatermark: string; offsetLag: string };
    reached(p.partition, Number(p.highWatermark) - 1 - Number(p.offsetLag));
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          const header = (name: string) => m.headers?.[name]?.toString();
          const deployment = header(CLAIM_HEADERS.deployment);
          const redis = header(CLAIM_HEADERS.redis);
          const state = header(CLAIM_HEADERS.state);
          if (deployment === undefined || redis === undefined || state === undefined) continue;
          const at = Number(m.timestamp);
          if (at >= since) seen.push({ account: m.key?.toString('utf8') ?? '', deployment, redis, state, at });
        }
      },
    });
    for (const r of ranges) {
      if (!remaining.has(r.partition)) consumer.pause([{ topic, partitions: [r.partition] }]);
      else consumer.seek({ topic, partition: r.partition, offset: String(r.from) });
    }
    await done;
    return seen;
  } finally {
    clearTimeout(timer);
    off();
    await consumer.disconnect().catch((err: unknown) => logger.warn({ err }, 'closing the heartbeat reader failed'));
  }
}
