import { Lookback, type LookbackSettings } from '../../core/lookback.js';
import { TrailingSchedule, trailingTiers } from '../../core/trailing.js';
import { allotShares, boundOnShareMs, tierDemandRps, type TrailingLoad } from '../../core/trailing-shares.js';
import { cappedWatermark, DataPresent, movesWatermark } from '../../core/upstream-present.js';

// What incremental polls keep between them in one leadership: the learned lookback (src/core/lookback.ts), the
// watermarks the last poll started from and committed and how long it paged (the paging allowance), whether polls
// fit their interval, the data's present (src/core/upstream-present.ts) and the trailing reads' schedule
// (src/core/trailing.ts). Kept in memory: a new leader learns the lateness again
// (from the floor), and starts with a generous paging allowance since it does not know how long its predecessor's
// last poll paged.

/** The paging allowance of a leadership's first poll (ms): the previous leader's last poll may have paged this long. */
export const FIRST_POLL_ALLOWANCE_MS = 30_000;

/** Settings of the polls of one account. */
export interface PollSettings extends LookbackSettings {
  /** POLL_INTERVAL_MS: a poll that takes longer does not fit its interval. */
  intervalMs: number;
  /** FRESHNESS_BOUND_MS: the widest trailing read's period (0 or absent: no trailing reads). */
  freshnessBoundMs?: number;
  /** Reviews the rate budget reads in one poll interval (absent: the learned lookback is not capped by it). */
  readsPerInterval?: number;
  /** UPSTREAM_PAGE_SIZE: prices the trailing tiers' shares in requests (absent: the tiers weigh the same). */
  pageSize?: number;
}

/** Each trailing tier's share of the budget the polls leave, and the bound it keeps on it (src/core/trailing-shares.ts). */
export interface TrailingAllotment {
  /** Requests a second left to trailing reads: the rate budget less what polls take at the density they see. */
  budgetRps: number;
  /** Narrowest first. */
  tiers: Array<{ demandRps: number; shareRps: number; boundOnShareMs: number }>;
}

/**
 * The share of an interval's rate budget a poll's lookback may cost: a lookback learned from late changes (by
 * trailing reads and sweeps too) must not make every poll read seconds of changes at high rates; the trailing reads
 * keep the bound for what it leaves out.
 */
export const LOOKBACK_BUDGET_SHARE = 0.25;

/** The polls' memory between polls. */
export class PollState {
  readonly lookback: Lookback;
  /** The upstream's present in its data's clock: what caps the watermark. */
  readonly present = new DataPresent();
  /** When the trailing reads' tiers read next. */
  readonly trailing: TrailingSchedule;
  /** Duration (ms) of the last committed poll: a change made while it paged may sit behind its watermark. */
  private lastDurationMs: number | null = null;
  /** The watermark the last committed poll covered (null before the first). */
  private covered: number | null = null;
  /** The watermark the last committed poll started from (its `covered` before it; null before the first). */
  private coveredBefore: number | null = null;
  /** Local time the last committed poll began (null before the first). */
  private lastStartedAt: number | null = null;
  /**
   * Whether the last poll ran after the initial load: before, what reads find are reviews the load has not reached
   * (old ones too), not changes, and no sample of the upstream's present.
   */
  loaded = false;
  /** Whether the polls have been taking longer than their interval (one log line per episode). */
  overrunning = false;
  /** Whether the trailing reads have been missing their bound (one log line per episode). */
  trailingBehind = false;
  /** Reviews polls read per millisecond of updated_date they covered (smoothed), null before a poll. */
  private density: number | null = null;
  /** The tiers' shares as last allotted (null: not priced yet, the tiers weigh the same). */
  private allotment: TrailingAllotment | null = null;

  constructor(readonly settings: PollSettings) {
    this.lookback = new Lookback(settings);
    const { ceilingMs: overlapMs, freshnessBoundMs: boundMs = 0, intervalMs: pollIntervalMs } = settings;
    this.trailing = new TrailingSchedule(trailingTiers({ overlapMs, boundMs, pollIntervalMs }));
  }

  /**
   * The upstream's present at local time `now`: no watermark passes it, and polls and trailing reads start from no
   * later (a watermark committed further ahead, by an earlier version or a restore of its checkpoint, is not
   * trusted). `headerAt`: the Date header's time then (null: none seen).
   */
  presentCap(now: number, headerAt: number | null): number {
    return this.present.at(now, headerAt);
  }

  /**
   * What a poll that began at local time `startedAt` covers whatever it reads: the data's present then, once learned
   * from PRESENT_MIN_SAMPLES reviews (null before, or before the initial load is done). Everything stamped before it
   * and listed when the poll read its page is read by that poll, so in a quiet spell the watermark moves up to it and
   * the next poll no longer reads the last burst again (issue 48's `bursts`: a burst within the lookback floor behind a
   * quiet watermark was read again by every poll, 14 pages against a 2 s interval, for minutes, and a sweep behind
   * them reported a deletion 28 s past its bound). Not before the present is learned: the Date header and local time
   * may run ahead of the data (see upstream-present.ts), and a watermark past the data's present hides changes.
   */
  coveredAtStart(startedAt: number, headerAt: number | null): number | null {
    if (!this.loaded || this.present.offset() === null) return null;
    return this.present.at(startedAt, headerAt);
  }

  /**
   * The newest of a page's reviews' updated_dates that may move a watermark (movesWatermark: none past the present
   * at local time `now`), or null; polls, the initial load and its search for a recent change all count stamps so.
   */
  newestMoving(reviews: ReadonlyArray<{ updated_date: number }>, now: number, headerAt: number | null): number | null {
    const cap = this.presentCap(now, headerAt);
    let newest: number | null = null;
    for (const r of reviews)
      if (movesWatermark(r.updated_date, cap)) newest = Math.max(newest ?? r.updated_date, r.updated_date);
    return newest;
  }

  /** The watermark a read that saw updated_dates up to `maxSeen` may commit (see cappedWatermark). */
  watermarkOf(maxSeen: number, now: number, headerAt: number | null): number {
    return cappedWatermark(maxSeen, this.present.at(now, headerAt));
  }

  /**
   * Where the next poll starts: the learned lookback before `pagedFrom(watermark)`, so that a change made while the
   * last poll paged, behind its position in an unknown sort order, is read too. Never earlier than the watermark
   * less POLL_OVERLAP_MS, except for the paging allowance.
   */
  since(watermark: number, now: number): number {
    return Math.max(0, this.pagedFrom(watermark) - this.lookbackMs(now));
  }

  /**
   * The updated_date below which no change made while the last poll paged is stamped: the data's present when that
   * poll began, or less. Two bounds on that present, taken from stamps polls read (not from DataPresent's estimate,
   * which runs late by up to a poll's paging since it learns from changes made while polls paged, nor from a Date
   * header, which may run minutes ahead of the data): the watermark that poll started from (stamped before it began),
   * and its own watermark less its paging time (stamped before it ended). In a quiet spell the first is the
   * watermark itself, so the window no longer grows with the last poll's duration (a poll reading a burst again,
   * longer than its interval, made the next one start earlier still: issue 48's `bursts`). A leadership's first
   * poll does not know its predecessor's last poll: FIRST_POLL_ALLOWANCE_MS before the watermark.
   */
  private pagedFrom(watermark: number): number {
    if (this.covered === null || this.coveredBefore === null || this.lastDurationMs === null) {
      return watermark - Math.min(this.settings.ceilingMs, FIRST_POLL_ALLOWANCE_MS);
    }
    return Math.min(watermark, Math.max(this.coveredBefore, this.covered - this.lastDurationMs));
  }

  /**
   * The lookback polls use (ms): the learned one, but no more than a poll reads with LOOKBACK_BUDGET_SHARE of an
   * interval's rate budget at the density of changes polls have seen (never below the floor; POLL_LOOKBACK=fixed
   * is not capped: the operator chose it).
   */
  lookbackMs(now: number): number {
    const learned = this.lookback.current(now);
    const { readsPerInterval, mode, floorMs } = this.settings;
    if (mode === 'fixed' || !readsPerInterval || this.density === null || !(this.density > 0)) return learned;
    const affordable = (LOOKBACK_BUDGET_SHARE * readsPerInterval) / this.density - this.pagingAllowance();
    return Math.min(learned, Math.max(floorMs, Math.round(affordable)));
  }

  /** A poll read `reviews` over `windowMs` of updated_date: the density that prices the lookback. */
  read(reviews: number, windowMs: number): void {
    const density = reviews / Math.max(windowMs, this.settings.intervalMs);
    this.density = this.density === null ? density : this.density + (density - this.density) * 0.3;
  }

  /**
   * The updated_date below which a change the next poll finds was late: `pagedFrom(watermark)`. Not the watermark
   * itself: a change made while the last poll paged may sit behind that poll's watermark (up to its paging time)
   * without having been late (the listing's order is not updated_date's), and counting it would teach the lookback
   * twice the paging time, making each poll longer still under a sustained stream of changes. In a quiet spell it
   * is the watermark: nothing was made while the last poll paged.
   */
  lateBefore(watermark: number): number {
    return this.pagedFrom(watermark);
  }

  /**
   * The updated_date below which a change a sweep finds was missed by polls (it was older than what they covered
   * when it became visible): null before any poll.
   */
  missedBefore(now: number): number | null {
    return this.covered === null ? null : this.pagedFrom(this.covered) - this.lookbackMs(now);
  }

  /**
   * Splits the budget the polls leave among the trailing tiers at the density polls see (src/core/trailing-shares.ts)
   * and hands the shares to the schedule; null (and equal weights) until a poll priced it or without a page size.
   */
  allotTrailing(now: number): TrailingAllotment | null {
    const { readsPerInterval, pageSize, intervalMs } = this.settings;
    if (!readsPerInterval || !pageSize || this.density === null || this.trailing.tiers.length === 0) return null;
    const load: TrailingLoad = { changesPerSecond: this.density * 1000, pageSize };
    const rps = (readsPerInterval / pageSize) * (1000 / intervalMs);
    const pollWindowMs = intervalMs + this.lookbackMs(now) + this.pagingAllowance();
    const pollRps = Math.max(1, Math.ceil((this.density * pollWindowMs) / pageSize)) * (1000 / intervalMs);
    const budgetRps = Math.max(0, rps - pollRps);
    const demands = this.trailing.tiers.map((t) => tierDemandRps(t, load));
    const shares = allotShares(budgetRps, demands);
    this.trailing.allot(shares);
    this.allotment = {
      budgetRps,
      tiers: this.trailing.tiers.map((t, i) => ({
        demandRps: demands[i]!,
        shareRps: shares[i]!,
        boundOnShareMs: boundOnShareMs(t, shares[i]!, load),
      })),
    };
    return this.allotment;
  }

  /** The tiers' shares as last allotted (null: not yet). */
  lastAllotment(): TrailingAllotment | null {
    return this.allotment;
  }

  /**
   * The updated_date below which a change a trailing read finds was late, as a poll would count it: older than what
   * polls have covered (less the last poll's paging time, see lateBefore), though polls have not delivered it. Not
   * missedBefore: a trailing read that comes before the next poll to a change within the polls' lookback finds a
   * late change too. Null before any poll.
   */
  trailingLateBefore(): number | null {
    return this.covered === null ? null : this.lateBefore(this.covered);
  }

  /**
   * Whether a poll, and with `late` a read of the widest trailing tier too, has begun since local time `at` and
   * committed: everything the listing showed at `at` within the polls' lookback (with `late`, up to POLL_OVERLAP_MS
   * late) has been read (a sweep's deletions wait for it: see sweep-deletions.ts). A read that began at `at` itself
   * does not count (it may have paged before it).
   */
  readSince(at: number, late: boolean): boolean {
    const polled = this.lastStartedAt !== null && this.lastStartedAt > at;
    return polled && (!late || this.trailing.readSince(at));
  }

  /** Asks for a read of the widest trailing tier begun after local time `at` as soon as none is open (see hurry). */
  hurryTrailing(at: number): void {
    this.trailing.hurry(at);
  }

  /** How far (ms) the next poll reads behind the watermark for changes made while the last one paged (see pagedFrom). */
  private pagingAllowance(): number {
    const watermark = this.covered ?? 0;
    return watermark - this.pagedFrom(watermark);
  }

  /**
   * A poll that started from watermark `from`, began at `startedAt`, committed watermark `covered` at `now`;
   * resolves whether it overran.
   */
  committed(from: number, covered: number, startedAt: number, now: number): boolean {
    this.coveredBefore = from;
    this.covered = covered;
    this.lastStartedAt = startedAt;
    this.lastDurationMs = Math.max(0, now - startedAt);
    return this.lastDurationMs > this.settings.intervalMs;
  }
}
