import { dataWatermark, latenessOf } from '../../core/lookback.js';
import type { PagePipeline, PassSummary, PipelineRun } from '../pipeline.js';
import type { ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';

// An incremental poll: every review changed since the watermark less the polls' lookback, through the pipeline.
// The watermark moves only when the whole poll is committed, to the largest updated_date read: the data's own clock,
// never the bridge's nor the upstream's Date header (those two may differ from it by minutes; the header only caps
// a record stamped far ahead, see dataWatermark). The lookback is learned from changes that become visible late
// (src/core/lookback.ts); a change made while the poll paged, behind its position in an unknown sort order, is
// covered by the next poll starting earlier by this poll's paging time (poll-state.ts). Polls also run during the
// initial load (from the watermark its first page set); the reviews they find first are created as the initial
// load would create them.

/** Runs one incremental poll under `epoch`; resolves its totals once the new watermark is committed. */
export async function runIncrementalPoll(
  ctx: PassContext,
  pipeline: PagePipeline,
  source: ReviewSource,
  epoch: number,
  signal: AbortSignal,
): Promise<PassSummary> {
  const startedAt = ctx.clock();
  // The upstream's time at the start of the poll (its Date headers): it caps the new watermark (null: no cap).
  const upstreamAt = source.upstreamNow?.() ?? null;
  // A sweep page still in flight commits first (its failure stays the sweep's), so the checkpoint read is current.
  await pipeline.settle();
  const ckpt = await pipeline.deps.snapshot.checkpoint(true);
  if (ckpt.watermark === null) throw new Error('incremental poll before the initial load set a watermark');
  const covered = ckpt.watermark;
  // During the initial load a poll meets reviews the load has not reached yet: not late, only not loaded.
  const learns = ckpt.initialDone;
  // Taken before this poll replaces the last one's paging time (poll-state.ts).
  const lateBefore = ctx.polls.lateBefore(covered);
  const run = pipeline.open('incremental', epoch, {
    createdAsInitial: !ckpt.initialDone,
    lateBefore: learns ? () => lateBefore : undefined,
  });
  try {
    const { summary, watermark } = await poll(ctx, run, source, covered, upstreamAt, signal);
    const now = ctx.clock();
    if (learns) ctx.polls.lookback.observe(latenessOf(lateBefore, [summary.oldestChange ?? Infinity]), now);
    ctx.metrics.setPollLookback(ctx.polls.lookback.current(now));
    ctx.metrics.pollRead(summary.reviews, summary.changes ?? 0);
    const overran = ctx.polls.committed(watermark, startedAt, now);
    noteOverrun(ctx, pipeline, overran, now - startedAt);
    run.end('ok');
    return summary;
  } catch (err) {
    run.end(signal.aborted ? 'aborted' : 'error', err);
    throw err;
  }
}

/** The pages of a poll from the watermark `covered` less the lookback, then its new watermark. */
async function poll(
  ctx: PassContext,
  run: PipelineRun,
  source: ReviewSource,
  covered: number,
  upstreamAt: number | null,
  signal: AbortSignal,
): Promise<{ summary: PassSummary; watermark: number }> {
  let maxSeen = covered;
  const since = ctx.polls.since(covered, ctx.clock());
  for await (const page of source.pages({ updatedSince: since, kind: 'incremental', signal })) {
    upstreamAt ??= page.upstreamAt ?? null;
    for (const r of page.reviews) maxSeen = Math.max(maxSeen, r.updated_date);
    await run.submit(page);
  }
  const now = ctx.clock();
  const watermark = Math.max(covered, dataWatermark(maxSeen, upstreamAt, ctx.overlapMs));
  await run.commit({ watermark, lastIncrementalAt: now });
  ctx.metrics.setWatermark(watermark);
  ctx.metrics.incrementalPollCompleted(new Date(now));
  return { summary: run.summary, watermark };
}

/** Counts a poll that did not fit its interval, and says so once when such an episode begins and once when it ends. */
function noteOverrun(ctx: PassContext, pipeline: PagePipeline, overran: boolean, durationMs: number): void {
  if (overran) ctx.metrics.pollOverran();
  if (overran === ctx.polls.overrunning) return;
  ctx.polls.overrunning = overran;
  const { logger } = pipeline.deps;
  const intervalMs = ctx.polls.settings.intervalMs;
  if (overran) {
    logger.warn(
      { durationMs, intervalMs, lookbackMs: ctx.polls.lookback.current(ctx.clock()) },
      'polls take longer than POLL_INTERVAL_MS: changes wait longer (see reviews_bridge_poll_reads_per_change)',
    );
  } else logger.info({ durationMs, intervalMs }, 'polls fit their interval again');
}
