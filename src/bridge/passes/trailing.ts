import type { TrailingRead } from '../../core/trailing.js';
import { freshnessReport, type FreshnessReport } from '../../core/freshness-report.js';
import type { PollState } from './poll-state.js';
import type { PagePipeline } from '../pipeline.js';
import type { Page, ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';

// A trailing read (src/core/trailing.ts): an incremental read of a tier's window behind the polls, a page per step
// so that polls cut in between, its requests behind the polls' at the rate limiter. It moves no watermark: what it
// finds older than the polls covered is a late change, counted as found by its tier (trailing_<n>), and its
// lateness teaches the polls' lookback as a poll's does. Each tier may have a read open at once; the loop steps
// their pages in proportion to the tiers' shares of the budget (src/core/trailing-shares.ts).

/** A trailing read in progress: the loop steps it a page at a time between polls. */
export interface TrailingRun {
  /** The tier it reads for (1: the narrowest). */
  readonly tier: number;
  /** Processes the next page; resolves false once the read is complete and committed. */
  step(): Promise<boolean>;
  /** Abandons the read (it runs again when next due). */
  close(): Promise<void>;
}

/**
 * Opens the trailing read of `tier` (absent: the one due now among the tiers without one `open`), or resolves null
 * when there is none (or polls have no watermark yet).
 */
export async function openTrailingRead(
  ctx: PassContext,
  pipeline: PagePipeline,
  source: ReviewSource,
  epoch: number,
  signal: AbortSignal,
  tier?: number,
  open: ReadonlySet<number> = new Set(),
): Promise<TrailingRun | null> {
  const { polls } = ctx;
  const startedAt = ctx.clock();
  const present = polls.present.at(startedAt, source.upstreamNow?.() ?? null);
  const read =
    tier === undefined ? polls.trailing.due(startedAt, present, open) : polls.trailing.readFor(tier, present);
  if (read === null) return null;
  const missedBefore = polls.missedBefore(startedAt);
  if (missedBefore === null) return null;
  const foundBy = `trailing_${read.tier.index}`;
  // Late as a poll counts it (older than what polls covered), and as of each page, not of the read's start: pages
  // are asked for as the read goes (between polls, in turn with the other tiers' reads), so a change that showed
  // after the read began, or one within the polls' lookback that the read reached before the next poll, is late
  // too (such changes went uncounted once reads of several tiers stayed open side by side).
  let lateBefore = polls.trailingLateBefore() ?? missedBefore;
  const run = pipeline.open('incremental', epoch, {
    lateBefore: () => (lateBefore = Math.max(lateBefore, polls.trailingLateBefore() ?? lateBefore)),
    foundBy,
    onLate: (latenessMs) => {
      // When it showed is unknown: after the last read whose window held it (which did not find it), at the earliest.
      const lateness = polls.trailing.latenessAtLeast(lateBefore - latenessMs);
      ctx.metrics.setLatenessSeen(foundBy, lateness);
      polls.lookback.observe(lateness, ctx.clock());
    },
  });
  const listing = source.pages({ updatedSince: read.since, kind: 'sweep', signal });
  const pages: AsyncIterator<Page> = listing[Symbol.asyncIterator]();
  polls.trailing.opened(read.tier.index, open);
  return {
    tier: read.tier.index,
    step: async () => {
      try {
        const next = await pages.next();
        // A request of this tier's: its share of the budget is spent by the page (the last, empty answer too).
        polls.trailing.paged(read.tier.index);
        ctx.metrics.trailingRequest(read.tier.index);
        if (!next.done) {
          await run.submit(next.value);
          return true;
        }
        await run.settle();
        // What it found stands for the data's clock only while polls find no on-time change: a present learned too
        // far ahead hides changes from polls, and only what trailing reads find brings it back
        // (src/core/upstream-present.ts).
        const { newestChange, newestChangeOf } = run.summary;
        if (polls.loaded && newestChange != null) {
          polls.present.observeTrailing(newestChange, startedAt, ctx.clock(), newestChangeOf);
        }
        finished(ctx, pipeline, read, { startedAt, present, missedBefore });
        run.end('ok');
        return false;
      } catch (err) {
        run.end(signal.aborted ? 'aborted' : 'error', err);
        throw err;
      }
    },
    close: async () => {
      run.end('abandoned');
      await pages.return?.();
    },
  };
}

/**
 * A read committed: the schedule moves on, the metrics show the window it read and the bound each tier kept, and a
 * bound the budget could not keep (the widest tier's read came later than FRESHNESS_BOUND_MS) is said once.
 */
function finished(
  ctx: PassContext,
  pipeline: PagePipeline,
  read: TrailingRead,
  start: { startedAt: number; present: number; missedBefore: number },
): void {
  const { trailing } = ctx.polls;
  const now = ctx.clock();
  const { startedAt, present, missedBefore } = start;
  trailing.completed(read, startedAt, present, now, missedBefore);
  ctx.metrics.trailingRead(read.tier.index, present - read.since, null);
  showBounds(ctx, now);
  const holding = trailing.holding(now);
  const widest = trailing.tiers.at(-1);
  if (holding === null || !widest) return;
  const behind = holding > 2 * widest.periodMs;
  if (behind === ctx.polls.trailingBehind) return;
  ctx.polls.trailingBehind = behind;
  const { logger } = pipeline.deps;
  if (behind) {
    logger.warn(
      { boundMs: holding, freshnessBoundMs: widest.periodMs },
      'the rate budget does not carry the trailing reads: a late change waits up to boundMs (reviews_bridge_freshness_bound_seconds)',
    );
  } else logger.info({ boundMs: holding }, 'trailing reads keep their bound again');
}

/**
 * Shows the bound each tier holds now, the widest's as the freshness bound, and each tier's share (called after
 * each poll and each trailing read, so that a tier short of budget shows its growing wait, not its last kept bound).
 */
export function showBounds(ctx: Pick<PassContext, 'metrics' | 'polls'>, now: number): void {
  const { trailing } = ctx.polls;
  const allotment = ctx.polls.lastAllotment();
  trailing.holdingByTier(now).forEach(({ tier, holdingMs }, i) => {
    ctx.metrics.trailingRead(tier.index, null, holdingMs);
    const share = allotment?.tiers[i]?.shareRps;
    if (share !== undefined) ctx.metrics.setTrailingShare(tier.index, share);
  });
  ctx.metrics.setFreshnessBound(trailing.holding(now));
}

/** The bound that holds for late changes, for status and the health body (src/core/freshness-report.ts). */
export function freshnessOf(polls: PollState, now: number): FreshnessReport {
  return freshnessReport({
    boundMs: polls.settings.freshnessBoundMs ?? 0,
    tiers: polls.trailing.holdingByTier(now),
    allotment: polls.lastAllotment(),
  });
}
