import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { CHANGELOG_TXN_HEADER } from '../core/changelog.js';
import { DEPLOYMENT_HEADER } from '../core/identity.js';
import { sleep } from '../core/clock.js';
import { keyPrefixOf } from './changelog-index.js';
import { MARKER_KEY } from './encoding.js';

// Reads an account's records back from the changelog topic (read_committed), as Kafka Streams restores a store.
// Where to stop is marked, not guessed: a read_committed consumer never sees transaction markers or aborted records,
// so "the end offset" is never reached as a record. The leader first writes a marker record to every partition it
// reads (committed, through its own producer); each partition is read up to its marker, which the broker only
// delivers once every transaction written before it has completed.

/** One changelog record of the account, its key without the account prefix. */
export interface ChangelogRawRecord {
  key: string;
  value: Buffer | null;
  /** The changelog transaction that wrote it (0 when the header is missing). */
  txn: number;
  /** The deployment that wrote it (null: written before deployment identities). */
  deployment: string | null;
  partition: number;
  offset: number;
}

/** What a read needs. */
export interface ChangelogReadOptions {
  topic: string;
  /** The account's key prefix on shared topics ('' otherwise): other accounts' records are skipped. */
  keyPrefix: string;
  /** Start offset per partition; a partition without one is read from its beginning. */
  from: Record<number, number>;
  /** Writes the end markers (one per partition) and resolves the offset of each. */
  mark(partitions: number[]): Promise<Record<number, number>>;
  /** Receives the records batch by batch, in partition order. */
  onRecords(records: ChangelogRawRecord[]): Promise<void>;
  signal?: AbortSignal;
  /** The read fails when it has not reached every marker within this time (default 10 minutes). */
  timeoutMs?: number;
  /**
   * Receives the account prefix of every key read between `from` and the markers, every account's (see
   * src/kafka/changelog-index.ts); end markers are left out, as restores skip them.
   */
  seenPrefixes?: Set<string>;
}

/** Reads the changelog from the given offsets up to freshly written markers; resolves the markers' offsets. */
export async function readChangelog(
  kafka: Kafka,
  groupPrefix: string,
  options: ChangelogReadOptions,
  logger: Logger,
): Promise<Record<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  let partitions: number[];
  try {
    // A topic created a moment ago may answer NOT_LEADER_FOR_PARTITION for a while (a fresh broker): retry those.
    for (let attempt = 0; ; attempt++) {
      try {
        const offsets = await admin.fetchTopicOffsets(options.topic);
        partitions = offsets.map((o) => o.partition).sort((a, b) => a - b);
        break;
      } catch (err) {
        if (attempt >= 40 || (err as { retriable?: unknown }).retriable !== true) throw err;
        await sleep(250);
      }
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  const ends = await options.mark(partitions);
  const remaining = new Set(partitions.filter((p) => ends[p] !== undefined && ends[p]! > (options.from[p] ?? -1)));
  if (remaining.size === 0) return ends;

  // A group of its own that commits nothing: kafkajs has no manual assignment, and a shared group would split
  // the partitions with whoever else restores.
  const consumer = kafka.consumer({
    groupId: `${groupPrefix}.restore.${randomUUID()}`,
    readUncommitted: false,
    maxWaitTimeInMs: 200,
    // Small fetches keep a restore's memory flat (~100 bytes a record, decoded and queued to Redis per batch).
    maxBytesPerPartition: 1024 * 1024,
    maxBytes: 2 * 1024 * 1024,
    retry: { retries: 8 },
  });
  let finish!: () => void;
  let fail!: (err: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  // An abort (a lost lease, a stop) or the timer may fail `done` while connect or subscribe still runs, before
  // anything awaits it: without a handler now that is an unhandled rejection, which ends a Node process.
  done.catch(() => undefined);
  const timer = setTimeout(
    () => fail(new Error(`changelog read did not reach its end markers in ${options.timeoutMs ?? 600_000} ms`)),
    options.timeoutMs ?? 600_000,
  );
  const onAbort = () => fail(options.signal?.reason ?? new Error('aborted'));
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic: options.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, heartbeat }) => {
        const p = batch.partition;
        if (!remaining.has(p)) return;
        const end = ends[p]!;
        const from = options.from[p] ?? 0;
        const records: ChangelogRawRecord[] = [];
        let reached = false;
        for (const m of batch.messages) {
          const offset = Number(m.offset);
          if (offset >= end) {
            reached = true;
            break;
          }
          if (offset < from) continue;
          const key = m.key?.toString('utf8') ?? '';
          if (options.seenPrefixes) notePrefix(options.seenPrefixes, key);
          if (!key.startsWith(options.keyPrefix)) continue;
          const txn = Number(m.headers?.[CHANGELOG_TXN_HEADER]?.toString() ?? '0');
          const deployment = m.headers?.[DEPLOYMENT_HEADER]?.toString() ?? null;
          const rest = key.slice(options.keyPrefix.length);
          records.push({ key: rest, value: m.value, txn, deployment, partition: p, offset });
        }
        try {
          await options.onRecords(records);
        } catch (err) {
          fail(err);
          return;
        }
        await heartbeat();
        if (reached) {
          remaining.delete(p);
          consumer.pause([{ topic: options.topic, partitions: [p] }]);
          if (remaining.size === 0) finish();
        }
      },
    });
    for (const p of partitions) {
      if (!remaining.has(p)) consumer.pause([{ topic: options.topic, partitions: [p] }]);
      else if (options.from[p] !== undefined) {
        consumer.seek({ topic: options.topic, partition: p, offset: String(options.from[p]) });
      }
    }
    await done;
    return ends;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    await consumer.disconnect().catch((err: unknown) => logger.warn({ err }, 'closing the restore consumer failed'));
  }
}

/** Adds the account prefix of `key` to `seen`, unless it has none or is an end marker (no account's data). */
function notePrefix(seen: Set<string>, key: string): void {
  const prefix = keyPrefixOf(key);
  if (prefix !== null && key.slice(prefix.length) !== MARKER_KEY) seen.add(prefix);
}
