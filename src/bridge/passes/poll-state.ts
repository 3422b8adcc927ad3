import { Lookback, type LookbackSettings } from '../../core/lookback.js';

// What incremental polls keep between them in one leadership: the learned lookback (src/core/lookback.ts), how long
// the last poll paged, and whether polls fit their interval. Kept in memory: a new leader learns the lateness again
// (from the floor), and starts with a generous paging allowance since it does not know how long its predecessor's
// last poll paged.

/** The paging allowance of a leadership's first poll (ms): the previous leader's last poll may have paged this long. */
export const FIRST_POLL_ALLOWANCE_MS = 30_000;

/** Settings of the polls of one account. */
export interface PollSettings extends LookbackSettings {
  /** POLL_INTERVAL_MS: a poll that takes longer does not fit its interval. */
  intervalMs: number;
}

/** The polls' memory between polls. */
export class PollState {
  readonly lookback: Lookback;
  /** Duration (ms) of the last committed poll: a change made while it paged may sit behind its watermark. */
  private lastDurationMs: number | null = null;
  /** The watermark the last committed poll covered (null before the first). */
  private covered: number | null = null;
  /** Whether the polls have been taking longer than their interval (one log line per episode). */
  overrunning = false;

  constructor(readonly settings: PollSettings) {
    this.lookback = new Lookback(settings);
  }

  /**
   * Where the next poll starts: the watermark, less the learned lookback and the last poll's paging time (a change
   * made while a poll paged, behind its position in an unknown sort order, is older than its watermark by at most
   * that). Never earlier than the watermark less POLL_OVERLAP_MS, except for the paging time.
   */
  since(watermark: number, now: number): number {
    return Math.max(0, watermark - this.lookback.current(now) - this.pagingAllowance());
  }

  /**
   * The updated_date below which a change the next poll finds was late. Not the watermark itself: a change made
   * while the last poll paged may sit up to its paging time behind that poll's watermark without having been late
   * (the listing's order is not updated_date's), and counting it would teach the lookback twice the paging time,
   * making each poll longer still under a sustained stream of changes.
   */
  lateBefore(watermark: number): number {
    return watermark - this.pagingAllowance();
  }

  /**
   * The updated_date below which a change a sweep finds was missed by polls (it was older than what they covered
   * when it became visible): null before any poll.
   */
  missedBefore(now: number): number | null {
    return this.covered === null ? null : this.covered - this.lookback.current(now) - (this.lastDurationMs ?? 0);
  }

  /** How long the last poll paged (ms); a leadership's first poll allows a predecessor's unknown paging. */
  private pagingAllowance(): number {
    return this.lastDurationMs ?? Math.min(this.settings.ceilingMs, FIRST_POLL_ALLOWANCE_MS);
  }

  /** A poll that began at `startedAt` committed watermark `covered` at `now`; resolves whether it overran. */
  committed(covered: number, startedAt: number, now: number): boolean {
    this.covered = covered;
    this.lastDurationMs = Math.max(0, now - startedAt);
    return this.lastDurationMs > this.settings.intervalMs;
  }
}
