// The upstream's present, in the clock of its data (the updated_date it stamps): what caps the watermark. A record
// stamped ahead of it (one writer whose clock runs fast) must not carry the watermark past changes made after it,
// or every poll would start after them until time reached its stamp. The data's clock may differ from the Date
// header's by minutes (a gateway and a database keeping different time), so once polls have found changes the
// present is learned from them: the median, over recent polls, of how far the newest change a poll found stood from
// the local time the poll began. One record stamped ahead is one poll's sample and moves no median. Before enough
// samples: the Date header's time; without one, local time.

/** Polls whose newest change stands for the data's clock (a median over them). */
export const PRESENT_SAMPLES = 15;
/** Fewer samples than this: the Date header (or local time) stands for the present. */
export const PRESENT_MIN_SAMPLES = 5;

/** The data clock's offset from local time, learned from the changes polls find. */
export class DataPresent {
  /** Per poll with changes: newest on-time updated_date found less the local time the poll began (ms), oldest first. */
  private readonly samples: number[] = [];

  /** A poll that began at local time `startedAt` found changes, the newest stamped `newest`. */
  observe(newest: number, startedAt: number): void {
    if (!Number.isFinite(newest)) return;
    this.samples.push(newest - startedAt);
    if (this.samples.length > PRESENT_SAMPLES) this.samples.shift();
  }

  /** The learned offset (ms; positive: the data's clock is ahead of local time), or null before enough samples. */
  offset(): number | null {
    if (this.samples.length < PRESENT_MIN_SAMPLES) return null;
    const sorted = [...this.samples].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)]!;
  }

  /** The data's present at local time `localNow`; `headerAt`: the Date header's time then (null: none seen). */
  at(localNow: number, headerAt: number | null): number {
    const offset = this.offset();
    if (offset !== null) return localNow + offset;
    return headerAt ?? localNow;
  }
}

/**
 * The watermark a read may commit: the largest updated_date read, but never past the upstream's present by more
 * than `slackMs` (the lookback's floor, which every poll reads again anyway). A record stamped further ahead is
 * then read again by each poll until time reaches it, and hides nothing else.
 */
export function cappedWatermark(maxSeen: number, present: number, slackMs: number): number {
  return Math.min(maxSeen, present + slackMs);
}
