import type { PagePipeline, PassSummary, PipelineRun } from '../pipeline.js';
import type { ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';

// An incremental poll: every review changed since the watermark minus the overlap window, through the pipeline.
// The watermark moves only when the whole poll is committed, to the largest updated_date seen but never past the
// poll's start in the upstream's own time: a change made while the poll was paging (behind its position in an
// unknown sort order) is then still ahead of the next poll. Polls also run during the initial load (from the
// watermark its first page set); the reviews they find first are created as the initial load would create them.

/** Runs one incremental poll under `epoch`; resolves its totals once the new watermark is committed. */
export async function runIncrementalPoll(
  ctx: PassContext,
  pipeline: PagePipeline,
  source: ReviewSource,
  epoch: number,
  signal: AbortSignal,
): Promise<PassSummary> {
  // The upstream's time at the start of the poll (its Date headers); null when it sends none (no cap then: the
  // overlap window still covers a change made while the poll paged).
  const started = source.upstreamNow?.() ?? null;
  // A sweep page still in flight commits first (its failure stays the sweep's), so the checkpoint read is current.
  await pipeline.settle();
  const ckpt = await pipeline.deps.snapshot.checkpoint(true);
  if (ckpt.watermark === null) throw new Error('incremental poll before the initial load set a watermark');
  const run = pipeline.open('incremental', epoch, { createdAsInitial: !ckpt.initialDone });
  try {
    const summary = await poll(ctx, run, source, ckpt.watermark, started, signal);
    run.end('ok');
    return summary;
  } catch (err) {
    run.end(signal.aborted ? 'aborted' : 'error', err);
    throw err;
  }
}

/** The pages of a poll from the watermark `from` minus the overlap, then its new watermark. */
async function poll(
  ctx: PassContext,
  run: PipelineRun,
  source: ReviewSource,
  from: number,
  started: number | null,
  signal: AbortSignal,
): Promise<PassSummary> {
  const ckpt = { watermark: from };
  let maxSeen = ckpt.watermark;
  const since = Math.max(0, ckpt.watermark - ctx.overlapMs);
  for await (const page of source.pages({ updatedSince: since, kind: 'incremental', signal })) {
    started ??= page.upstreamAt ?? null;
    for (const r of page.reviews) maxSeen = Math.max(maxSeen, r.updated_date);
    await run.submit(page);
  }
  const now = ctx.clock();
  const watermark = started === null ? maxSeen : Math.min(maxSeen, started);
  await run.commit({ watermark, lastIncrementalAt: now });
  ctx.metrics.setWatermark(Math.max(ckpt.watermark, watermark));
  ctx.metrics.incrementalPollCompleted(new Date(now));
  return run.summary;
}
