import { backoffDelay, type BackoffPolicy } from './backoff.js';
import type { LongPassType } from './domain.js';
import type { ErrorKind } from './errors.js';

// The loop's decisions, "what next, and when", as pure functions of what the loop knows and the time: no I/O, no
// clock, no randomness of their own (the jitter's draw is handed in). src/bridge/loop.ts only carries them out, so
// they are unit-tested on a fake clock (test/unit/core/schedule.test.ts) without running a loop.

/** The loop's timing settings the decisions depend on. */
export interface ScheduleTiming {
  /** Time between poll starts, whatever else runs. */
  pollIntervalMs: number;
  /** 0 disables scheduled sweeps (on-demand ones still run). */
  sweepIntervalMs: number;
  leaseTtlMs: number;
  /** Upper bound of the backoff after a failed pass. */
  maxBackoffMs?: number;
  /** Time between heartbeats while leading (0 or absent: none). */
  heartbeatIntervalMs?: number;
}

/** What the loop knows when it picks the next step (times in ms of the loop's clock). */
export interface StepState {
  /**
   * The open full scan (initial load, sweep or resync), whether polls may run beside it, and whether it waits on
   * them (`idle`: a sweep's deletions wait for reads begun after its listing ended; none of its steps run
   * meanwhile); null when none.
   */
  longPass: { type: LongPassType; pollable: boolean; idle?: boolean } | null;
  /** The initial load has completed (the watermark exists, polls run). */
  initialDone: boolean;
  /** When the next poll is due. */
  nextPollAt: number;
  /** A deletion detection underway has a step to run; it yields to polls like a full scan's pages. */
  deletionStepPending?: boolean;
  /** A trailing read is open (src/core/trailing.ts): its next page comes before the long pass's. */
  trailingOpen?: boolean;
  /** When the next trailing read is due (null or absent: none); they run once the initial load is done. */
  trailingDueAt?: number | null;
  /**
   * When the long pass last advanced: its last step (a page or a deletion-detection step) ended, or it opened.
   * Absent: never starved (polls always go first; the loop passes it).
   */
  longPassStepAt?: number;
  /** When the last page of a trailing read ended (absent: none did yet). */
  trailingStepAt?: number;
  /** When the last poll ended (absent: none did yet). */
  polledAt?: number;
}

/** The next thing the leader does. */
export type Step =
  /** An incremental poll; the one after it is due at `nextPollAt`. */
  | { kind: 'poll'; nextPollAt: number }
  /** One page of the open full scan. */
  | { kind: 'scan-page' }
  /** One step of the deletion detection underway. */
  | { kind: 'deletion-step' }
  /** A page of the trailing read open, or the opening of the one due. */
  | { kind: 'trailing-page' }
  /** Nothing to do before `ms` (the next poll, or a lease period so that the loop keeps ticking). */
  | { kind: 'wait'; ms: number };

/**
 * The next step of a leader that is not paused: a due poll first (polls are never starved by a long pass), then a
 * page of the trailing read open or due (a sweep can take hours; a late change's bound must hold meanwhile, and a
 * trailing read is a few pages a period), then a page of deletion detection or of the open full scan (unless it
 * waits on those reads), else a wait until the next poll or trailing read (at most a lease period).
 *
 * Polls that take longer than their interval are due again as soon as they end: first-come, they would starve
 * every other pass for as long as they overran (a burst of changes, a lookback reaching back over the whole
 * listing), and a sweep that never ends never reports a deletion. So the work behind the polls (the trailing read,
 * the long pass) that has waited a whole interval for a step takes one ahead of the due poll: a poll waits at most
 * a page of each, and only when polls run back to back or one of them waited an interval.
 */
export function nextStep(state: StepState, now: number, timing: ScheduleTiming): Step {
  // Incremental polls need a watermark: the initial load's first page sets it (then the scan says `pollable`).
  const pollable = state.initialDone || (state.longPass?.pollable ?? false);
  const trailingAt = state.initialDone ? (state.trailingDueAt ?? null) : null;
  const trailing = state.trailingOpen || (trailingAt !== null && now >= trailingAt);
  const longPass: Step | null = state.deletionStepPending
    ? { kind: 'deletion-step' }
    : state.longPass && state.longPass.idle !== true
      ? { kind: 'scan-page' }
      : null;
  if (pollable && now >= state.nextPollAt) {
    // Since when each piece of work behind the polls has waited (null: none, or not tracked); a trailing read due
    // waits from its due time, or from the last trailing step if later (one that found nothing to read).
    const stepAt = state.trailingStepAt ?? null;
    const dueSince = trailingAt === null ? stepAt : Math.max(trailingAt, stepAt ?? -Infinity);
    const trailingSince = !trailing ? null : state.trailingOpen ? stepAt : dueSince;
    const longPassSince = longPass ? (state.longPassStepAt ?? null) : null;
    const starved = starvedStep(now, timing, state.polledAt ?? null, {
      trailing: trailingSince,
      longPass: longPassSince,
    });
    if (starved === 'trailing') return { kind: 'trailing-page' };
    if (starved === 'long-pass' && longPass) return longPass;
    return { kind: 'poll', nextPollAt: now + timing.pollIntervalMs };
  }
  if (trailing) return { kind: 'trailing-page' };
  if (longPass) return longPass;
  const until = Math.min(state.nextPollAt, trailingAt ?? Infinity) - now;
  return { kind: 'wait', ms: Math.max(0, Math.min(until, timing.leaseTtlMs / 3)) };
}

/**
 * Which work behind the polls goes ahead of a due poll, or null. Work starves when it has waited a whole interval
 * (`since`: the long pass since its last step or its opening, an open trailing read since its last page, one due
 * since it was due) and through the last poll (`polledAt`: it took no step since); of the starved, the one waiting
 * longer goes. So a due poll waits at most one step of each, however long the steps take.
 */
function starvedStep(
  now: number,
  timing: ScheduleTiming,
  polledAt: number | null,
  since: { trailing: number | null; longPass: number | null },
): 'trailing' | 'long-pass' | null {
  const starved = (at: number | null): at is number =>
    at !== null && polledAt !== null && at < polledAt && now - at >= timing.pollIntervalMs;
  const { trailing, longPass } = since;
  if (starved(trailing) && !(starved(longPass) && longPass < trailing)) return 'trailing';
  return starved(longPass) ? 'long-pass' : null;
}

/** What the checkpoint says, read between full scans, for deciding whether one opens. */
export interface ScanCheckpoint {
  initialDone: boolean;
  /** A full scan was under way when the checkpoint was written (it resumes). */
  scanInProgress: boolean;
  /** When the last sweep completed (null: never). */
  lastSweepAt: number | null;
}

/** Why a full scan (initial load or sweep) opens now, or null when none should. */
export type ScanReason = 'initial' | 'resume' | 'requested' | 'due' | null;

/**
 * Whether an initial load or a sweep opens now: the initial load until it is done, a scan the checkpoint has under
 * way, an operator's request, or the sweep interval elapsed since the last sweep. When this is null the loop may
 * take a pending resync instead.
 */
export function scanToOpen(ckpt: ScanCheckpoint, requested: boolean, now: number, timing: ScheduleTiming): ScanReason {
  if (!ckpt.initialDone) return 'initial';
  if (ckpt.scanInProgress) return 'resume';
  if (requested) return 'requested';
  if (sweepDue(ckpt.lastSweepAt, now, timing)) return 'due';
  return null;
}

/** Whether a scheduled sweep is due: sweeps are on and the interval has elapsed since the last one completed. */
export function sweepDue(lastSweepAt: number | null, now: number, timing: ScheduleTiming): boolean {
  return timing.sweepIntervalMs > 0 && lastSweepAt !== null && now - lastSweepAt >= timing.sweepIntervalMs;
}

/** How often the leader reads the pause flag: pause and resume take effect within this time. */
export const PAUSE_CHECK_MS = 1_000;

/** Whether the pause flag must be read again (it is cached between reads, not read on every page). */
export function pauseCheckDue(checkedAt: number, now: number): boolean {
  return now - checkedAt >= PAUSE_CHECK_MS;
}

/** How long a paused leader waits before looking again (no upstream request while paused). */
export function pausedWaitMs(timing: ScheduleTiming): number {
  return Math.min(timing.pollIntervalMs, PAUSE_CHECK_MS);
}

/** How long a standby waits before trying the lease again. */
export function standbyWaitMs(timing: ScheduleTiming): number {
  return timing.leaseTtlMs / 3;
}

/** Whether a heartbeat is due (heartbeats on, the time come, none in flight). */
export function heartbeatDue(nextHeartbeatAt: number, inFlight: boolean, now: number, timing: ScheduleTiming): boolean {
  const interval = timing.heartbeatIntervalMs ?? 0;
  return interval > 0 && now >= nextHeartbeatAt && !inFlight;
}

/** Backoff after failed passes: 1 s doubling to 30 s (or the configured cap), never below half the step. */
export const PASS_BACKOFF: BackoffPolicy = { baseMs: 1_000, capMs: 30_000, jitter: 'equal' };

/**
 * Backoff while Redis lacks the replica a write must reach (after a failover, until the old primary has resynced
 * as the new one's replica): nothing is wrong with the work, so retry at a short flat pace instead of backing off
 * to 30 s, or the bridge would stay idle long after the replica is back. WAIT itself already waits its timeout.
 */
export const REPLICA_BACKOFF: BackoffPolicy = { baseMs: 250, capMs: 1_000, jitter: 'equal' };

/** The pause after the account's keys vanished from Redis, before the account is taken anew and restored. */
export const RESTORE_PAUSE_MS = 100;

/** The run of failures since the last step that succeeded. */
export interface FailureRun {
  /** Consecutive failures (0: the last step succeeded). */
  count: number;
  /** The kind of the last one ('other' for an error outside the model). */
  kind: ErrorKind | 'other';
}

/** No failure since the last success. */
export const NO_FAILURE: FailureRun = { count: 0, kind: 'other' };

/** The run after one more failure of `kind`. */
export function failed(run: FailureRun, kind: ErrorKind | 'other'): FailureRun {
  return { count: run.count + 1, kind };
}

/** What the loop does after a failure. */
export type Recovery =
  /**
   * Ready the leadership again before the next pass, after `ms`: fence the producer and bring Redis up to the
   * changelog (the account's keys vanished from Redis, or a Kafka commit may have landed unseen).
   */
  | { kind: 'restore'; ms: number }
  /** Back off `ms`, then try again. */
  | { kind: 'retry'; ms: number };

/**
 * What to do after the failure run `run` (its count already includes the last failure): restore after lost keys,
 * a short flat retry while a Redis replica is awaited, otherwise exponential backoff with equal jitter capped at
 * maxBackoffMs; after a Kafka commit of unknown outcome, that backoff, then the leadership readied again (its commit
 * may have landed: the changelog, not a second derivation, must say what it held). `random` is the jitter's draw
 * in [0, 1).
 */
export function recovery(run: FailureRun, timing: ScheduleTiming, random: number): Recovery {
  if (run.kind === 'snapshot_lost') return { kind: 'restore', ms: RESTORE_PAUSE_MS };
  const attempt = Math.max(0, run.count - 1);
  if (run.kind === 'replication') return { kind: 'retry', ms: backoffDelay(attempt, REPLICA_BACKOFF, () => random) };
  const capMs = timing.maxBackoffMs ?? PASS_BACKOFF.capMs;
  const ms = backoffDelay(attempt, { ...PASS_BACKOFF, capMs }, () => random);
  return { kind: run.kind === 'commit_unknown' ? 'restore' : 'retry', ms };
}
