// Progress of a long pass (sweep, initial load, resync): a pure model computed from what the checkpoint records,
// and a terminal renderer (a bar on a TTY, plain lines otherwise). Used by `status`, `sweep --wait` and `resync`;
// the leader feeds the fraction to the pass_progress_ratio metric.

/** What is known about a running pass at one moment. */
export interface ProgressSample {
  /** Reviews seen so far. */
  seen: number;
  /** Estimated total (e.g. the snapshot's review count, or the previous sweep's total); null when unknown. */
  estimatedTotal: number | null;
  /** When the pass started (ms). */
  startedAt: number;
  /** Now (ms). */
  now: number;
}

/** Seen, estimated total, fraction done, rate and ETA of a pass; null where it cannot be told yet. */
export interface Progress {
  seen: number;
  /** Never below `seen`: a listing larger than the estimate raises it. */
  estimatedTotal: number | null;
  /** 0..1, null without an estimate. */
  fraction: number | null;
  /** Reviews per second since the start, null before any time has passed. */
  ratePerSecond: number | null;
  /** Seconds to the estimated end at the current rate, null when rate or estimate is unknown. */
  etaSeconds: number | null;
}

/** Computes the progress of a pass from one sample. */
export function progressOf(sample: ProgressSample): Progress {
  const seen = Math.max(0, sample.seen);
  const total =
    sample.estimatedTotal === null || !Number.isFinite(sample.estimatedTotal)
      ? null
      : Math.max(seen, sample.estimatedTotal);
  const elapsed = (sample.now - sample.startedAt) / 1000;
  const rate = elapsed > 0 ? seen / elapsed : null;
  const fraction = total === null ? null : total === 0 ? 1 : seen / total;
  const eta =
    total === null || rate === null || rate === 0
      ? total !== null && seen >= total
        ? 0
        : null
      : (total - seen) / rate;
  return { seen, estimatedTotal: total, fraction, ratePerSecond: rate, etaSeconds: eta };
}

/**
 * The estimated total of a sweep or initial load from the snapshot's size: null for an initial load, whose snapshot
 * is what it is building (it would read 100 % all along).
 */
export function fullScanEstimate(kind: string, snapshotReviews: number): number | null {
  return kind === 'initial' ? null : snapshotReviews;
}

/**
 * The progress of a pass that has ended, having seen `seen` reviews (at least as many as last reported): the total
 * is what it saw, so the line reads n/n 100.0% rather than the estimate's last sample at 100 %.
 */
export function completedProgress(last: Progress, seen: number): Progress {
  const total = Math.max(last.seen, seen);
  return { seen: total, estimatedTotal: total, fraction: 1, ratePerSecond: last.ratePerSecond, etaSeconds: 0 };
}

// Percent with one decimal, rounded down: 100.0 only once everything is seen (2999/3000 is 99.9, not 100.0).
function percentOf(fraction: number): number {
  // The epsilon keeps a product such as 0.285 * 1000 = 284.99999999999997 at 28.5.
  return fraction >= 1 ? 100 : Math.floor(fraction * 1000 + 1e-9) / 10;
}

/** The progress as JSON for `status` (rounded, with the ETA as a date). */
export function progressJson(p: Progress, now: number) {
  return {
    seen: p.seen,
    estimatedTotal: p.estimatedTotal,
    percent: p.fraction === null ? null : percentOf(p.fraction),
    reviewsPerSecond: p.ratePerSecond === null ? null : Math.round(p.ratePerSecond * 10) / 10,
    eta: p.etaSeconds === null ? null : new Date(now + p.etaSeconds * 1000).toISOString(),
  };
}

function duration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** One line of text: `label 4500/10000 45.0% 960/s eta 6s` (unknowns shown as ?). */
export function progressLine(label: string, p: Progress): string {
  const total = p.estimatedTotal === null ? '?' : String(p.estimatedTotal);
  const pct = p.fraction === null ? '?%' : `${percentOf(p.fraction).toFixed(1)}%`;
  const rate = p.ratePerSecond === null ? '?/s' : `${Math.round(p.ratePerSecond)}/s`;
  const eta = p.etaSeconds === null ? '?' : duration(p.etaSeconds);
  return `${label} ${p.seen}/${total} ${pct} ${rate} eta ${eta}`;
}

/** A progress bar of `width` cells followed by the line, for a terminal. */
export function progressBar(label: string, p: Progress, width = 30): string {
  const filled = p.fraction === null ? 0 : Math.round(Math.min(1, p.fraction) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${progressLine(label, p)}`;
}

/** Where progress is written: a TTY (redrawn in place) or anything else (one line per report, throttled). */
export interface ProgressOutput {
  write(text: string): void;
  isTTY?: boolean;
}

/** Draws progress on a terminal, or prints plain lines at most every `plainIntervalMs` when not a TTY. */
export class ProgressReporter {
  private lastPlainAt = Number.NEGATIVE_INFINITY;
  private drawn = false;

  constructor(
    private readonly out: ProgressOutput,
    private readonly label: string,
    private readonly plainIntervalMs = 5_000,
  ) {}

  /** Reports progress now; on a TTY redraws the bar, otherwise prints a line when the interval has passed. */
  update(p: Progress, now = Date.now()): void {
    if (this.out.isTTY) {
      this.out.write(`\r\x1b[2K${progressBar(this.label, p)}`);
      this.drawn = true;
    } else if (now - this.lastPlainAt >= this.plainIntervalMs) {
      this.out.write(`${progressLine(this.label, p)}\n`);
      this.lastPlainAt = now;
    }
  }

  /** Ends the display with a final line (always printed). */
  done(p: Progress, suffix = 'done'): void {
    if (this.out.isTTY) this.out.write(`\r\x1b[2K${progressBar(this.label, p)} ${suffix}\n`);
    else this.out.write(`${progressLine(this.label, p)} ${suffix}\n`);
    this.drawn = false;
  }

  /** True while a TTY bar is on screen (a caller printing something else should end the line first). */
  get active(): boolean {
    return this.drawn;
  }
}
