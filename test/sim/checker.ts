import type { BridgeConfig } from '../../src/config/config.js';
import { STATUS_FIELDS, type Review } from '../../src/core/review.js';
import { CHANGELOG_TXN_HEADER, CHECKPOINT_RECORD_KEY, decodeChangelogRecord } from '../../src/core/changelog.js';
import { DEPLOYMENT_HEADER } from '../../src/core/identity.js';
import { recordDigest } from '../../src/core/record-digest.js';
import { PRESENT_MIN_SAMPLES } from '../../src/core/upstream-present.js';
import { MAX_CONFIRMATION_READS } from '../../src/bridge/passes/sweep-deletions.js';
import { decodeEntry, type SnapshotEntry } from '../../src/core/snapshot-entry.js';
import { accountKeys } from '../../src/redis/connection.js';
import { BUCKET_BITS } from '../../src/redis/store-common.js';
import { MARKER_KEY } from '../../src/kafka/encoding.js';
import { rejectId } from '../../src/upstream/validate.js';
import { SIM_ENV } from './deployment.js';
import type { SimKafka, SimRecord, SimTxn } from './kafka.js';
import type { SimRedisServer } from './redis.js';
import { PAGE_LATENCY_MS, type SimUpstream } from './upstream.js';

// The contract (docs/guarantees.md) checked on what a read_committed consumer of a deployment's topics sees once
// the schedule is over, and on what the deployment leaves in Redis and the changelog: the properties below, in this
// order; the first one violated is the schedule's verdict. Progress is checked against the schedule's fault windows:
// once every fault has healed for HEAL_BOUND_MS, a version visible upstream must be published within
// VERSION_BOUND_MS, and a deletion within DELETION_BOUND_MS (not only at the end of the quiet tail).

/** The properties, in the order they are checked. */
export const PROPERTIES = [
  'no id twice',
  'no conflicting ids',
  'nothing invented',
  'no second review.created',
  'sequence without gaps or restarts',
  'nothing goes backwards',
  'deletions only of reviews gone upstream',
  'every version published',
  'every final state reached',
  'each dead letter once',
  'state topic equals the upstream',
  'changelog transactions in commit order',
  'Redis equals the changelog',
] as const;

/** One property. */
export type Property = (typeof PROPERTIES)[number];

/** A violated property, with what shows it. */
export interface Violation {
  deployment: string;
  property: Property;
  detail: string;
}

/**
 * How long after a fault ends (world ms) the deployment may still be recovering: a lease running out (10 s), the
 * pass backoff's cap (30 s), a restore. Outside these windows the deployment is healthy.
 */
export const HEAL_BOUND_MS = 45_000;
/** A version visible this long while the deployment is healthy must be published within this long (ms). */
export const VERSION_BOUND_MS = 12_000;
/**
 * A version on time (see ON_TIME_LATENESS_MS) is published within this long of healthy listing (ms): three poll
 * intervals (the simulation's POLL_INTERVAL_MS is 2 s): the next poll, its pages and commit, and a poll more. The
 * product's contract is the next poll (docs/guarantees.md, freshness); what polls miss waits for a trailing read
 * (every FRESHNESS_BOUND_MS, 30 s) and breaks this. Measured: at most 2.7 s over 2,020 such versions of 300
 * schedules (seed 4801).
 */
export const ON_TIME_BOUND_MS = 6_000;
// (Where the world makes polls page past their interval, this bound, VERSION_BOUND_MS, LATE_BOUND_MS and
// DELETION_BOUND_MS grow by that paging: Paging, below.)
/**
 * A version is on time when it is stamped past the upstream's present (polls read it again until time reaches it:
 * docs/guarantees.md, its event goes out at once), or shows at most this far (ms) behind the upstream's present
 * (updated_date: the data's clock). Half of POLL_LOOKBACK_MIN_MS (1 s), a margin within the floor: polls start the
 * lookback (at least that floor) and their paging allowance before the watermark, which is at most the newest stamp
 * they read or the data's present when they began, as the bridge learns it, never ahead of the data's clock
 * (src/core/upstream-present.ts). Schedule seeds 943 (a change shown 487 ms after its stamp, with one stamped 4
 * minutes ahead listed, missed: the cap was the present plus the floor), 308 (a review stamped ahead, changed three
 * times, three of five samples of the present) and 330091 of date-header-apart (a header an hour ahead was the
 * present before any sample) broke it. Until issue 48's `bursts`, a version shown late into a quiet listing (nothing
 * newer listed before it) counted as on time too: polls kept their watermark at the newest stamp in a quiet spell,
 * and so read a burst again and again; now they cover the present, and such a version is late (LATE_BOUND_MS).
 */
export const ON_TIME_LATENESS_MS = 500;
/**
 * A version shown late, but within POLL_OVERLAP_MS of its stamp (by the data's clock), is published within this long
 * of healthy listing (ms): the trailing reads' contract (docs/guarantees.md, freshness: within FRESHNESS_BOUND_MS,
 * 30 s, of showing while the rate budget carries them), a page of the widest read (up to 0.6 s a page in the
 * simulation) and a margin for the polls that go first. Later than POLL_OVERLAP_MS: LATE_BOUND_MS (a sweep).
 */
export const SHOWN_LATE_BOUND_MS = 45_000;
/** The simulation's POLL_OVERLAP_MS: how late a change may show and still be the trailing reads' to find. */
const OVERLAP_MS = Number(SIM_ENV.POLL_OVERLAP_MS);
/**
 * What only a sweep finds (a deletion, an edit that keeps its updated_date, which polls cannot see) must be
 * published within this long of healthy listing (ms): a sweep interval (60 s) and a sweep.
 */
export const LATE_BOUND_MS = 100_000;
/**
 * How long a sweep of the largest listing of a schedule takes (ms): some 40 records (up to 30 reviews and the
 * creates) in pages of 2 are 20 pages; a page is an upstream request (up to 0.6 s of the world's latency) and its
 * commit (tens of ms), and the poll due every 2 s goes first (a request of its own): about a page a second.
 */
const SWEEP_MS = 20_000;
/**
 * A deletion is reported within this long of healthy time after the listing stopped showing anything that may be
 * the review (ms; deletionDue): the sweep in flight then may have listed it just before (up to SWEEP_MS more), the
 * next sweep starts a sweep interval after that one completed (src/core/schedule.ts, sweepDue) and reports it once
 * it has listed every page (SWEEP_MS); the deletion scan and its commit take milliseconds.
 */
export const DELETION_BOUND_MS = Number(SIM_ENV.SWEEP_INTERVAL_MS) + 2 * SWEEP_MS;
/**
 * The longest a poll's or a sweep's page takes in the world (ms): its upstream request (at most PAGE_LATENCY_MS.max,
 * upstream.ts) and its commit, a Kafka transaction of a few requests (at most 25 ms each, simulate.ts) and a few
 * Redis commands (at most 3 ms each). Measured: at most 555 ms a page (a poll's duration over its pages) over
 * the 215 polls of 4 pages or more of 60 schedules from seed 8800 (--faults +bursts --focus bursts).
 */
export const PAGE_MS = PAGE_LATENCY_MS.max + 100;
/** The sweep's pace while polls fit their interval (ms a page): SWEEP_MS over its 20 pages, about a page a second. */
const SWEEP_PAGE_MS = SWEEP_MS / 20;
/** How long before the world's end a commit may still be writing Redis (ms): a few steps of the simulated clients. */
const IN_FLIGHT_MS = 5_000;

/** A stretch of world time [from, to) (absolute ms). */
export interface Window {
  from: number;
  to: number;
}

/** What the checker reads of a deployment: its configuration and the world it ran in. */
export interface CheckTarget {
  name: string;
  config: BridgeConfig;
  kafka: SimKafka;
  upstream: SimUpstream;
  redis: SimRedisServer;
  /** When faults (and the start-up) disturbed the deployment: the heal bound is added to each. */
  disturbed: readonly Window[];
  /** The start and the end of the schedule (world ms). */
  start: number;
  end: number;
}

interface SeenEvent {
  id: string;
  type: string;
  review: number;
  sequence: number;
  data: { review?: Partial<Review> } | undefined;
  /** Position in the consumer's reading order (a topic's records in offset order, topics in commit order). */
  at: number;
  /** When its transaction committed (world ms). */
  committedAt: number;
}

// The fields compared with the upstream's versions (the default field policy publishes them as they are).
const COMPARED = [
  'client_publication_status',
  'pwr_publication_status',
  'updated_date',
  'headline',
  'helpful_votes',
] as const;

function sameVersion(event: Partial<Review>, version: Review): boolean {
  return COMPARED.every((f) => !(f in event) || event[f] === version[f]);
}

// The state a feed must end in: statuses and content, not updated_date: a change and its undoing, both made while
// the bridge could not read, leave the review as published with a newer date and nothing to say. A change missed
// while the bridge could read is what 'every version published' finds (with updated_date).
function sameState(event: Partial<Review>, version: Review): boolean {
  return COMPARED.every((f) => f === 'updated_date' || !(f in event) || event[f] === version[f]);
}

function describe(r: Partial<Review> | undefined): string {
  if (!r) return 'nothing';
  return COMPARED.map((f) => `${f}=${String(r[f])}`).join(' ');
}

/** What the checker saw (for the report). */
export interface CheckStats {
  events: number;
  reviews: number;
}

/** The healthy stretches of [from, to): outside every disturbance and its heal bound. */
export function healthy(disturbed: readonly Window[], from: number, to: number): Window[] {
  const bad = disturbed
    .map((w) => ({ from: w.from, to: w.to + HEAL_BOUND_MS }))
    .sort((a, b) => a.from - b.from || a.to - b.to);
  const out: Window[] = [];
  let at = from;
  for (const w of bad) {
    if (w.from > at) out.push({ from: at, to: Math.min(w.from, to) });
    at = Math.max(at, w.to);
    if (at >= to) break;
  }
  if (at < to) out.push({ from: at, to });
  return out.filter((w) => w.to > w.from);
}

/**
 * When a version must be published by: the start of the first healthy stretch it is visible for long enough, and
 * the bound there. `bound`: fixed, or what it is from a time on (the paging the world asks for then: Paging).
 */
function dueBy(
  visible: Window,
  good: readonly Window[],
  bound: number | ((from: number) => number),
): { at: number; ms: number } | null {
  for (const g of good) {
    const from = Math.max(visible.from, g.from);
    const to = Math.min(visible.to, g.to);
    const ms = typeof bound === 'number' ? bound : bound(from);
    if (to - from >= ms) return { at: from + ms, ms };
  }
  return null;
}

/**
 * What paging costs polls and sweeps, counted from the world (the listing as it stood at each time), never from
 * what the deployment did, so that the bounds stay a check: a deployment whose polls read more than the world asks
 * for gets no more time. The bounds above assume polls take about an interval; a burst (issue 48's `bursts`: up to
 * 100 changes within a second) or a data clock ahead of the bridge's (which polls read again until local time
 * reaches it: the present is capped at local time, src/core/upstream-present.ts) fills a poll with pages, each
 * request up to PAGE_MS, and the bounds grow by that paging where it exceeds an interval.
 *
 * What a poll reads at world time t (pollRows): every record the listing shows then stamped at or after the
 * earliest of the bridge's time (the world's), the data's present and, until the bridge can have sampled three
 * reviews after its initial load (headerRulesUntil), the Date header's time (date-header-apart: a header behind the
 * data rules the present until then, and polls read back to it, as docs/guarantees.md says), less the reach
 * (reachMs: two intervals and the lookback's floor, 5 s), and every record without a date. Until then, too, from no
 * later than the newest record stamped at or before that present: a quiet spell does not move the watermark past it
 * (a header 38 minutes behind the data, every record stamped past it, made every poll read the whole listing in
 * seed 431308). Why that much: no correct poll starts later (its watermark never passes either time), and one whose
 * polls fit their interval starts at most an interval, the last poll's paging (an interval) and the lookback's
 * floor behind it (src/bridge/passes/poll-state.ts, since). A learned lookback (late-visibility) reaches further;
 * the count leaves that out, so it may only undercount the time polls need: the bounds never loosen for it, and
 * are never below the fixed ones. The count is the world's, so a mutant that makes polls read more is held to
 * what the listing asked for: one reading the whole listing every poll still fails (3 of 60 schedules from 8800
 * with --focus bursts, 4 of 60 default ones from 9500: deletions past bounds that did not grow). One reading 60 s
 * further back passed 60 of each: that much reading fits even the fixed bounds (none was passed in 20 of them).
 *
 * On time (pollBound): a version shown at V is missed at worst by a poll in flight then (begun at V - P or later,
 * P its paging), read by the next (begun by V + max(interval, P)) and published by its end (P more), which may
 * have waited a sweep page and a trailing page (schedule.ts: a poll waits at most a page of each): by V +
 * max(interval, P) + P + 2 * PAGE_MS, with P the largest paging over [V - P, V + the bound]. That is within
 * ON_TIME_BOUND_MS (three intervals, 2 * PAGE_MS within the third) when P fits an interval, and within 2 * (P -
 * interval) more when it does not; P and the span are taken again until they agree (a few rounds). VERSION_BOUND_MS grows the same way.
 *
 * Sweeps (sweptBy): while polls overrun their interval they run back to back, and a sweep takes one page per poll
 * (the work behind the polls that waited an interval goes ahead of a due poll, src/core/schedule.ts), a trailing
 * read one more: a page costs P + 2 * PAGE_MS. While they fit, the measured page a second (SWEEP_MS). A sweep of
 * the largest listing is stepped page by page at that pace from where it starts, never shorter than SWEEP_MS. What
 * a deletion waits for once its sweep has listed everything (a poll begun after, the widest trailing read) is one
 * poll cycle more when polls overrun; the sweep in flight is counted whole, which leaves slack for the rest.
 * Loose (P at the world's longest request: 9071's deletion got 178 s and came 107.6 s into healthy time), but the growth only
 * happens where polls must page past their interval: in 200 default schedules (seed 9500) it never did.
 */
class Paging {
  private events: number[] | null = null;
  private largest: number | null = null;
  private headerUntil: number | null = null;

  constructor(
    private readonly upstream: SimUpstream,
    /**
     * When the deployment's initial load was committed done (world ms; +Infinity: never): the bridge samples the
     * present from no change found before (src/core/upstream-present.ts), so the Date header rules until then.
     */
    private readonly loadedAt: number,
    private readonly intervalMs: number,
    private readonly sweepIntervalMs: number,
    /** How far behind the present a poll reads (ms): see the class comment. */
    private readonly reachMs: number,
  ) {}

  /**
   * Until when the Date header may stand for the present (world ms): until polls that began after the initial load
   * ended have found three reviews' on-time changes, one a poll (src/core/upstream-present.ts: before
   * PRESENT_MIN_SAMPLES reviews are sampled, the present is the earliest of the header, local time and the samples;
   * a poll samples only its newest creation or status change, no late one, and none while the load runs). Counted
   * from the world: the first poll begun after the load's end (within a poll cycle of it), then changes of other
   * reviews shown on time at least a poll cycle apart (two in one poll are one sample). The earliest the bridge can
   * have them, so the window never outlasts what the contract allows (seeds 430029, 430120, 430187, 430228 of
   * date-header-apart: counted from the schedule's start, it ended while the load ran, and polls still read the
   * whole listing).
   */
  private headerRulesUntil(): number {
    if (this.headerUntil === null) {
      const u = this.upstream;
      const shown: Array<{ at: number; review: number }> = [];
      for (const [review, versions] of u.history) {
        versions.forEach((v, i) => {
          const at = u.visibleFrom(v);
          // A sample is a creation or a status change: an edit's event says nothing of time (page-metrics.ts).
          const prev = versions[i - 1];
          const moved = !prev || (v.updated_date > prev.updated_date && STATUS_FIELDS.some((f) => v[f] !== prev[f]));
          if (moved && at + u.clockOffsetMs - v.updated_date <= ON_TIME_LATENESS_MS) shown.push({ at, review });
        });
      }
      shown.sort((a, b) => a.at - b.at);
      const sampled = new Set<number>();
      let next = this.loadedAt + this.learningCycleMs(this.loadedAt);
      this.headerUntil = Number.POSITIVE_INFINITY;
      for (const c of shown) {
        if (c.at <= next || sampled.has(c.review)) continue;
        sampled.add(c.review);
        if (sampled.size === PRESENT_MIN_SAMPLES) {
          this.headerUntil = c.at;
          break;
        }
        next = c.at + this.learningCycleMs(c.at);
      }
    }
    return this.headerUntil;
  }

  /** A poll cycle from world time `at` while the header may rule the present: an interval, or the poll's paging. */
  private learningCycleMs(at: number): number {
    const rows = this.pollRowsAt(at, true);
    return Math.max(this.intervalMs, Math.ceil(rows / this.upstream.pageSize) * PAGE_MS) + 2 * PAGE_MS;
  }

  /** The records a poll reads at world time `at`. */
  private pollRows(at: number): number {
    return this.pollRowsAt(at, at < this.headerRulesUntil());
  }

  /** The records a poll reads at world time `at`; `learning`: before the bridge has learned the data's present. */
  private pollRowsAt(at: number, learning: boolean): number {
    const { clockOffsetMs, dateHeaderOffsetMs } = this.upstream;
    const header = learning ? at + clockOffsetMs + dateHeaderOffsetMs : Number.POSITIVE_INFINITY;
    const listed = this.upstream.listedAt(at);
    let present = Math.min(at, at + clockOffsetMs, header);
    // Until the present is learned, a quiet spell leaves the watermark at the newest stamp no later than it: polls
    // cover the present only once it is learned (PollState.coveredAtStart).
    if (learning) {
      let newest = Number.NEGATIVE_INFINITY;
      for (const d of listed) if (d !== null && d <= present) newest = Math.max(newest, d);
      present = newest;
    }
    const floor = present - this.reachMs;
    return listed.filter((d) => d === null || d >= floor).length;
  }

  /** When what the listing shows grows (a version or a malformed record shown): the count is largest at one of them. */
  private eventTimes(): number[] {
    if (!this.events) {
      const u = this.upstream;
      const times = [
        ...[...u.history.values()].flat().map((v) => u.visibleFrom(v)),
        ...u.malformedEver.map((m) => m.from),
      ];
      this.events = [...new Set(times)].sort((a, b) => a - b);
    }
    return this.events;
  }

  /** The longest paging (ms) of a poll reading the listing as it stands at any time in [from, to]. */
  pollMs(from: number, to: number): number {
    let rows = this.pollRows(from);
    for (const t of this.eventTimes()) if (t > from && t <= to) rows = Math.max(rows, this.pollRows(t));
    return Math.max(1, Math.ceil(rows / this.upstream.pageSize)) * PAGE_MS;
  }

  /** The bound (ms) of a version polls find, shown from `from`: `base` and the paging beyond an interval. */
  pollBound(from: number, base: number): number {
    let [poll, bound] = [this.intervalMs, base];
    for (let round = 0; round < 4; round++) {
      // The poll in flight began at most its paging before; the next ends within the bound.
      const next = this.pollMs(from - poll, from + bound);
      if (next === poll) break;
      poll = next;
      bound = base + 2 * Math.max(0, poll - this.intervalMs);
    }
    return bound;
  }

  /** What a sweep page costs from world time `at` (ms): see the class comment. */
  private sweepPageMs(at: number): number {
    let poll = this.pollMs(at, at + 2 * this.intervalMs);
    if (poll > this.intervalMs) poll = this.pollMs(at, at + poll + 2 * PAGE_MS);
    return poll > this.intervalMs ? poll + 2 * PAGE_MS : SWEEP_PAGE_MS;
  }

  /** When a sweep of the largest listing begun at `at` has listed every page. */
  private sweepEnd(at: number): number {
    return Math.max(this.readsEnd(at, 1), at + SWEEP_MS);
  }

  /** When `reads` reads of the largest listing, one after the other from `at`, have listed every page. */
  private readsEnd(at: number, reads: number): number {
    if (this.largest === null) {
      const times = [0, ...this.eventTimes()];
      this.largest = Math.max(...times.map((t) => this.upstream.listedAt(t).length));
    }
    let t = at;
    for (let page = 0; page < reads * Math.ceil(this.largest / this.upstream.pageSize); page++)
      t += this.sweepPageMs(t);
    return t;
  }

  /**
   * The bound (ms) of what only a sweep finds, from `from`, at least `base`: the sweep in flight then (a whole one,
   * at most), the sweep interval, the next sweep, and the poll a deletion waits for once the listing is read (a
   * poll cycle, when polls overrun: within SWEEP_MS otherwise). A `deletion` from a listing sorted newest first
   * also waits, once its listing is read, for its confirmation reads (up to MAX_CONFIRMATION_READS) and for the rest
   * of the widest trailing read under way and one more (src/bridge/passes/sweep-deletions.ts, docs/guarantees.md):
   * while polls fit their interval those take seconds, within SWEEP_MS's slack; while they overrun, each reads at a
   * page per poll cycle, here the largest listing (seed 432332 of date-header-apart: a header 31 minutes behind the
   * data, the present never learned, and every one of those reads read the whole listing, 80-90 s each).
   */
  sweptBy(from: number, base: number, deletion = false): number {
    let listed = this.sweepEnd(this.sweepEnd(from) + this.sweepIntervalMs);
    if (deletion && this.upstream.order === 'updated-desc' && this.sweepPageMs(listed) > SWEEP_PAGE_MS)
      listed = this.readsEnd(listed, MAX_CONFIRMATION_READS + 2);
    const wait = this.sweepPageMs(listed);
    return Math.max(base, listed + (wait > SWEEP_PAGE_MS ? wait : 0) - from);
  }
}

const committedAt = (r: SimRecord): number => r.txn.endedAt ?? Number.POSITIVE_INFINITY;

/** Checks the contract for one deployment; resolves the first violation, or null. */
export function checkDeployment(target: CheckTarget, stats: CheckStats): Violation | null {
  const { name, config, kafka, upstream } = target;
  const t = config.kafka.topics;
  const topics = [t.created, t.statusChanged, t.updated, t.deleted];
  const events: SeenEvent[] = [];
  for (const topic of topics) {
    for (const r of kafka.committed(topic)) {
      if (r.value === null) continue;
      const e = JSON.parse(String(r.value)) as {
        id: string;
        type: string;
        subject: string;
        sequence: number;
        data?: SeenEvent['data'];
      };
      events.push({
        id: e.id,
        type: e.type,
        review: Number(e.subject),
        sequence: e.sequence,
        data: e.data,
        at: r.seq,
        committedAt: committedAt(r),
      });
    }
  }
  events.sort((a, b) => a.at - b.at);
  stats.events += events.length;
  const v = (property: Property, detail: string): Violation => ({ deployment: name, property, detail });

  const ids = new Map<string, SeenEvent>();
  for (const e of events) {
    if (ids.has(e.id))
      return v('no id twice', `${e.type} of review ${e.review} seq ${e.sequence} (id ${e.id}) read twice`);
    ids.set(e.id, e);
  }
  const bySeq = new Map<string, SeenEvent>();
  for (const e of events) {
    const k = `${e.review}/${e.sequence}`;
    const other = bySeq.get(k);
    if (other)
      return v(
        'no conflicting ids',
        `review ${e.review} seq ${e.sequence}: ${other.type} and ${e.type} with different ids`,
      );
    bySeq.set(k, e);
  }
  for (const e of events) {
    if (e.type === 'review.deleted') continue;
    const versions = upstream.history.get(e.review) ?? [];
    const review = e.data?.review;
    if (!review || !versions.some((ver) => sameVersion(review, ver)))
      return v(
        'nothing invented',
        `${e.type} of review ${e.review} seq ${e.sequence} carries ${describe(review)}, a version the upstream never had`,
      );
  }
  const perReview = new Map<number, SeenEvent[]>();
  for (const e of events) {
    let list = perReview.get(e.review);
    if (!list) perReview.set(e.review, (list = []));
    list.push(e);
  }
  stats.reviews += perReview.size;
  for (const [review, list] of perReview) {
    const created = list.filter((e) => e.type === 'review.created');
    if (created.length > 1)
      return v(
        'no second review.created',
        `review ${review}: review.created at seq ${created.map((e) => e.sequence).join(' and ')}`,
      );
  }
  for (const [review, list] of perReview) {
    let expected = 1;
    for (const e of list) {
      if (e.sequence !== expected)
        return v(
          'sequence without gaps or restarts',
          `review ${review}: seq ${e.sequence} (${e.type}) read where ${expected} was due (${list.map((x) => x.sequence).join(',')})`,
        );
      expected += 1;
    }
  }
  // Each event stands for the earliest version at or after the previous event's that it matches: an event that
  // matches only earlier versions (or an older updated_date) went backwards.
  const published = new Map<number, Map<number, SeenEvent>>();
  for (const [review, list] of perReview) {
    const versions = upstream.history.get(review) ?? [];
    const seen = new Map<number, SeenEvent>();
    published.set(review, seen);
    let index = 0;
    let date = Number.NEGATIVE_INFINITY;
    for (const e of list) {
      const r = e.data?.review;
      if (e.type === 'review.deleted' || !r) continue;
      const found = versions.findIndex((ver, i) => i >= index && sameVersion(r, ver));
      if (found < 0 || (r.updated_date ?? date) < date)
        return v(
          'nothing goes backwards',
          `review ${review}: seq ${e.sequence} (${e.type}) carries ${describe(r)}, older than the version seq ${e.sequence - 1} carried`,
        );
      index = found;
      date = r.updated_date ?? date;
      if (!seen.has(found)) seen.set(found, e);
    }
  }
  for (const [review, list] of perReview) {
    const deletion = list.find((e) => e.type === 'review.deleted');
    if (deletion && !upstream.deleted.has(review))
      return v(
        'deletions only of reviews gone upstream',
        `review ${review} deleted at seq ${deletion.sequence} but still listed upstream`,
      );
  }
  const good = healthy(target.disturbed, target.start, target.end);
  const paging = new Paging(
    upstream,
    initialLoadEnded(target),
    config.poll.intervalMs,
    config.sweep.intervalMs,
    2 * config.poll.intervalMs + config.poll.lookbackFloorMs,
  );
  const versionViolation = everyVersion(target, perReview, published, good, paging);
  if (versionViolation) return v('every version published', versionViolation);
  for (const [id, review] of upstream.reviews) {
    const list = perReview.get(id);
    const last = list?.at(-1);
    if (!last || last.type === 'review.deleted' || !last.data?.review || !sameState(last.data.review, review))
      return v(
        'every final state reached',
        `review ${id}: the feed ends at ${last ? `${last.type} seq ${last.sequence} with ${describe(last.data?.review)}` : 'nothing'}, the upstream holds ${describe(review)}`,
      );
  }
  // Deletions not reported and not due yet within the schedule: their state rows may still be live.
  const notDue = new Set<number>();
  for (const id of upstream.deleted) {
    const last = perReview.get(id)?.at(-1);
    if (!last) continue;
    // Not reported: a violation once due (a bound the paging grows past the schedule's end is not due yet).
    const reportedAt = last.type === 'review.deleted' ? last.committedAt : Number.POSITIVE_INFINITY;
    const gone = upstream.deletedAt.get(id)!;
    // The fixed bound first; only past it, the paging the world asked for (it only grows the bound).
    let { from, due, ms } = deletionDue(target, id, good, DELETION_BOUND_MS);
    if (due !== null && reportedAt > due)
      ({ from, due, ms } = deletionDue(target, id, good, (at) => paging.sweptBy(at, DELETION_BOUND_MS, true)));
    if (due === null && reportedAt === Number.POSITIVE_INFINITY) notDue.add(id);
    if (due === null || reportedAt <= due) continue;
    if (reportedAt === Number.POSITIVE_INFINITY)
      return v(
        'every final state reached',
        `review ${id} is gone upstream and the feed has no review.deleted after seq ${last.sequence} (due ${due - target.start} ms: ${ms} ms once healthy)`,
      );
    return v(
      'every final state reached',
      `review ${id} deleted upstream at ${gone - target.start} ms (nothing that may be it listed from ${from - target.start} ms) was reported ${reportedAt - due} ms after its bound (${ms} ms once healthy: ${DELETION_BOUND_MS} ms and the paging)`,
    );
  }
  return deadLettersOnce(target) ?? stateTopic(target, notDue) ?? changelogInOrder(target) ?? redisAgrees(target);
}

// When a review deleted upstream must be reported deleted by, and from when its bound counts: from the end of what
// may still stand for it in the listing (docs/bad-input.md). Its own record listed malformed keeps its id listed, so
// the sweeps keep it; a record without a readable id listed before the deletion is due may be it, and a sweep in
// which such a record is new holds the deletion for one more sweep: the bound counts again from the end of that
// record's listing, for as long as such records follow one another.
function deletionDue(
  target: CheckTarget,
  id: number,
  good: readonly Window[],
  bound: number | ((from: number) => number),
): { from: number; due: number | null; ms: number | null } {
  const { upstream } = target;
  const gone = upstream.deletedAt.get(id)!;
  const broken = (upstream.broken.get(id) ?? []).filter((w) => w.from <= gone);
  let from = Math.max(gone, ...broken.map((w) => w.to));
  const unreadable = upstream.malformedEver.filter((m) => rejectId(m.raw) === null);
  for (;;) {
    const due = dueBy({ from, to: target.end }, good, bound);
    const holding = unreadable.filter((m) => m.to > from && m.from < (due?.at ?? target.end));
    if (holding.length === 0) return { from, due: due?.at ?? null, ms: due?.ms ?? null };
    from = Math.max(...holding.map((m) => m.to));
  }
}

// Every version visible for VERSION_BOUND_MS of healthy time is published, by the end of that time.
function everyVersion(
  target: CheckTarget,
  perReview: ReadonlyMap<number, SeenEvent[]>,
  published: ReadonlyMap<number, ReadonlyMap<number, SeenEvent>>,
  good: readonly Window[],
  paging: Paging,
): string | null {
  const { upstream } = target;
  const late = lateVersions(upstream);
  for (const [review, versions] of upstream.history) {
    const until = upstream.deletedAt.get(review) ?? target.end;
    const from = versions.map((ver) => upstream.visibleFrom(ver));
    for (let i = 0; i < versions.length; i++) {
      // Shown from its time until a later version shows (a later one may become visible first: then never).
      let to = until;
      for (let j = i + 1; j < versions.length; j++) to = Math.min(to, from[j]!);
      // An edit that keeps its updated_date is invisible to polls, and a late change (listed after a newer one)
      // may be older than the learned lookback (src/core/lookback.ts): the next sweep finds them.
      const silent = i > 0 && versions[i]!.updated_date === versions[i - 1]!.updated_date;
      // A version whose record was listed malformed shows again, once it heals, with the same updated_date: the
      // same as a silent edit, counted from the end of the malformed listing.
      const broken = (upstream.broken.get(review) ?? []).filter((w) => w.from < to && w.to > from[i]!);
      const shown = Math.max(from[i]!, ...broken.map((w) => w.to));
      // On time: shown after the start, and stamped past the upstream's present (each poll reads it again until time
      // reaches it) or not far behind it (updated_date: the data's clock). See ON_TIME_LATENESS_MS. Shown later than
      // that after the start: a late change, as one listed after a newer version is.
      const present = from[i]! + upstream.clockOffsetMs;
      const date = versions[i]!.updated_date;
      const shownLate = from[i]! > target.start && date <= present && present - date > ON_TIME_LATENESS_MS;
      const onTime = !silent && broken.length === 0 && from[i]! > target.start && !shownLate;
      const lateBy = present - date;
      const bound = onTime
        ? ON_TIME_BOUND_MS
        : silent || broken.length > 0
          ? LATE_BOUND_MS
          : shownLate || late.has(versions[i]!)
            ? from[i]! > target.start && lateBy <= OVERLAP_MS
              ? SHOWN_LATE_BOUND_MS
              : LATE_BOUND_MS
            : VERSION_BOUND_MS;
      let due = dueBy({ from: shown, to }, good, bound);
      if (due === null) continue;
      // A version whose state is the last one published (changes and their undoing, made while the bridge could
      // not read: the versions between were not due) only moves updated_date: nothing to say.
      let last = -1;
      for (const j of published.get(review)?.keys() ?? []) if (j < i) last = Math.max(last, j);
      if (last >= 0 && sameState(versions[i]!, versions[last]!)) continue;
      const e = published.get(review)?.get(i);
      if (!e || e.committedAt > due.at) {
        // The fixed bound first; only past it, the paging the world asked for (it only grows the bound): polls
        // (and the trailing reads behind them) find what ON_TIME_BOUND_MS, VERSION_BOUND_MS and
        // SHOWN_LATE_BOUND_MS cover, sweeps what LATE_BOUND_MS covers.
        due = dueBy({ from: shown, to }, good, (at) =>
          bound === LATE_BOUND_MS ? paging.sweptBy(at, bound) : paging.pollBound(at, bound),
        );
        if (due === null || (e && e.committedAt <= due.at)) continue;
      }
      if (!e) {
        const list = perReview.get(review) ?? [];
        return `review ${review}: ${describe(versions[i])} was listed from ${Math.max(0, from[i]! - target.start)} to ${to - target.start} ms, ${due.ms} ms of it healthy (${bound} ms and the paging), and never published (the feed: ${list.map((x) => `${x.type.slice(7)}#${x.sequence}`).join(' ') || 'nothing'}; the versions: ${versions.map((ver, j) => `${Math.max(0, from[j]! - target.start)} ms ${ver.client_publication_status}/${ver.pwr_publication_status}/${ver.updated_date}`).join(', ')})`;
      }
      if (e.committedAt > due.at)
        return `review ${review}: ${describe(versions[i])} (seq ${e.sequence}) was published at ${e.committedAt - target.start} ms, ${e.committedAt - due.at} ms after its bound (${due.ms} ms of healthy listing: ${bound} ms and the paging)`;
    }
  }
  return null;
}

// The versions listed after a version with a later updated_date was (of any review): late changes.
function lateVersions(upstream: SimUpstream): Set<Review> {
  const all = [...upstream.history.values()].flat().sort((a, b) => upstream.visibleFrom(a) - upstream.visibleFrom(b));
  const late = new Set<Review>();
  let newest = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < all.length;) {
    // Versions listed at the same moment are not late to one another.
    let j = i;
    while (j < all.length && upstream.visibleFrom(all[j]!) === upstream.visibleFrom(all[i]!)) j++;
    const batch = all.slice(i, j);
    for (const ver of batch) if (ver.updated_date < newest) late.add(ver);
    for (const ver of batch) newest = Math.max(newest, ver.updated_date);
    i = j;
  }
  return late;
}

// A bad record is dead-lettered once (guarantees.md: "sent once"); a repeat is allowed only across a disturbance
// (Redis losing the dead-letter memory, a crash between the commit and remembering it, an unknown commit outcome),
// or across an eviction of that record's own memory (docs/exactly-once.md: one more copy each time it is lost). A
// dead letter is its key and the record it carries: a review's record that breaks twice, differently, is two bad
// records, each dead-lettered once.
function deadLettersOnce(target: CheckTarget): Violation | null {
  const evicted = memoryEvictions(target);
  const first = new Map<string, SimRecord>();
  for (const r of target.kafka.committed(target.config.kafka.topics.deadLetter)) {
    const key = String(r.key);
    const { record, record_omitted: omitted } = JSON.parse(String(r.value)) as Record<string, unknown>;
    const letter = `${key} ${JSON.stringify(record ?? omitted ?? null)}`;
    const before = first.get(letter);
    if (!before) {
      first.set(letter, r);
      continue;
    }
    const [a, b] = [committedAt(before), committedAt(r)];
    const excused =
      target.disturbed.some((w) => w.from <= b && w.to + HEAL_BOUND_MS >= a) ||
      (evicted.get(key.startsWith('record:') ? 'record:' : key) ?? []).some((at) => at >= a && at <= b);
    if (!excused)
      return {
        deployment: target.name,
        property: 'each dead letter once',
        detail: `dead letter ${key} published at ${a - target.start} and again at ${b - target.start} ms with the same record, with no fault between and its memory not evicted`,
      };
    first.set(letter, r);
  }
  return null;
}

// When the dead-letter memory of each dead letter's key was evicted (world ms): the memory is one key per digest of
// a bad record (src/redis/dead-letter-memory.ts), found from the records the upstream listed malformed. A key
// without a readable id is the record's keyed digest: any unreadable record's memory stands for it.
function memoryEvictions(target: CheckTarget): Map<string, number[]> {
  const keys = accountKeys(target.config.redis.keyPrefix, target.config.account);
  const at = new Map<string, number[]>();
  for (const e of target.redis.evictions) at.set(e.key, [...(at.get(e.key) ?? []), e.at]);
  const out = new Map<string, number[]>();
  for (const m of target.upstream.malformedEver) {
    const times = at.get(keys.deadLettered(recordDigest(m.raw)));
    if (!times) continue;
    const key = rejectId(m.raw) ?? 'record:';
    out.set(key, [...(out.get(key) ?? []), ...times]);
  }
  return out;
}

// The state topic read as a table (the last row of each key; a tombstone removes it) equals the upstream, but for
// the reviews in `notDue`: deleted upstream, and their deletion not due before the schedule's end.
function stateTopic(target: CheckTarget, notDue: ReadonlySet<number>): Violation | null {
  const rows = new Map<string, string | null>();
  for (const r of target.kafka.committed(target.config.kafka.topics.state)) {
    rows.set(String(r.key), r.value === null ? null : String(r.value));
  }
  const v = (detail: string): Violation => ({
    deployment: target.name,
    property: 'state topic equals the upstream',
    detail,
  });
  for (const [id, review] of target.upstream.reviews) {
    const row = rows.get(String(id));
    const state = row ? (JSON.parse(row) as { review: Partial<Review>; updated_date: number }) : null;
    if (!state || !sameState(state.review, review))
      return v(`review ${id}: the state topic holds ${describe(state?.review)}, the upstream ${describe(review)}`);
  }
  for (const id of target.upstream.deleted) {
    const row = rows.get(String(id));
    if (row !== undefined && row !== null && !notDue.has(id))
      return v(`review ${id} is gone upstream and its state row is not a tombstone`);
  }
  return null;
}

const entryText = (e: SnapshotEntry): string => JSON.stringify(e);

// The key of a changelog record of `target`'s deployment, without the account's prefix; null for another's record
// (another prefix, or another deployment's header: a legacy record without one counts as ours).
function ownChangelogKey(target: CheckTarget, r: SimRecord): string | null {
  const { config } = target;
  const prefix = config.kafka.changelogKeyPrefix ?? config.kafka.keyPrefix ?? '';
  if (r.key === null || !r.key.startsWith(prefix)) return null;
  const deployment = r.headers[DEPLOYMENT_HEADER];
  if (deployment !== undefined && deployment !== config.kafka.identity?.deployment) return null;
  return r.key.slice(prefix.length);
}

// The changelog folded (the last record of each key; a deletion marker removes the entry) equals Redis's snapshot,
// and its last checkpoint's transaction is the one Redis's checkpoint names.
function redisAgrees(target: CheckTarget): Violation | null {
  const { config, kafka, redis } = target;
  const fold = (records: readonly SimRecord[]): { folded: Map<number, string>; txn: number } => {
    const folded = new Map<number, string>();
    let txn = 0;
    for (const r of records) {
      const key = ownChangelogKey(target, r);
      if (key === null || key === MARKER_KEY) continue;
      const value = r.value === null ? null : Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value);
      const record = decodeChangelogRecord(key, value);
      if (record?.kind === 'checkpoint') txn = Math.max(txn, record.checkpoint.txn);
      else if (record?.kind === 'entry') {
        if (record.deleted) folded.delete(record.id);
        else folded.set(record.id, entryText(record.entry));
      } else if (value === null && key.startsWith('e:')) folded.delete(Number(key.slice(2)));
    }
    return { folded, txn };
  };
  const records = kafka.committed(config.kafka.topics.changelog);
  const whole = fold(records);
  const keys = accountKeys(config.redis.keyPrefix, config.account);
  const held = new Map<number, string>();
  for (const bucketKey of redis.keys(keys.bucketPattern)) {
    const bucket = redis.get(bucketKey);
    if (bucket?.t !== 'hash') continue;
    const n = Number(/:s:(\d+)$/.exec(bucketKey)?.[1]);
    for (const [field, value] of bucket.v) {
      if (field === 'm') continue;
      held.set(n * 2 ** BUCKET_BITS + Number(field), entryText(decodeEntry(value)));
    }
  }
  const ckpt = redis.get(keys.checkpoint);
  const redisTxn = ckpt?.t === 'hash' ? Number(ckpt.v.get('txn')?.toString('utf8') ?? '0') : 0;
  const v = (detail: string): Violation => ({
    deployment: target.name,
    property: 'Redis equals the changelog',
    detail,
  });
  // The world may stop between a commit's Kafka part and its Redis part: transactions past Redis's, all committed
  // in the world's last IN_FLIGHT_MS, were still being written to Redis; the rest is compared as it stands.
  const txnOf = (r: SimRecord) => Number(r.headers[CHANGELOG_TXN_HEADER] ?? 0);
  const ahead = records.filter((r) => txnOf(r) > redisTxn);
  const inFlight = ahead.length > 0 && ahead.every((r) => (r.txn.endedAt ?? r.at) > target.end - IN_FLIGHT_MS);
  const { folded, txn } = inFlight ? fold(records.filter((r) => txnOf(r) <= redisTxn)) : whole;
  if (txn === 0 && held.size === 0) return null;
  if (redisTxn !== txn) return v(`Redis names changelog transaction ${redisTxn}, the changelog ends at ${txn}`);
  for (const [id, entry] of folded) {
    if (held.get(id) !== entry)
      return v(`review ${id}: Redis holds ${held.get(id) ?? 'nothing'}, the changelog ${entry}`);
  }
  for (const id of held.keys()) {
    if (!folded.has(id)) return v(`review ${id}: Redis holds an entry the changelog does not`);
  }
  return null;
}

// When the deployment's changelog first committed a checkpoint with its initial load done (world ms; +Infinity:
// never). The bridge's own commit, not the world's, bounds only when polls may start to sample the present: the
// load itself is held to the version and deletion bounds like every pass.
function initialLoadEnded(target: CheckTarget): number {
  let at = Number.POSITIVE_INFINITY;
  for (const r of target.kafka.committed(target.config.kafka.topics.changelog)) {
    if (r.value === null || ownChangelogKey(target, r) !== CHECKPOINT_RECORD_KEY) continue;
    let done = false;
    try {
      const record = decodeChangelogRecord(CHECKPOINT_RECORD_KEY, Buffer.from(r.value));
      done = record?.kind === 'checkpoint' && record.checkpoint.initialDone;
    } catch {
      // Unreadable: 'Redis equals the changelog' reports it; here it only ends no load.
    }
    if (done) at = Math.min(at, committedAt(r));
  }
  return at;
}

// Each committed transaction of the deployment's changelog carries one transaction number (bridge-txn), greater than
// every transaction committed before it (docs/exactly-once.md): a restore's tail applies the records numbered past
// Redis's last commit and skips the rest, and a full restore takes the checkpoint with the largest number, so two
// commits under one number (or a number going back) lose a commit's entries or checkpoint in a restore. Compaction
// and aborted transactions only leave numbers out; the order of those that stay holds.
function changelogInOrder(target: CheckTarget): Violation | null {
  const { config, kafka } = target;
  const v = (detail: string): Violation => ({
    deployment: target.name,
    property: 'changelog transactions in commit order',
    detail,
  });
  // Per Kafka transaction: its changelog transaction number and its first record (the tie-break of commit times).
  const numbers = new Map<SimTxn, { txn: number; seq: number }>();
  for (const r of kafka.committed(config.kafka.topics.changelog)) {
    const header = r.headers[CHANGELOG_TXN_HEADER];
    const key = ownChangelogKey(target, r);
    if (header === undefined || key === null || key === MARKER_KEY) continue;
    const txn = Number(header);
    const before = numbers.get(r.txn);
    if (before && before.txn !== txn)
      return v(`one Kafka transaction carries changelog transactions ${before.txn} and ${txn}`);
    if (!before) numbers.set(r.txn, { txn, seq: r.seq });
  }
  const ended = (t: SimTxn): number => t.endedAt ?? Number.POSITIVE_INFINITY;
  const inOrder = [...numbers].sort(([a, x], [b, y]) => ended(a) - ended(b) || x.seq - y.seq);
  for (let i = 1; i < inOrder.length; i++) {
    const [prev, [at, { txn }]] = [inOrder[i - 1]![1].txn, inOrder[i]!];
    if (txn <= prev)
      return v(`changelog transaction ${txn} committed at ${ended(at) - target.start} ms, after transaction ${prev}`);
  }
  return null;
}
