// Trailing reads: incremental reads of wider windows behind the polls, at longer periods, so that a change that
// becomes visible late (its updated_date older than what polls had covered when it showed) is delivered within a
// bound after it shows, without waiting for a sweep. A read of a window W every T seconds reads each change W / T
// times, so the tiers cover lateness in steps of TIER_RATIO: the widest covers POLL_OVERLAP_MS at the bound
// (FRESHNESS_BOUND_MS), each narrower one a TIER_RATIO-th of the one above at a TIER_RATIO-th of its coverage (a
// change is read 1 + TIER_RATIO times by each of them), so reads per change grow with the logarithm of the lateness
// covered, and a change a little late is delivered sooner than the bound.
//
// Each read starts where the same tier's previous read began, less the lateness it covers, whenever it runs: a
// read held back (the budget went to polls and sweeps) reads a longer window and the bound stretches to the time
// between the two reads plus the read's own, which is measured and reported (never dropped). A read also serves
// every narrower tier whose own window it covered.
//
// Each tier has its own share of the budget (src/core/trailing-shares.ts): every tier may have a read open at once,
// and the loop steps their pages in proportion to the shares (stride scheduling: a page of tier k advances its
// virtual time by 1 / share_k, and the open or due tier furthest behind goes next), so a wide tier's long read no
// longer holds a narrow one back, nor the reverse. A tier that comes back after idling starts level with the open
// ones: it does not bank the pages it did not need.

/** Each tier covers this many times less lateness than the one above, at this many times its coverage per period. */
export const TIER_RATIO = 4;
/** A tier read more often than this many poll intervals is left to the polls' learned lookback. */
export const MIN_PERIOD_POLLS = 4;

/** What the tiers derive from. */
export interface TrailingSettings {
  /** POLL_OVERLAP_MS: the widest tier covers changes this late. */
  overlapMs: number;
  /** FRESHNESS_BOUND_MS: the widest tier's period (0: no trailing reads). */
  boundMs: number;
  /** POLL_INTERVAL_MS. */
  pollIntervalMs: number;
}

/** One tier of trailing reads. */
export interface Tier {
  /** 1 for the narrowest; metric labels say `trailing_<index>`. */
  index: number;
  /** The most lateness (ms) a change may have and be found by this tier. */
  coverMs: number;
  /** How often (ms) it reads, when the budget allows. */
  periodMs: number;
}

/** The tiers of the settings, narrowest first (none when the bound is 0 or there is nothing to cover). */
export function trailingTiers(s: TrailingSettings): Tier[] {
  if (!(s.boundMs > 0) || !(s.overlapMs > 0)) return [];
  const wideFirst: Array<{ coverMs: number; periodMs: number }> = [{ coverMs: s.overlapMs, periodMs: s.boundMs }];
  for (;;) {
    const coverMs = wideFirst.at(-1)!.coverMs / TIER_RATIO;
    const periodMs = Math.min(s.boundMs, coverMs / TIER_RATIO);
    if (periodMs < MIN_PERIOD_POLLS * s.pollIntervalMs) break;
    wideFirst.push({ coverMs: Math.round(coverMs), periodMs: Math.round(periodMs) });
  }
  return wideFirst.reverse().map((t, i) => ({ index: i + 1, ...t }));
}

/** Where a tier's reads stand. */
interface TierState {
  tier: Tier;
  /** The upstream's present (data clock) when the last read serving this tier began; null before any. */
  startedPresent: number | null;
  /** Local time that read began (ms); the next is due a period later. */
  startedAt: number | null;
  /** The bound (ms) the last read kept: time since the read before it began, plus its own duration. */
  keptMs: number | null;
  /** The last read of this tier itself: where it read from, and what polls had covered when it began. */
  last: { since: number; covered: number } | null;
  /** Virtual time: pages read divided by the tier's weight (its share). */
  pass: number;
  /** Its share of the trailing budget, as a weight (only ratios count). */
  weight: number;
}

/** A trailing read about to run: its tier and the updated_date it reads from. */
export interface TrailingRead {
  tier: Tier;
  since: number;
}

/** When each tier reads next, and what it read last. */
export class TrailingSchedule {
  private readonly states: TierState[];
  /** A read of the widest tier begun after this local time is wanted at once (see hurry); null: none. */
  private hurriedAfter: number | null = null;

  constructor(readonly tiers: readonly Tier[]) {
    this.states = tiers.map((tier) => ({
      tier,
      startedPresent: null,
      startedAt: null,
      keptMs: null,
      last: null,
      pass: 0,
      weight: 1,
    }));
  }

  /** Local time (ms) the next read of a tier without one `open` is due, or null when there is none. */
  nextDueAt(open: ReadonlySet<number> = new Set()): number | null {
    let at: number | null = null;
    for (const s of this.states) {
      if (open.has(s.tier.index)) continue;
      at = at === null ? this.dueAt(s) : Math.min(at, this.dueAt(s));
    }
    return at;
  }

  /**
   * The read due at local time `now` among the tiers without one `open` (the most overdue tier; the widest of
   * equals, which serves the others), or null: `present` is the upstream's present then, from which a tier's first
   * read reaches back.
   */
  due(now: number, present: number, open: ReadonlySet<number> = new Set()): TrailingRead | null {
    let best: TierState | null = null;
    for (const s of this.states) {
      if (open.has(s.tier.index) || this.dueAt(s) > now) continue;
      if (best === null || this.dueAt(s) <= this.dueAt(best)) best = s;
    }
    return best === null ? null : { tier: best.tier, since: this.since(best, present) };
  }

  /** The read tier `index` would start now (`present`: the upstream's present), or null without such a tier. */
  readFor(index: number, present: number): TrailingRead | null {
    const s = this.states.find((x) => x.tier.index === index);
    return s ? { tier: s.tier, since: this.since(s, present) } : null;
  }

  /**
   * Sets each tier's share of the trailing budget (requests/s, narrowest first): the weights of turn(). Shares that
   * are all 0 (the polls take the whole budget) weigh the tiers equally: trailing reads then go on the spare
   * requests the limiter still has, in turn.
   */
  allot(shares: readonly number[]): void {
    const usable = shares.length === this.states.length && shares.every((x) => Number.isFinite(x) && x >= 0);
    const total = usable ? shares.reduce((a, b) => a + b, 0) : 0;
    this.states.forEach((s, i) => {
      // A tier allotted nothing while others have a share still gets a sliver, so it is never starved outright.
      s.weight = total > 0 ? Math.max(shares[i]!, total * 1e-3) : 1;
    });
  }

  /**
   * Whose page goes next at local time `now`: among the tiers with a read `open` and those due, the one furthest
   * behind in virtual time (a tier not open counts from the open ones' least, so idling banks nothing). Of equals, a
   * due read opens before an open one goes on (else a tier coming due would tie with the open ones for ever), and
   * the widest goes first (at the start, with nothing open, it serves the others). Null when none is open or due.
   */
  turn(now: number, open: ReadonlySet<number>): number | null {
    let floor = Infinity;
    for (const s of this.states) if (open.has(s.tier.index)) floor = Math.min(floor, s.pass);
    let best: { index: number; pass: number; isOpen: boolean } | null = null;
    for (const s of this.states) {
      const isOpen = open.has(s.tier.index);
      if (!isOpen && this.dueAt(s) > now) continue;
      const pass = isOpen || floor === Infinity ? s.pass : Math.max(s.pass, floor);
      const better = best === null || pass < best.pass || (pass === best.pass && (best.isOpen || !isOpen)); // later: wider
      if (better) best = { index: s.tier.index, pass, isOpen };
    }
    return best?.index ?? null;
  }

  /** A read of tier `index` opened while others were `open`: it starts level with them (see turn). */
  opened(index: number, open: ReadonlySet<number>): void {
    let floor = Infinity;
    for (const s of this.states) if (s.tier.index !== index && open.has(s.tier.index)) floor = Math.min(floor, s.pass);
    const own = this.states.find((s) => s.tier.index === index);
    if (own && floor !== Infinity) own.pass = Math.max(own.pass, floor);
  }

  /** A page of tier `index` was read: its virtual time advances by the inverse of its share. */
  paged(index: number): void {
    const own = this.states.find((s) => s.tier.index === index);
    if (own) own.pass += 1 / own.weight;
  }

  /**
   * A read from `since` that began at local time `startedAt` (upstream present `startedPresent`; polls had covered
   * `covered`) committed at `finishedAt`: it served its tier and every narrower one whose window it covered.
   */
  completed(
    read: TrailingRead,
    startedAt: number,
    startedPresent: number,
    finishedAt: number,
    covered: number = startedPresent,
  ): void {
    const own = this.states.find((s) => s.tier === read.tier);
    if (own) own.last = { since: read.since, covered };
    for (const s of this.states) {
      if (s.tier !== read.tier && (s.tier.coverMs > read.tier.coverMs || this.since(s, startedPresent) < read.since)) {
        continue;
      }
      // A read begun later already served it (reads of several tiers run side by side): this one says nothing newer.
      if (s.startedAt !== null && startedAt < s.startedAt) continue;
      const previous = s.startedAt ?? startedAt - s.tier.periodMs;
      s.keptMs = Math.max(0, startedAt - previous) + Math.max(0, finishedAt - startedAt);
      s.startedAt = startedAt;
      s.startedPresent = startedPresent;
    }
  }

  /** The bound (ms) each tier's last read kept, narrowest first (null: none yet). */
  kept(): Array<{ tier: Tier; keptMs: number | null }> {
    return this.states.map((s) => ({ tier: s.tier, keptMs: s.keptMs }));
  }

  /**
   * The bound (ms) that holds now for a change up to POLL_OVERLAP_MS late: the widest tier's (see holdingByTier).
   * Null without tiers or reads.
   */
  holding(now: number): number | null {
    return this.holdingByTier(now).at(-1)?.holdingMs ?? null;
  }

  /**
   * The bound (ms) that holds now for each tier, narrowest first: its last kept bound, or, while its next read is
   * overdue or still reading (a tier short of budget), how long it has waited since its last began: a change shown
   * just after that has waited as long, so the reported bound never lags the one that holds. Null before a read.
   */
  holdingByTier(now: number): Array<{ tier: Tier; holdingMs: number | null }> {
    return this.states.map((s) => ({
      tier: s.tier,
      holdingMs: s.startedAt === null ? null : Math.max(s.keptMs ?? 0, now - s.startedAt),
    }));
  }

  /**
   * How late (ms) a change stamped `stamp` that a read found showed, at least: the last read whose window held its
   * stamp did not find it, so it showed after that read began, when polls had covered more than its stamp. 0 when no
   * read tells.
   */
  latenessAtLeast(stamp: number): number {
    let covered = -Infinity;
    for (const s of this.states) if (s.last && s.last.since <= stamp) covered = Math.max(covered, s.last.covered);
    return Math.max(0, covered - stamp);
  }

  /**
   * Whether the widest tier's last read began after local time `at` (and so read every change the listing showed
   * then up to its lateness); true without tiers (there is nothing to wait for).
   */
  readSince(at: number): boolean {
    const widest = this.states.at(-1);
    return widest === undefined || (widest.startedAt !== null && widest.startedAt > at);
  }

  /**
   * Asks for a read of the widest tier begun after local time `at` (a sweep's deletions wait for one): until one
   * has completed, the widest tier is due as soon as it has no read open, its period not waited. The wait for it is
   * then at most the rest of the read under way plus one read, each within the bound the tier reports.
   */
  hurry(at: number): void {
    this.hurriedAfter = Math.max(this.hurriedAfter ?? -Infinity, at);
  }

  /** Forgets every read (a new leadership: what the last one delivered is not known here). */
  reset(): void {
    this.hurriedAfter = null;
    for (const s of this.states) {
      s.startedAt = null;
      s.startedPresent = null;
      s.keptMs = null;
      s.last = null;
      s.pass = 0;
    }
  }

  private dueAt(s: TierState): number {
    if (s.startedAt === null) return -Infinity;
    const regular = s.startedAt + s.tier.periodMs;
    // Due just after `at` (a read begun at `at` itself does not count), not at it: a read at once would not serve.
    const hurried = this.hurriedAfter !== null && s === this.states.at(-1) && s.startedAt <= this.hurriedAfter;
    return hurried ? Math.min(this.hurriedAfter! + 1, regular) : regular;
  }

  /** Where the tier's next read starts: where its last began less its coverage (first: a period further back). */
  private since(s: TierState, present: number): number {
    const from = s.startedPresent ?? present - s.tier.periodMs;
    return Math.max(0, from - s.tier.coverMs);
  }
}
