// How far behind the watermark an incremental poll starts. The watermark is the largest updated_date committed (the
// data's own clock), so the only reason to read before it is that a change can become visible to the listing after
// a later one already was (a long transaction, a replica behind, a batch import): its updated_date is then older than
// time polls had already covered. The lookback is learned from those late arrivals as polls see them, a small
// multiple of the latest seen over the last hour (by polls, trailing reads and sweeps alike), between a floor (the
// listing's timestamp granularity: ties at the watermark are read again, and the diff drops what the snapshot already
// has) and the POLL_OVERLAP_MS ceiling; polls also cap it at what their share of the rate budget reads
// (poll-state.ts). Anything later than the lookback is left to the trailing reads (src/core/trailing.ts), and what
// shows later than POLL_OVERLAP_MS to the next sweep; each counts what it finds. Each change is then read about
// (interval + lookback + a poll's own duration) / interval times instead of overlap / interval times.

/** Settings of a learned lookback. */
export interface LookbackSettings {
  /** Never less (ms): the listing's timestamp granularity, and some slack. */
  floorMs: number;
  /** Never more (ms): POLL_OVERLAP_MS. */
  ceilingMs: number;
  /** fixed: always the ceiling (the lookback of earlier versions); learned: from late arrivals. */
  mode: 'learned' | 'fixed';
}

/** How many times the latest lateness seen the lookback covers: a later one is likely and costs little to read. */
export const LATENESS_MULTIPLE = 2;

/** How long a late arrival counts (ms), kept as per-minute maxima so that memory stays bounded. */
export const LATENESS_WINDOW_MS = 3_600_000;
const BUCKET_MS = 60_000;

/** The lookback of one account's polls, learned from the late arrivals they see. */
export class Lookback {
  /** Largest lateness (ms) seen per minute, oldest first: [minute, lateness]. */
  private readonly buckets: Array<[number, number]> = [];

  constructor(private readonly settings: LookbackSettings) {}

  /** How far before the watermark the next poll starts (ms), at local time `now`. */
  current(now: number): number {
    const { floorMs, ceilingMs, mode } = this.settings;
    if (mode === 'fixed') return ceilingMs;
    const learned = LATENESS_MULTIPLE * this.latest(now);
    return Math.min(ceilingMs, Math.max(floorMs, learned));
  }

  /** The largest lateness (ms) seen within the window before `now` (0: none). */
  latest(now: number): number {
    this.expire(now);
    let max = 0;
    for (const [, lateness] of this.buckets) max = Math.max(max, lateness);
    return max;
  }

  /** A read found a change `latenessMs` older than the watermark polls had covered when it showed. */
  observe(latenessMs: number, now: number): void {
    if (!(latenessMs > 0)) return;
    this.expire(now);
    const minute = Math.floor(now / BUCKET_MS);
    const last = this.buckets.at(-1);
    if (last && last[0] === minute) last[1] = Math.max(last[1], latenessMs);
    else this.buckets.push([minute, latenessMs]);
  }

  private expire(now: number): void {
    const oldest = Math.floor((now - LATENESS_WINDOW_MS) / BUCKET_MS);
    while (this.buckets.length > 0 && this.buckets[0]![0] <= oldest) this.buckets.shift();
  }
}

/** What a poll's committed changes say of visibility: the lateness of the oldest change before `covered`. */
export function latenessOf(covered: number, changedDates: Iterable<number>): number {
  let oldest = Infinity;
  for (const d of changedDates) oldest = Math.min(oldest, d);
  return oldest < covered ? covered - oldest : 0;
}
