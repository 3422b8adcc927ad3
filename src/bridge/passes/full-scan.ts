import type { LongPassType } from '../../core/domain.js';
import type { PagePipeline, PassSummary, PipelineRun } from '../pipeline.js';
import type { Checkpoint, CheckpointUpdate } from '../../redis/snapshot-store.js';
import type { Page, ReviewSource } from '../../upstream/types.js';
import { hasKind } from '../../core/errors.js';
import type { PassContext } from './context.js';
import type { DeletionDeps } from './deletions.js';
import { ScanCursor, type ScanState } from './scan-cursor.js';
import { SweepIds, unreadableDigester, type SweepDeletions } from './sweep-deletions.js';

// A full scan reads the whole listing from a resumable cursor: the initial load of an empty snapshot, or the
// reconciliation sweep that catches what polls missed. It advances one page per step so that incremental polls
// can cut in between pages, and checkpoints its cursor (src/bridge/passes/scan-cursor.ts) so that a restart
// resumes instead of starting over; a complete sweep ends with deletion detection (sweep-deletions.ts).

/** A full scan (or a resync) in progress: the loop steps it a page at a time between polls. */
export interface LongPassRun {
  readonly type: LongPassType;
  /** Totals so far. */
  readonly summary: PassSummary;
  /** Whether incremental polls can run alongside (the checkpoint has a watermark: an initial load's first page). */
  readonly pollable: boolean;
  /** Whether it waits on the reads alongside (a sweep's deletions: sweep-deletions.ts); absent: never. */
  readonly idle?: boolean;
  /** Processes the next page; resolves false when the scan has completed and been committed. */
  step(): Promise<boolean>;
  /** Abandons the scan: closes the page iterator (its abort listeners and prefetch). The checkpoint keeps the cursor. */
  close(): Promise<void>;
}

/**
 * Starts or resumes (from its checkpointed cursor) a full scan; the initial load when the snapshot is empty.
 * `alongside`: the loop runs polls and trailing reads beside it, and its deletions wait for them (sweep-deletions.ts);
 * false for a scan run alone (the `sweep` command, tests), which has no reads to wait for.
 */
export async function openFullScan(
  ctx: PassContext,
  pipeline: PagePipeline,
  source: ReviewSource,
  epoch: number,
  signal: AbortSignal,
  deletion: DeletionDeps | null = null,
  alongside = false,
): Promise<LongPassRun> {
  await pipeline.settle();
  const ckpt = await pipeline.deps.snapshot.checkpoint(true, pipeline.committer.sealed);
  const kind = ckpt.sweep?.kind ?? (ckpt.initialDone ? 'sweep' : 'initial');
  // A sweep's creations and status changes older than what polls covered were missed by them (visible too late).
  const lateBefore = kind === 'sweep' ? () => ctx.polls.missedBefore(ctx.clock()) : undefined;
  // Its lateness teaches the polls' lookback as theirs does (when it showed is unknown: at most this late).
  const onLate = (latenessMs: number) => {
    ctx.metrics.setLatenessSeen('sweep', latenessMs);
    ctx.polls.lookback.observe(latenessMs, ctx.clock());
  };
  const run = pipeline.open(kind, epoch, { lateBefore, onLate });
  const scan = await startOrResume(ctx, pipeline, run, ckpt);
  const fromStart = scan.cursor === null && scan.seen === 0;
  const digestOf = await unreadableDigester(pipeline);
  const ids = deletion && fromStart ? new SweepIds(digestOf) : null;
  const upstreamPages = source.pages({ cursor: scan.cursor, kind: 'sweep', signal });
  const pages: AsyncIterator<Page> = upstreamPages[Symbol.asyncIterator]();
  if (deletion) deletion.metrics.setDeletionDeferredSweeps(ckpt.deferredSweeps);
  const cursor = new ScanCursor(scan, ctx, ckpt.watermark !== null);
  cursor.estimatedTotal = scan.kind === 'initial' ? null : await pipeline.deps.snapshot.size();
  cursor.progress();
  // Deletion detection after the last page, a snapshot batch per step (polls run in between), then the end commit.
  let detection: { deletions: SweepDeletions; update: CheckpointUpdate } | null = null;
  let closed = false;

  const finishScan = async (update: CheckpointUpdate): Promise<false> => {
    closed = true;
    await run.commit(update);
    cursor.finished(update);
    return false;
  };
  const nextPage = () =>
    pages.next().catch(async (err: unknown) => {
      // An expired or invalid checkpointed cursor would fail from the same place for ever: the scan starts over.
      if (hasKind(err, 'cursor_invalid')) {
        await run.settle();
        await run.commit({ sweep: { kind: scan.kind, cursor: null, startedAt: ctx.clock(), seen: 0 } });
        pipeline.deps.logger.warn({ kind: scan.kind }, 'the listing refused the sweep cursor; the sweep starts over');
      }
      throw err;
    });
  const endOfListing = async (): Promise<boolean> => {
    const update = cursor.endUpdate();
    if (ids && scan.kind === 'initial') ids.endInitialLoad(update);
    else if (ids && deletion) {
      await run.settle();
      // A review updated while the sweep paged may have moved behind its cursor: the deletions read the listing
      // again when it is sorted newest first, and wait for the reads alongside (sweep-deletions.ts).
      const reread = (since: number) =>
        source.pages({ updatedSince: since, kind: 'sweep', signal })[Symbol.asyncIterator]();
      const reads = alongside ? ctx.polls : null;
      const end = { pipeline, run, deletion, ckpt, startedAt: scan.startedAt, alongside: reads, reread };
      const deletions = ids.endSweep(end, update);
      if (deletions) {
        detection = { deletions, update };
        return true;
      }
    }
    return finishScan(update);
  };

  return tracedScan(run, signal, {
    type: scan.kind,
    summary: run.summary,
    get pollable() {
      return cursor.watermarkSet;
    },
    get idle() {
      return detection?.deletions.idle ?? false;
    },
    step: async () => {
      if (detection) return (await detection.deletions.step()) || finishScan(detection.update);
      const next = await nextPage();
      if (next.done) return endOfListing();
      const page = next.value;
      // The initial load's first page sets the watermark that polls start from, from the data's own clock.
      const recent = cursor.setsWatermark ? await recentChange(source, page.upstreamAt ?? null, ctx, signal) : null;
      const { checkpoint, commitIfUnchanged, watermark } = cursor.advance(page, recent);
      ids?.list(page);
      if (await run.submit(page, { checkpoint, commitIfUnchanged })) cursor.committed();
      if (watermark !== null) {
        // Committed with this page (the pipeline commits in order): polls may start once it is.
        await run.settle();
        cursor.watermarkCommitted(watermark);
      }
      cursor.progress();
      return true;
    },
    close: async () => {
      await detection?.deletions.close();
      if (closed) return;
      closed = true;
      await pages.return?.();
    },
  });
}

/**
 * The updated_date of a recent change, for the initial load's first watermark: the listing's first page may hold
 * only old reviews (it is ordered by id, say), and polls would then read the whole account again from there. The
 * upstream's time seeds one-page incremental listings reaching back POLL_OVERLAP_MS, then twice as far each time,
 * until one holds a review (its data's clock may run minutes behind the Date header): at most about 20 requests,
 * once per initial load. Its newest stamp no later than the present (movesWatermark, as in polls: a record stamped
 * ahead is no recent change, and capped at the present it set the watermark there, ahead of the data when local
 * time runs ahead: date-header-apart seeds 430010, 430087). Null when there is no upstream time, nothing changed
 * since `floor`, or the first listing holding a review holds only stamps past the present (reaching further back
 * would find none either when the present is behind the data, as a header behind it makes it: the load's own pages
 * then set the watermark).
 */
async function recentChange(
  source: ReviewSource,
  upstreamAt: number | null,
  ctx: PassContext,
  signal: AbortSignal,
): Promise<number | null> {
  if (upstreamAt === null) return null;
  for (let back = Math.max(1_000, ctx.overlapMs); back < upstreamAt; back *= 2) {
    const listing = source.pages({ updatedSince: upstreamAt - back, kind: 'incremental', signal });
    const pages = listing[Symbol.asyncIterator]();
    try {
      const first = await pages.next();
      if (!first.done && first.value.reviews.length > 0) {
        return ctx.polls.newestMoving(first.value.reviews, ctx.clock(), first.value.upstreamAt ?? upstreamAt);
      }
    } finally {
      await pages.return?.();
    }
  }
  return null;
}

/** The scan's checkpointed position: a fresh one (committed as the pass's start), or the one it resumes from. */
async function startOrResume(
  ctx: PassContext,
  pipeline: PagePipeline,
  run: PipelineRun,
  ckpt: Checkpoint,
): Promise<ScanState> {
  if (ckpt.sweep !== null) {
    pipeline.deps.logger.info({ kind: ckpt.sweep.kind, seen: ckpt.sweep.seen }, 'resuming sweep from its checkpoint');
    return ckpt.sweep;
  }
  const state: ScanState = {
    kind: ckpt.initialDone ? 'sweep' : 'initial',
    cursor: null,
    startedAt: ctx.clock(),
    seen: 0,
  };
  await run.commit({ sweep: state });
  return state;
}

/** A scan whose pass span ends with it: completed, failed (or aborted) at a step, or abandoned by close(). */
export function tracedScan(run: PipelineRun, signal: AbortSignal, scan: LongPassRun): LongPassRun {
  return {
    type: scan.type,
    summary: scan.summary,
    get pollable() {
      return scan.pollable;
    },
    get idle() {
      return scan.idle;
    },
    step: async () => {
      try {
        const more = await scan.step();
        if (!more) run.end('ok');
        return more;
      } catch (err) {
        run.end(signal.aborted ? 'aborted' : 'error', err);
        throw err;
      }
    },
    close: async () => {
      run.end('abandoned');
      await scan.close();
    },
  };
}
