import type { FullScanType } from './domain.js';

// Where an account's passes stand. Redis holds it for the running leader; every commit also writes it whole to the
// Kafka changelog (src/core/changelog.ts), which is what a Redis that lost it is restored from.

/** Where the passes stand; every field is written only by a fenced commit. */
export interface Checkpoint {
  /** Largest updated_date (ms) covered by a complete incremental poll or load; null before the initial load. */
  watermark: number | null;
  /** True once the initial load of an empty snapshot has completed. */
  initialDone: boolean;
  /** A sweep (or the initial load) in progress: its kind, resume cursor and progress. */
  sweep: { kind: FullScanType; cursor: string | null; startedAt: number; seen: number } | null;
  /** When the last sweep (or initial load) completed (ms). */
  lastSweepAt: number | null;
  /** When the last incremental poll completed (ms). */
  lastIncrementalAt: number | null;
  /**
   * Keyed digests of the records whose id could not be read in the last complete listing (sorted, repeats kept);
   * null: unknown (never listed completely, too many, or an older checkpoint): all of them count as new then.
   */
  unreadable: string[] | null;
  /**
   * Per remembered digest, the reviews (ascending ids) its records may stand for; null: unknown (an older
   * checkpoint, or too many): every unreadable record counts as new then.
   */
  unreadableCandidates: Record<string, number[]> | null;
  /** Complete sweeps in a row that left deletions undecided (0: the last one decided every review it missed). */
  deferredSweeps: number;
  /** Why the last complete sweep deferred deletion detection; null when it did not. */
  deferredReason: string | null;
}

/** Changes to the checkpoint made with a page commit; undefined leaves a field as it is. */
export interface CheckpointUpdate {
  watermark?: number;
  /**
   * An operator's rewind (PUT /v1/accounts/{account}/checkpoint, `checkpoint set`, only while paused): the one
   * change that moves the watermark back. Polls re-read from there; the diff drops what the snapshot already has.
   */
  rewindWatermark?: number;
  initialDone?: boolean;
  sweep?: Checkpoint['sweep'];
  lastSweepAt?: number;
  lastIncrementalAt?: number;
  unreadable?: string[] | null;
  unreadableCandidates?: Record<string, number[]> | null;
  deferredSweeps?: number;
  deferredReason?: string | null;
}

/** Applies a commit's update to a checkpoint as the commit script does (the watermark only grows). */
export function applyCheckpointUpdate<C extends Checkpoint>(ckpt: C, u: CheckpointUpdate): C {
  const next = { ...ckpt };
  if (u.watermark !== undefined && (next.watermark === null || u.watermark > next.watermark))
    next.watermark = u.watermark;
  if (u.rewindWatermark !== undefined) next.watermark = u.rewindWatermark;
  if (u.initialDone !== undefined) next.initialDone = u.initialDone;
  if (u.sweep !== undefined) next.sweep = u.sweep;
  if (u.lastSweepAt !== undefined) next.lastSweepAt = u.lastSweepAt;
  if (u.lastIncrementalAt !== undefined) next.lastIncrementalAt = u.lastIncrementalAt;
  if (u.unreadable !== undefined) next.unreadable = u.unreadable;
  if (u.unreadableCandidates !== undefined) next.unreadableCandidates = u.unreadableCandidates;
  if (u.deferredSweeps !== undefined) next.deferredSweeps = u.deferredSweeps;
  if (u.deferredReason !== undefined) next.deferredReason = u.deferredReason;
  return next;
}

/** The checkpoint of an account that has never run. */
export const EMPTY_CHECKPOINT: Checkpoint = {
  watermark: null,
  initialDone: false,
  sweep: null,
  lastSweepAt: null,
  lastIncrementalAt: null,
  unreadable: null,
  unreadableCandidates: null,
  deferredSweeps: 0,
  deferredReason: null,
};
