import { z } from 'zod';

// An operator's change of an account's checkpoint, in the manner of Kafka Connect's KIP-875 (alter a connector's
// offsets, only while it is stopped): recorded in Redis by the admin API or `reviews-bridge checkpoint set` while the
// account is paused, and applied by its leader through the ordinary commit (Kafka changelog, then Redis), so a
// Redis restored from the changelog holds it too.

/** A checkpoint change as recorded for the leader. */
export const CheckpointChangeSchema = z.object({
  /** The watermark to rewind (or move) to, ms since the epoch. */
  watermark: z.number().int().nonnegative(),
  requestedAt: z.number().int(),
  /** Who asked: the admin token's name, or `cli` (never a token). */
  by: z.string().max(200),
});

/** A checkpoint change as recorded for the leader. */
export type CheckpointChange = z.infer<typeof CheckpointChangeSchema>;

/** Why a checkpoint change is refused now, or null when it may be recorded: only while the account is paused. */
export function checkpointChangeRefusal(pausedSince: number | null): string | null {
  return pausedSince === null
    ? 'the account is running: pause it first (POST .../pause or `reviews-bridge pause`), then change its checkpoint'
    : null;
}

const iso = z.iso.datetime().describe('ISO 8601 date-time (UTC)');
const isoOrNull = iso.nullable();

/** An account's checkpoint as an operator reads it (GET .../checkpoint, `reviews-bridge checkpoint get`). */
export const CheckpointViewSchema = z.object({
  account: z.string(),
  watermark: isoOrNull.describe(
    'polls read what changed since this (minus POLL_OVERLAP_MS); null before the initial load',
  ),
  initialLoad: z.object({ done: z.boolean() }).describe('whether the initial load of the account has completed'),
  sweep: z
    .object({
      kind: z.enum(['initial', 'sweep']),
      cursor: z.string().nullable().describe('where the running sweep (or initial load) resumes'),
      startedAt: iso,
      seen: z.number().int().nonnegative(),
    })
    .nullable()
    .describe('the sweep (or initial load) in progress, if any'),
  lastSweepAt: isoOrNull,
  lastIncrementalAt: isoOrNull,
  changelog: z
    .object({
      txn: z.number().int().nullable().describe('the changelog transaction Redis reflects (null: no checkpoint)'),
      offsets: z.record(z.string(), z.number().int()).describe('changelog partition -> offset of the last commit'),
      cluster: z.string().nullable().describe('the Kafka cluster id the changelog is written to'),
    })
    .describe('where the Kafka changelog stands'),
  deployment: z
    .record(z.string(), z.string())
    .nullable()
    .describe('the identity of the deployment that wrote the checkpoint, when recorded (null: not recorded)'),
  paused: z.boolean().describe('a checkpoint can be changed only while the account is paused'),
  pausedSince: isoOrNull,
  pendingChange: z
    .object({ watermark: iso, requestedAt: iso, by: z.string().describe('the admin token name, or cli') })
    .nullable()
    .describe('a change recorded and not yet applied by the leader'),
});

/** An account's checkpoint as an operator reads it. */
export type CheckpointView = z.infer<typeof CheckpointViewSchema>;

/** What Redis holds of an account's checkpoint, read in one go (the raw hash and the flags). */
export interface CheckpointRecords {
  account: string;
  /** The checkpoint hash as stored (field -> value). */
  hash: Record<string, string>;
  pausedSince: number | null;
  pending: CheckpointChange | null;
}

const toIso = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString();
const num = (v: string | undefined): number | null => (v === undefined || v === '' ? null : Number(v));

/** The view of an account's checkpoint from its Redis records. */
export function checkpointView(r: CheckpointRecords): CheckpointView {
  const h = r.hash;
  const sweepKind = h.sweep_kind === 'initial' || h.sweep_kind === 'sweep' ? h.sweep_kind : null;
  const offsets: Record<string, number> = {};
  for (const [field, value] of Object.entries(h)) if (field.startsWith('clo:')) offsets[field.slice(4)] = Number(value);
  // Fields naming who wrote the checkpoint (a deployment id, its upstream), shown as they are when present.
  const identity = Object.entries(h).filter(([field]) => /^(deployment|upstream_id|changelog_topic_id)/.test(field));
  return {
    account: r.account,
    watermark: toIso(num(h.watermark)),
    initialLoad: { done: h.initial_done === '1' },
    sweep: sweepKind
      ? {
          kind: sweepKind,
          cursor: h.sweep_cursor ? h.sweep_cursor : null,
          startedAt: toIso(num(h.sweep_started_at) ?? 0)!,
          seen: num(h.sweep_seen) ?? 0,
        }
      : null,
    lastSweepAt: toIso(num(h.last_sweep_at)),
    lastIncrementalAt: toIso(num(h.last_incremental_at)),
    changelog: {
      txn: Object.keys(h).length === 0 ? null : (num(h.txn) ?? 0),
      offsets,
      cluster: h.kafka_cluster ?? null,
    },
    deployment: identity.length === 0 ? null : Object.fromEntries(identity),
    paused: r.pausedSince !== null,
    pausedSince: toIso(r.pausedSince),
    pendingChange: r.pending && {
      watermark: toIso(r.pending.watermark)!,
      requestedAt: toIso(r.pending.requestedAt)!,
      by: r.pending.by,
    },
  };
}

/** A watermark as an operator gives it: ISO 8601 (date or date-time) or epoch milliseconds; null when unreadable. */
export function parseWatermark(value: string | number, now: number): { ms: number } | { problem: string } {
  const ms = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(ms) || ms < 0) return { problem: 'not a date (ISO 8601 or epoch milliseconds)' };
  if (ms > now) return { problem: 'the date is in the future' };
  return { ms };
}
