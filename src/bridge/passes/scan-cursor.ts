import type { Checkpoint, CheckpointUpdate } from '../../core/checkpoint.js';
import { progressOf } from '../../core/progress.js';
import type { Page } from '../../upstream/types.js';
import type { PassContext } from './context.js';

// Where a full scan stands between its pages: its cursor and count (checkpointed so that a restart resumes), the
// watermark the initial load's first page sets, and the progress the metrics show.

// Unchanged pages commit their cursor at most this often: re-reading a few unchanged pages after a crash is
// harmless, and skipping the write keeps the unchanged path to one Redis round trip a page.
const CURSOR_COMMIT_INTERVAL_MS = 1_000;

/** A full scan's checkpointed position: kind, resume cursor, start and the records seen. */
export type ScanState = NonNullable<Checkpoint['sweep']>;

/** What a page's commit carries of the scan's position. */
export interface PageCheckpoint {
  checkpoint: CheckpointUpdate;
  /** Commit even when the page changes nothing: the cursor is due, or the first page sets the watermark. */
  commitIfUnchanged: boolean;
  /** The watermark this page sets (the initial load's first page with an upstream time), else null. */
  watermark: number | null;
}

/** The position and progress of one full scan. */
export class ScanCursor {
  private lastCommitAt: number;
  /** The largest updated_date read: the watermark of an upstream that sends no time. */
  private maxSeen: number | null = null;
  /** The largest updated_date read that was no later than the upstream's present then (PollState.newestMoving). */
  private maxMoving: number | null = null;
  /** Whether the checkpoint has a watermark, so that polls can run alongside. */
  watermarkSet: boolean;
  /** The scan's estimated total (the snapshot's size; none for the initial load of an empty snapshot). */
  estimatedTotal: number | null = null;

  constructor(
    readonly scan: ScanState,
    private readonly ctx: PassContext,
    hasWatermark: boolean,
  ) {
    this.lastCommitAt = ctx.clock();
    this.watermarkSet = hasWatermark;
  }

  /** Whether the next page is the initial load's first, which sets the watermark so that polls run alongside. */
  get setsWatermark(): boolean {
    return this.scan.kind === 'initial' && !this.watermarkSet;
  }

  /**
   * Moves past a page. The initial load's first page sets the watermark from the data's own clock: the largest
   * updated_date read so far (with `recent`, one a short incremental listing found), never the bridge's or the
   * Date header's time. Every change made after that is at or after it (late ones within the polls' lookback).
   */
  advance(page: Page, recent: number | null = null): PageCheckpoint {
    const { scan } = this;
    const setsWatermark = this.setsWatermark;
    scan.cursor = page.nextCursor;
    scan.seen += page.reviews.length + page.rejects.length;
    this.read(page);
    const due = this.ctx.clock() - this.lastCommitAt >= CURSOR_COMMIT_INTERVAL_MS;
    const checkpoint: CheckpointUpdate = { sweep: { ...scan } };
    if (!setsWatermark) return { checkpoint, commitIfUnchanged: due, watermark: null };
    // `recent` is a stamp no later than the present: the page's stamps past it do not outweigh it.
    const seen = recent === null ? this.watermarkSeen() : Math.max(this.maxMoving ?? recent, recent);
    const watermark = this.ctx.polls.watermarkOf(seen, this.ctx.clock(), page.upstreamAt ?? null);
    checkpoint.watermark = watermark;
    return { checkpoint, commitIfUnchanged: true, watermark };
  }

  /**
   * Counts a page's stamps. One past the upstream's present moves no watermark (src/core/upstream-present.ts), here
   * as in polls: capped at the present, it carried the load's first watermark there, and a present itself ahead of
   * the data (before three reviews are sampled, local time may be) hid every change from polls until the data's
   * clock reached it (date-header-apart seed 430010: a record stamped an hour ahead, local time 120 s ahead of the
   * data, every change of the next two minutes found by trailing reads and sweeps only).
   */
  private read(page: Page): void {
    for (const review of page.reviews) this.maxSeen = Math.max(this.maxSeen ?? 0, review.updated_date);
    const moving = this.ctx.polls.newestMoving(page.reviews, this.ctx.clock(), page.upstreamAt ?? null);
    if (moving !== null) this.maxMoving = Math.max(this.maxMoving ?? 0, moving);
  }

  /**
   * The largest stamp read that may set the watermark: one no later than the present when read; when every stamp
   * read was past it, any of them (watermarkOf caps it at the present: nothing read is older); 0 when none was read.
   */
  private watermarkSeen(): number {
    return this.maxMoving ?? this.maxSeen ?? 0;
  }

  /** A page's commit was made: the cursor's interval starts again. */
  committed(): void {
    this.lastCommitAt = this.ctx.clock();
  }

  /** The watermark a page set is committed: polls may start. */
  watermarkCommitted(watermark: number): void {
    this.watermarkSet = true;
    this.ctx.metrics.setWatermark(watermark);
  }

  /** Shows how far the scan is. */
  progress(): void {
    const { scan, ctx } = this;
    ctx.metrics.sweepProgress(scan.seen, true);
    const sample = {
      seen: scan.seen,
      estimatedTotal: this.estimatedTotal,
      startedAt: scan.startedAt,
      now: ctx.clock(),
    };
    ctx.metrics.passProgress(scan.kind, progressOf(sample).fraction);
  }

  /** The checkpoint fields of a scan that listed its last page. */
  endUpdate(): CheckpointUpdate {
    // The initial load covers everything changed before it started; polls take over from there.
    const update: CheckpointUpdate = { sweep: null, lastSweepAt: this.ctx.clock(), initialDone: true };
    // A load that ended before a first page was committed (an empty listing): the largest updated_date read.
    if (this.scan.kind === 'initial' && !this.watermarkSet) {
      update.watermark = this.ctx.polls.watermarkOf(this.watermarkSeen(), this.ctx.clock(), null);
    }
    return update;
  }

  /** Shows the scan as finished, with the watermark its end set. */
  finished(update: CheckpointUpdate): void {
    if (update.watermark !== undefined) this.ctx.metrics.setWatermark(update.watermark);
    this.ctx.metrics.sweepProgress(this.scan.seen, false);
    this.ctx.metrics.passProgress(this.scan.kind, null);
  }
}
