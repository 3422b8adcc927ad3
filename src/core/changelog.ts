import { z } from 'zod';
import { EMPTY_CHECKPOINT, type Checkpoint } from './checkpoint.js';
import { CANDIDATE_MEMORY_MAX, UNREADABLE_MEMORY_MAX } from './deletion-inference.js';
import { decodeEntry, encodeEntry, type SnapshotEntry } from './snapshot-entry.js';
import type { Identity } from './identity.js';

// The changelog: what the bridge needs to continue, written to an internal compacted Kafka topic in the same
// transaction as the events it belongs to (as Kafka Streams keeps a state store's changelog). Redis is a cache of
// it: a Redis that lost keys, or fell behind Kafka, is restored from it instead of deriving events anew.
//
// Records (the account's key prefix goes in front when accounts share the topic):
//   e:<review id>   the review's snapshot entry (keyed fingerprints only), or a deletion marker keeping its sequence
//   checkpoint      the account's whole checkpoint after the transaction, with the transaction's number
// Every record carries the transaction number in a header, so a restore that starts mid-log knows what is newer,
// and the deployment and account that wrote it (src/core/identity.ts); a checkpoint also names the deployment and
// upstream in its body. Records written before identities carry neither (see "Identity" in docs/exactly-once.md).

/** Header naming the changelog transaction (1, 2, 3 ... per account) a record was written in. */
export const CHANGELOG_TXN_HEADER = 'bridge-txn';

/** The default changelog topic of the versions before deployment identities (one for every deployment). */
export const FORMER_DEFAULT_CHANGELOG = 'reviews-bridge.changelog';

/** Key of the account's checkpoint record. */
export const CHECKPOINT_RECORD_KEY = 'checkpoint';

/** Key of the end markers a changelog read writes per partition (a restore knows where it stopped by them). */
export const MARKER_RECORD_KEY = 'restore-marker';

/** Key of a review's entry record. */
export function entryRecordKey(id: number): string {
  return `e:${id}`;
}

/** The checkpoint as the changelog holds it: the Redis checkpoint plus where the account's transactions stand. */
export interface ChangelogCheckpoint extends Checkpoint {
  /** Number of the transaction that wrote this checkpoint (0: none yet). */
  txn: number;
  /** The lease epoch that wrote it: a restored Redis never issues an epoch at or below it again. */
  epoch: number;
}

/** The checkpoint of an account with no changelog yet. */
export const EMPTY_CHANGELOG_CHECKPOINT: ChangelogCheckpoint = { ...EMPTY_CHECKPOINT, txn: 0, epoch: 0 };

const nullableInt = z.number().int().nullable();
const DIGEST = /^[0-9a-f]{1,64}$/;
const ChangelogCheckpointSchema = z.object({
  v: z.literal(1),
  txn: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  watermark: nullableInt,
  initialDone: z.boolean(),
  sweep: z
    .object({
      kind: z.enum(['initial', 'sweep']),
      cursor: z.string().nullable(),
      startedAt: z.number().int(),
      seen: z.number().int().nonnegative(),
    })
    .nullable(),
  lastSweepAt: nullableInt,
  lastIncrementalAt: nullableInt,
  // Added later: a checkpoint written before them reads as "unknown" (detection waits one more sweep at most).
  unreadable: z.array(z.string().regex(DIGEST)).max(UNREADABLE_MEMORY_MAX).nullable().default(null),
  // Added later still: without it, every remembered record counts as new once (never a wrong deletion).
  unreadableCandidates: z
    .record(z.string().regex(DIGEST), z.array(z.number().int().positive().max(Number.MAX_SAFE_INTEGER)))
    .refine((c) => Object.values(c).reduce((n, ids) => n + ids.length, 0) <= CANDIDATE_MEMORY_MAX)
    .nullable()
    .default(null),
  deferredSweeps: z.number().int().nonnegative().default(0),
  deferredReason: z.string().max(64).nullable().default(null),
  // Added with deployment identities: absent in a checkpoint written before them (a legacy one).
  deployment: z.string().max(64).nullable().default(null),
  upstream: z.string().max(64).nullable().default(null),
});

/** One decoded changelog record. */
export type ChangelogRecord =
  | { kind: 'entry'; id: number; entry: SnapshotEntry; deleted: boolean }
  | { kind: 'checkpoint'; checkpoint: ChangelogCheckpoint; identity: Identity | null };

const LIVE = 1;
const DELETED = 2;

/** The record of a review's entry; `deleted` marks a review found gone (its sequence is kept for a comeback). */
export function entryRecord(id: number, entry: SnapshotEntry, deleted = false): { key: string; value: Buffer } {
  if (entry.keyId === null) throw new Error('only keyed entries may be written to the changelog');
  return {
    key: entryRecordKey(id),
    value: encodeEntry(entry, deleted ? DELETED : LIVE),
  };
}

/** The record of an account's checkpoint, naming the deployment and upstream that wrote it (when known). */
export function checkpointRecord(ckpt: ChangelogCheckpoint, identity?: Identity): { key: string; value: string } {
  const { txn, epoch, watermark, initialDone, sweep, lastSweepAt, lastIncrementalAt } = ckpt;
  const { unreadable, unreadableCandidates, deferredSweeps, deferredReason } = ckpt;
  const body = {
    ...{ v: 1, txn, epoch, watermark, initialDone, sweep, lastSweepAt, lastIncrementalAt },
    ...{ unreadable, unreadableCandidates, deferredSweeps, deferredReason },
    ...(identity ? { deployment: identity.deployment, upstream: identity.upstream } : {}),
  };
  return { key: CHECKPOINT_RECORD_KEY, value: JSON.stringify(body) };
}

/**
 * Decodes a record by its key (without the account prefix). Null for a key the bridge does not write there (a
 * tombstone or a foreign record); throws for a record of ours that cannot be read (a restore must not guess).
 */
export function decodeChangelogRecord(key: string, value: Buffer | null): ChangelogRecord | null {
  if (value === null) return null;
  if (key === CHECKPOINT_RECORD_KEY) {
    const parsed = ChangelogCheckpointSchema.parse(JSON.parse(value.toString('utf8')));
    const { v: _v, deployment, upstream, ...checkpoint } = parsed;
    const identity = deployment !== null && upstream !== null ? { deployment, upstream } : null;
    return { kind: 'checkpoint', checkpoint, identity };
  }
  const match = /^e:(\d{1,15})$/.exec(key);
  if (!match) return null;
  const flag = value[0];
  if (flag !== LIVE && flag !== DELETED) throw new Error(`unknown changelog entry flag ${flag}`);
  return { kind: 'entry', id: Number(match[1]), entry: decodeEntry(value.subarray(1)), deleted: flag === DELETED };
}
