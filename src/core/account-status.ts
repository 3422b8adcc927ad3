import { z } from 'zod';
import { DependencyReportSchema } from './dependency-health.js';
import { FreshnessReportSchema, type FreshnessReport } from './freshness-report.js';
import type { Checkpoint } from './checkpoint.js';
import { fullScanEstimate, progressJson, progressOf } from './progress.js';
import { ResyncScopeSchema, type ResyncRequest } from './resync-request.js';

// What `status` shows of an account, and what the admin API's GET /v1/accounts answers: one shape for both, built
// here from what Redis records (src/redis/account-status.ts reads it). The zod schemas are the contract: the admin
// API's OpenAPI document is generated from them.

const iso = z.iso.datetime().describe('ISO 8601 date-time (UTC)');
const isoOrNull = iso.nullable();

const PASS_KINDS = ['initial', 'sweep', 'resync', 'restore'] as const;

/** Progress of the running sweep, initial load, resync or restore, with its rate and estimated end. */
export const PassProgressJsonSchema = z.object({
  kind: z.enum(PASS_KINDS),
  requestId: z.string().nullable().describe('the resync request this pass serves (resync only)'),
  seen: z.number().int().nonnegative().describe('reviews (or changelog entries) seen so far'),
  estimatedTotal: z.number().int().nonnegative().nullable().describe('estimated total; null when unknown'),
  percent: z.number().nullable().describe('0..100, one decimal; null without an estimate'),
  reviewsPerSecond: z.number().nullable(),
  eta: isoOrNull.describe('estimated end at the current rate; null when unknown'),
});

/** The last long pass that finished (its progress record as the leader left it). */
export const FinishedPassSchema = z.object({
  kind: z.enum(PASS_KINDS),
  requestId: z.string().nullable(),
  seen: z.number().int().nonnegative(),
  startedAt: iso,
  finishedAt: iso,
});

/** The lease of an account: the replica leading it and the fencing epoch. */
export const LeaseStatusSchema = z.object({
  holder: z.string().describe('replica id (host:pid:random)'),
  epoch: z.number().int(),
  ttlMs: z.number().int().describe('time left on the lease'),
});

/** One account's status: position, passes, requests pending, pause, lease. */
export const AccountStatusSchema = z.object({
  account: z.string(),
  leader: z.string().nullable().describe('the replica leading the account; null when none does'),
  epoch: z.number().int().nullable().describe("the leader's lease epoch"),
  snapshotReviews: z.number().int().nonnegative(),
  watermark: isoOrNull.describe('largest updated_date covered by a complete poll'),
  watermarkLagSeconds: z
    .number()
    .nonnegative()
    .nullable()
    .describe(
      'how far the feed trails the clock: since the newest of the watermark, the last complete poll and the last complete full scan',
    ),
  initialLoadDone: z.boolean(),
  sweepInProgress: z
    .object({ kind: z.enum(['initial', 'sweep']), cursor: z.string().nullable(), startedAt: iso, seen: z.number() })
    .nullable(),
  sweepRequested: z.boolean(),
  progress: PassProgressJsonSchema.nullable().describe('the long pass running now, if any'),
  lastPass: FinishedPassSchema.nullable().describe('the last long pass that finished, when it is the last recorded'),
  resyncRequested: z
    .object({ id: z.string(), requestedAt: iso, scope: ResyncScopeSchema })
    .nullable()
    .describe('a resync not completed yet (pending or running)'),
  paused: z.boolean(),
  pausedSince: isoOrNull,
  changelogTxn: z.number().int().nullable().describe('the Kafka changelog transaction Redis reflects'),
  restoreRequested: z.boolean(),
  lastSweepAt: isoOrNull,
  lastIncrementalAt: isoOrNull,
  deletionDetection: z
    .object({
      deferredSweeps: z.number().int().nonnegative().describe('complete sweeps in a row that left deletions undecided'),
      deferredReason: z.string().nullable().describe('why the last complete sweep left them undecided, if it did'),
      unreadableRecords: z.number().int().nonnegative().nullable().describe('records whose id cannot be read'),
      heldReviews: z
        .number()
        .int()
        .nonnegative()
        .nullable()
        .describe('reviews not listed that such a record may stand for: not deleted (null: unknown)'),
    })
    .describe('deletions left undecided by records whose id cannot be read (docs/bad-input.md)'),
  lease: LeaseStatusSchema.nullable(),
  refused: z
    .object({ setting: z.string(), reason: z.string(), replica: z.string(), since: iso })
    .nullable()
    .describe("a replica's leadership refused before it acted on Kafka, and why (the lease is given up meanwhile)"),
  redisDurability: z.string().nullable().describe('null: Redis meets REDIS_WAIT_REPLICAS; else why not'),
  dependencies: z
    .object({
      checkedBy: z.string().nullable().describe('the replica whose report this is (the leader); null: none recent'),
      checkedAt: isoOrNull,
      report: z.record(z.string(), DependencyReportSchema),
    })
    .describe('each dependency as the leader last found it; redis as this request found it (a write)'),
  freshness: FreshnessReportSchema.nullable().describe(
    "the bound that holds for late changes, as the leader last reported it (with its dependencies' report); null: no recent report",
  ),
});

/** One account's status. */
export type AccountStatus = z.infer<typeof AccountStatusSchema>;

/** One account's line of the overview of several. */
export const AccountSummarySchema = z.object({
  account: z.string(),
  leader: z.string().nullable(),
  initialLoadDone: z.boolean(),
  watermark: isoOrNull,
  lastIncrementalAt: isoOrNull,
  sweepInProgress: z.boolean(),
  paused: z.boolean(),
});

/** One account's line of the overview. */
export type AccountSummary = z.infer<typeof AccountSummarySchema>;

/** Every account of a deployment and the replica leading each. */
export const AccountsOverviewSchema = z.object({
  accounts: z.number().int().nonnegative(),
  unled: z.array(z.string()).describe('accounts no replica leads'),
  replicas: z.array(z.object({ replica: z.string(), live: z.boolean(), leads: z.array(z.string()) })),
  replicaTtlMs: z.number().int(),
  byAccount: z.array(AccountSummarySchema),
});

/** Every account of a deployment and the replica leading each. */
export type AccountsOverview = z.infer<typeof AccountsOverviewSchema>;

/** A pass's progress record as the leader writes it (src/redis/snapshot-store.ts PassProgressSchema). */
export interface PassRecord {
  kind: (typeof PASS_KINDS)[number];
  requestId: string | null;
  seen: number;
  estimatedTotal: number | null;
  startedAt: number;
  finishedAt: number | null;
}

/** What Redis records of an account, read in one go. */
export interface AccountRecords {
  account: string;
  checkpoint: Checkpoint;
  snapshotReviews: number;
  lease: { holder: string; epoch: number; ttlMs: number } | null;
  sweepRequested: boolean;
  pausedSince: number | null;
  pass: PassRecord | null;
  resync: ResyncRequest | null;
  changelogTxn: number | null;
  restoreRequested: boolean;
  /** A refused leadership (src/redis/refusal.ts); absent: not read. */
  refused?: { setting: string; reason: string; replica: string; since: number } | null;
  /** null: Redis meets REDIS_WAIT_REPLICAS; else why not. */
  redisDurability: string | null;
  /** The dependencies as the leader last reported them, redis as the reader found it; absent: not read. */
  dependencies?: AccountStatus['dependencies'];
  /** The bound that holds for late changes, as the leader last reported it; absent or null: none. */
  freshness?: FreshnessReport | null;
}

const toIso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The status of an account from its records at `now`. */
export function accountStatus(r: AccountRecords, now: number): AccountStatus {
  const { checkpoint, pass } = r;
  // The leader's own progress record when it has one (it knows the resync totals); else the checkpoint's.
  const progress =
    pass && pass.finishedAt === null
      ? { kind: pass.kind, requestId: pass.requestId, ...progressJson(progressOf({ ...pass, now }), now) }
      : checkpoint.sweep
        ? {
            kind: checkpoint.sweep.kind,
            requestId: null,
            ...progressJson(
              progressOf({
                seen: checkpoint.sweep.seen,
                estimatedTotal: fullScanEstimate(checkpoint.sweep.kind, r.snapshotReviews),
                startedAt: checkpoint.sweep.startedAt,
                now,
              }),
              now,
            ),
          }
        : null;
  const lastPass =
    pass && pass.finishedAt !== null
      ? {
          kind: pass.kind,
          requestId: pass.requestId,
          seen: pass.seen,
          startedAt: toIso(pass.startedAt)!,
          finishedAt: toIso(pass.finishedAt)!,
        }
      : null;
  return {
    account: r.account,
    leader: r.lease?.holder ?? null,
    epoch: r.lease?.epoch ?? null,
    snapshotReviews: r.snapshotReviews,
    watermark: toIso(checkpoint.watermark),
    watermarkLagSeconds: feedLagSeconds(checkpoint, now),
    initialLoadDone: checkpoint.initialDone,
    sweepInProgress: checkpoint.sweep && { ...checkpoint.sweep, startedAt: toIso(checkpoint.sweep.startedAt)! },
    sweepRequested: r.sweepRequested,
    progress,
    lastPass,
    resyncRequested: r.resync && { ...r.resync, requestedAt: toIso(r.resync.requestedAt)! },
    paused: r.pausedSince !== null,
    pausedSince: toIso(r.pausedSince),
    changelogTxn: r.changelogTxn,
    restoreRequested: r.restoreRequested,
    lastSweepAt: toIso(checkpoint.lastSweepAt),
    lastIncrementalAt: toIso(checkpoint.lastIncrementalAt),
    deletionDetection: {
      deferredSweeps: checkpoint.deferredSweeps,
      deferredReason: checkpoint.deferredReason,
      unreadableRecords: checkpoint.unreadable?.length ?? null,
      heldReviews: checkpoint.unreadableCandidates
        ? new Set(Object.values(checkpoint.unreadableCandidates).flat()).size
        : null,
    },
    lease: r.lease,
    refused: r.refused ? { ...r.refused, since: toIso(r.refused.since)! } : null,
    redisDurability: r.redisDurability,
    dependencies: r.dependencies ?? { checkedBy: null, checkedAt: null, report: {} },
    freshness: r.freshness ?? null,
  };
}

/** One account's overview line from its checkpoint, lease holder and pause flag. */
export function accountSummary(
  account: string,
  checkpoint: Checkpoint,
  leader: string | null,
  pausedSince: number | null,
): AccountSummary {
  return {
    account,
    leader,
    initialLoadDone: checkpoint.initialDone,
    watermark: toIso(checkpoint.watermark),
    lastIncrementalAt: toIso(checkpoint.lastIncrementalAt),
    sweepInProgress: checkpoint.sweep !== null,
    paused: pausedSince !== null,
  };
}

/** The overview of several accounts: which live replica leads which account, and the accounts none leads. */
export function accountsOverview(
  rows: readonly AccountSummary[],
  liveReplicas: readonly string[],
  replicaTtlMs: number,
): AccountsOverview {
  const leading: Record<string, string[]> = Object.fromEntries(liveReplicas.map((r) => [r, []]));
  for (const row of rows) if (row.leader) (leading[row.leader] ??= []).push(row.account);
  return {
    accounts: rows.length,
    unled: rows.filter((r) => r.leader === null).map((r) => r.account),
    replicas: Object.entries(leading).map(([replica, led]) => ({
      replica,
      live: liveReplicas.includes(replica),
      leads: led,
    })),
    replicaTtlMs,
    byAccount: [...rows],
  };
}

/**
 * How far the feed trails the clock, in seconds: since the newest moment it is known to have covered everything the
 * upstream had (the watermark, or a complete poll or full scan ending), null before any. The watermark alone is the
 * data's own clock: after the initial load of an account whose newest review changed years ago it said years
 * (92,120,991 s in the demo) while the feed was seconds behind.
 */
export function feedLagSeconds(
  checkpoint: Pick<Checkpoint, 'watermark' | 'lastIncrementalAt' | 'lastSweepAt'>,
  now: number,
): number | null {
  const covered = [checkpoint.watermark, checkpoint.lastIncrementalAt, checkpoint.lastSweepAt].filter(
    (t): t is number => t !== null,
  );
  return covered.length === 0 ? null : Math.max(0, (now - Math.max(...covered)) / 1000);
}
