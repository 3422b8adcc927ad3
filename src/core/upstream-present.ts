// The upstream's present, in the clock of its data (the updated_date it stamps): what caps the watermark. A record
// stamped ahead of it (one writer whose clock runs fast) must not carry the watermark past changes made after it,
// or every poll would start after them until time reached its stamp. The data's clock may differ from the Date
// header's by minutes or an hour (a gateway and a database keeping different time), so the present is learned from
// the changes reads find: a sample is a change's updated_date less the local time the read that found it ended.
//
// What counts as a sample, and why. Running ahead of the data's clock hides changes (the watermark passes them);
// running behind only costs re-reads. A stamp is no later than the data's present when its page was read, so an
// honest sample, taken at the read's end, is never ahead of the data's clock (taken at the read's start it could be,
// by the read's duration). Three kinds of change give samples:
// - on time (shown within a poll interval of its stamp): behind the data's clock by at most the interval and the
//   poll's paging, the best estimate;
// - late-visible (a long transaction commits a change stamped when it began, seconds or minutes ago): behind by
//   its lateness. Counted, these drag the present behind by that lateness: the watermark, capped at it, then sits
//   below what polls covered and climbs with local time between polls, so the lateness polls measure (and learn
//   their lookback from) is wrong, and polls read back minutes. So a poll's newest change is a sample only when it
//   was not late by the poll's own measure (at or past lateBefore), and what trailing reads find (late, or the
//   polls would have found it) only as below. Nor is what a poll finds during the initial load (reviews the load
//   has not reached, stamped years ago): one such sample held the present three years behind, and
//   test/e2e/late-changes.test.ts failed both its tests (the branch `ahead`, reverted in 17f6f69);
// - stamped ahead: ahead by any amount, and one review changed again keeps its stamps ahead (each a ms past the
//   last). So samples are per review (its latest), and the estimate is the low quartile over the last
//   PRESENT_SAMPLES reviews: reviews stamped ahead move it only if they are three quarters of those sampled, and one
//   review changed again and again is one sample (schedule seed 308: three of five per-poll samples, hours ahead).
//   A low quartile, not the median: with late changes left out, what is below it is honest and costs re-reads of
//   at most a poll interval and its paging, and one honest sample among three ahead brings it back (below).
// A present learned ahead anyway (date-header-apart seed 330136: the first three reviews sampled were all stamped
// ahead) hides every honest change from polls, which then give no on-time sample to correct it; only trailing
// reads may still find those changes. So what a trailing
// read finds is a sample when no poll found an on-time change since that read began: polls starved of on-time
// changes are what a present ahead looks like, and while polls do find them the late changes trailing reads find
// cannot drag the present (when nothing else changes, those late changes may pull it behind: the safe side).
// Whatever the samples say, never past local time: the reviews that change may be mostly stamped ahead (schedule
// seed 6279: all three sampled, from 19 minutes to 2 hours ahead), and then no quartile is honest.
// Before PRESENT_MIN_SAMPLES reviews: the earliest of the Date header's time, local time and what the samples say.
// Three clocks kept apart (the gateway's, the bridge's, the database's) are rarely all ahead of the data, and
// behind is the safe side: one record stamped ahead then moves nothing, a header ahead of the data (an hour, in
// date-header-apart seed 330091: one stamp 3.7 hours ahead then carried the watermark an hour past every change,
// and trailing reads, which read from the present, found none of them either) is not trusted, and one behind makes
// polls re-read until three reviews are sampled, not five polls as when samples were per poll (date-header-apart
// seeds 230080, 230134, 61004: a header an hour behind made every poll read an hour back until then, and deletions
// came late). Local time ahead of the data (by the minutes two hosts' clocks may differ) hides changes from polls
// for those minutes at most: trailing reads, which reach POLL_OVERLAP_MS behind the present, find them, and their
// finds are samples then (polls found no on-time change).

/** Reviews whose latest sample stands for the data's clock (a low quartile over them). */
export const PRESENT_SAMPLES = 15;
/** Fewer reviews sampled than this: the earliest of the Date header, local time and the samples stands for the present. */
export const PRESENT_MIN_SAMPLES = 3;

/** The data clock's offset from local time, learned from the changes reads find. */
export class DataPresent {
  /** Per review: its latest change sampled less the local time that read ended (ms), least recently sampled first. */
  private readonly samples = new Map<string, number>();
  /** Local time of the last poll's on-time sample (null: none yet). */
  private lastOnTimeAt: number | null = null;

  /**
   * A poll that ended at local time `endedAt` found changes, the newest stamped `newest`, of review `review`
   * (absent: a sample of its own), and not late (older than what polls had covered): callers pass no late change.
   * `ahead`: stamped past the present as the bridge had it then. Still a sample (the low quartile weighs it), but no
   * sign that polls see the data's present: a present ahead of the data hides every honest change from polls, which
   * then find only records stamped further ahead still, and those must not keep what trailing reads find from
   * bringing the present back (date-header-apart seed 430093: local time 103 s ahead of the data, before three
   * reviews were sampled, and records stamped up to 3 minutes ahead found by every poll).
   */
  observe(newest: number, endedAt: number, review?: string | null, ahead = false): void {
    if (!Number.isFinite(newest)) return;
    this.add(review ?? `#${newest}@${endedAt}`, newest - endedAt);
    if (!ahead) this.lastOnTimeAt = endedAt;
  }

  /**
   * A trailing read that began at local time `startedAt` and ended at `endedAt` found changes, the newest stamped
   * `newest`, of review `review`: a sample only if no poll found an on-time change since the read began (see above).
   */
  observeTrailing(newest: number, startedAt: number, endedAt: number, review?: string | null): boolean {
    if (!Number.isFinite(newest)) return false;
    if (this.lastOnTimeAt !== null && this.lastOnTimeAt >= startedAt) return false;
    this.add(review ?? `#${newest}@${endedAt}`, newest - endedAt);
    return true;
  }

  /**
   * The learned offset (ms; positive: the data's clock is ahead of local time): the low quartile once
   * PRESENT_MIN_SAMPLES reviews are sampled, else null.
   */
  offset(): number | null {
    if (this.samples.size < PRESENT_MIN_SAMPLES) return null;
    const sorted = [...this.samples.values()].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 4)]!;
  }

  /** The data's present at local time `localNow`; `headerAt`: the Date header's time then (null: none seen). */
  at(localNow: number, headerAt: number | null): number {
    const offset = this.offset();
    // Never past local time: reviews stamped ahead can be most of those that change (schedule seed 6279: all three
    // sampled, 19 minutes to 2 hours ahead, held the present 19 minutes ahead and hid a change of a review stamped 2
    // minutes ahead). A data clock truly ahead of this host's costs re-reads of that offset, never a change. Nor,
    // when the samples put the data ahead of local time, past the Date header's: local time may itself run ahead of
    // the data (schedule seed 220: 55 s ahead, every review sampled stamped ahead, and the watermark, at local time,
    // hid a change stamped 51 s behind it until a trailing read found it).
    if (offset !== null) return offset <= 0 ? localNow + offset : Math.min(headerAt ?? localNow, localNow);
    // Fewer reviews sampled: the earliest of the header, local time and what they say (see the header comment).
    const before = Math.min(headerAt ?? localNow, localNow);
    return this.samples.size === 0 ? before : Math.min(before, localNow + Math.min(...this.samples.values()));
  }

  /** Keeps `offset` as review `key`'s sample, the most recent; the least recently sampled review beyond the last few goes. */
  private add(key: string, offset: number): void {
    this.samples.delete(key);
    this.samples.set(key, offset);
    if (this.samples.size > PRESENT_SAMPLES) this.samples.delete(this.samples.keys().next().value!);
  }
}

/**
 * Whether a stamp may move a watermark: not when it is past the upstream's present as the bridge has it. Capping such
 * a stamp at the present (as before) moved the watermark to the present, and a present ahead of the data's clock
 * (before three reviews are sampled it is the earliest of the Date header, local time and the samples, and local
 * time may run ahead of the data) then hid every honest change from polls: date-header-apart seed 430093, local time
 * 103 s ahead, a record stamped ahead found by the first poll, and every later change found by a sweep. A record
 * stamped ahead is read again by each poll anyway (it stays past the watermark).
 */
export function movesWatermark(stamp: number, present: number): boolean {
  return stamp <= present;
}

/**
 * The watermark a read may commit: the largest updated_date read, but never past the upstream's present. Not the
 * present plus the lookback's floor: the next poll starts the floor and this poll's paging time before the
 * watermark, and the floor is what covers a change stamped just before this poll began but shown after its pages
 * were read; a watermark a floor past the present would start the next poll at this one's start, and miss it
 * (schedule seed 943: such a change waited 11.6 s while a stamp ahead was listed).
 */
export function cappedWatermark(maxSeen: number, present: number): number {
  return Math.min(maxSeen, present);
}
