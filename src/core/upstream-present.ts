// The upstream's present, in the clock of its data (the updated_date it stamps): what caps the watermark. A record
// stamped ahead of it (one writer whose clock runs fast) must not carry the watermark past changes made after it,
// or every poll would start after them until time reached its stamp. The data's clock may differ from the Date
// header's by minutes or an hour (a gateway and a database keeping different time), so the present is learned from
// the changes polls find: per review, how far its newest change found stood from the local time the poll ended
// (a stamp is no later than the data's present when its page was read, so an honest sample is never ahead of the
// data's clock; the poll's start would make it run ahead by up to the poll's duration). Running behind costs
// re-reads; running ahead hides changes. So the estimate is a low quartile over distinct reviews: records stamped
// ahead move it only if they are three quarters of the reviews sampled (all of the first three), and one review
// stamped ahead and changed again and again (its stamps stay ahead: each a ms past the last) is one sample. Before
// PRESENT_MIN_SAMPLES reviews: the Date header's time; without one, local time.

/** Reviews whose newest change found stands for the data's clock (a low quartile over them). */
export const PRESENT_SAMPLES = 15;
/** Fewer reviews sampled than this: the Date header (or local time) stands for the present. */
export const PRESENT_MIN_SAMPLES = 3;

/** The data clock's offset from local time, learned from the changes polls find. */
export class DataPresent {
  /** Per review: its newest change found less the local time that poll ended (ms), least recently sampled first. */
  private readonly samples = new Map<string, number>();

  /**
   * A poll that ended at local time `endedAt` found changes, the newest stamped `newest`, of review `review`
   * (absent: a sample of its own).
   */
  observe(newest: number, endedAt: number, review?: string | null): void {
    if (!Number.isFinite(newest)) return;
    const key = review ?? `#${newest}@${endedAt}`;
    this.samples.delete(key);
    this.samples.set(key, newest - endedAt);
    if (this.samples.size > PRESENT_SAMPLES) this.samples.delete(this.samples.keys().next().value!);
  }

  /** The learned offset (ms; positive: the data's clock is ahead of local time), or null before enough samples. */
  offset(): number | null {
    if (this.samples.size < PRESENT_MIN_SAMPLES) return null;
    const sorted = [...this.samples.values()].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 4)]!;
  }

  /** The data's present at local time `localNow`; `headerAt`: the Date header's time then (null: none seen). */
  at(localNow: number, headerAt: number | null): number {
    const offset = this.offset();
    return offset === null ? (headerAt ?? localNow) : localNow + offset;
  }
}

/**
 * The watermark a read may commit: the largest updated_date read, but never past the upstream's present. Not the
 * present plus the lookback's floor: the next poll starts the floor and this poll's paging time before the
 * watermark, and the floor is what covers a change stamped just before this poll began but shown after its pages
 * were read; a watermark a floor past the present would start the next poll at this one's start, and miss it.
 */
export function cappedWatermark(maxSeen: number, present: number): number {
  return Math.min(maxSeen, present);
}
