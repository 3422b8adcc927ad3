import { latenessOf } from '../../core/lookback.js';
import { movesWatermark } from '../../core/upstream-present.js';
import type { PagePipeline, PassSummary, PipelineRun } from '../pipeline.js';
import type { ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';
import { showBounds } from './trailing.js';

// An incremental poll: every review changed since the watermark less the polls' lookback, through the pipeline.
// The watermark moves only when the whole poll is committed, to the largest updated_date read: the data's own clock,
// never the bridge's nor the upstream's Date header (those two may differ from it by minutes), but never past the
// upstream's present (src/core/upstream-present.ts): a record stamped past it moves no watermark (movesWatermark), is
// read again by each poll until time reaches it, and hides nothing else. A poll that reads nothing newer than the
// data's present at its start (once the bridge has learned it) covers that present: a quiet spell does not make every
// poll read the last burst again. The lookback is learned from changes that become visible late
// (src/core/lookback.ts); a change made while the poll paged, behind its position in an unknown sort order, is
// covered by the next poll starting from where this one started, or from its watermark less its paging time if
// that is later (PollState.pagedFrom). Polls also run during the
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
  // The upstream's time at the start of the poll (its Date headers; null: none seen).
  const headerAt = source.upstreamNow?.() ?? null;
  // A sweep page still in flight commits first (its failure stays the sweep's), so the checkpoint read is current.
  await pipeline.settle();
  const ckpt = await pipeline.deps.snapshot.checkpoint(true, pipeline.committer.sealed);
  if (ckpt.watermark === null) throw new Error('incremental poll before the initial load set a watermark');
  // A watermark committed past the upstream's present (by an earlier version, or restored with its checkpoint) is
  // read from the present: the committed one only grows, but polls do not trust it.
  const covered = Math.min(ckpt.watermark, ctx.polls.presentCap(startedAt, headerAt));
  // During the initial load a poll meets reviews the load has not reached yet: not late, only not loaded.
  const learns = ckpt.initialDone;
  // Taken before this poll replaces the last one's start and paging time (poll-state.ts).
  const lateBefore = ctx.polls.lateBefore(covered);
  // Taken at the start and before this poll's samples: what the poll covers even if it finds nothing (poll-state.ts).
  const present = learns ? ctx.polls.coveredAtStart(startedAt, headerAt) : null;
  const run = pipeline.open('incremental', epoch, {
    createdAsInitial: !ckpt.initialDone,
    lateBefore: learns ? () => lateBefore : undefined,
  });
  try {
    const { summary, watermark } = await poll(ctx, run, source, { covered, present }, headerAt, signal);
    const now = ctx.clock();
    if (learns) {
      const lateness = latenessOf(lateBefore, [summary.oldestChange ?? Infinity]);
      ctx.polls.lookback.observe(lateness, now);
      if (lateness > 0) ctx.metrics.setLatenessSeen('poll', lateness);
    }
    // The data's clock, from the newest change found unless it was late (src/core/upstream-present.ts: late ones
    // would drag the present, and the watermark capped at it, behind what polls covered). Not during the initial
    // load: what polls find then are reviews it has not reached, old ones too, not changes.
    ctx.polls.loaded = learns;
    const newest = summary.newestChange;
    if (learns && newest != null && newest >= lateBefore) {
      const ahead = !movesWatermark(newest, ctx.polls.presentCap(now, source.upstreamNow?.() ?? headerAt));
      ctx.polls.present.observe(newest, now, summary.newestChangeOf, ahead);
    }
    ctx.polls.read(summary.reviews, watermark - ctx.polls.since(covered, startedAt));
    // The density just read prices the trailing tiers' shares; the bounds they hold show after every poll.
    ctx.polls.allotTrailing(now);
    showBounds(ctx, now);
    ctx.metrics.setPollLookback(ctx.polls.lookbackMs(now));
    ctx.metrics.pollRead(summary.reviews, summary.changes ?? 0);
    const overran = ctx.polls.committed(covered, watermark, startedAt, now);
    noteOverrun(ctx, pipeline, overran, now - startedAt);
    run.end('ok');
    return summary;
  } catch (err) {
    run.end(signal.aborted ? 'aborted' : 'error', err);
    throw err;
  }
}

/**
 * The pages of a poll from the watermark `covered` less the lookback, then its new watermark: the newest stamp read,
 * or `present` (the data's present at its start, once learned) if that is later.
 */
async function poll(
  ctx: PassContext,
  run: PipelineRun,
  source: ReviewSource,
  { covered, present }: { covered: number; present: number | null },
  headerAt: number | null,
  signal: AbortSignal,
): Promise<{ summary: PassSummary; watermark: number }> {
  let maxSeen = Math.max(covered, present ?? covered);
  let pageHeaderAt = headerAt;
  const since = ctx.polls.since(covered, ctx.clock());
  for await (const page of source.pages({ updatedSince: since, kind: 'incremental', signal })) {
    if (page.upstreamAt != null) pageHeaderAt = page.upstreamAt + (ctx.clock() - page.fetchedAt);
    maxSeen = Math.max(maxSeen, ctx.polls.newestMoving(page.reviews, ctx.clock(), pageHeaderAt) ?? maxSeen);
    await run.submit(page);
  }
  const now = ctx.clock();
  const watermark = Math.max(covered, ctx.polls.watermarkOf(maxSeen, now, source.upstreamNow?.() ?? pageHeaderAt));
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
      { durationMs, intervalMs, lookbackMs: ctx.polls.lookbackMs(ctx.clock()) },
      'polls take longer than POLL_INTERVAL_MS: changes wait longer (see reviews_bridge_poll_reads_per_change)',
    );
  } else logger.info({ durationMs, intervalMs }, 'polls fit their interval again');
}
