import type { PagePipeline } from '../pipeline.js';
import { progressOf } from '../../core/progress.js';
import type { ResyncRequest } from '../../core/resync-request.js';
import type { PassProgress } from '../../redis/snapshot-store.js';
import type { Page, ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';
import { tracedScan, type LongPassRun } from './full-scan.js';

// An operator's resync: re-reads the chosen reviews (by id, changed since a date, or all), publishes real
// differences as ordinary events with detection "resync", and refreshes the state-topic row of every review it
// reads. It runs page by page between polls like a sweep, but keeps no cursor: it is short, or asked for again.

/** Where a resync reports its progress (`status`, `resync --wait`). */
export interface ResyncProgressSink {
  setPassProgress(progress: PassProgress): Promise<void>;
  /** The number of reviews in the snapshot: the estimate of an `--all` resync's total. */
  size(): Promise<number>;
  /** Clears the request once its resync has completed (until then a new leader resumes it). */
  finishResync(request: ResyncRequest): Promise<void>;
}

// Progress is written at most this often: one SET per second costs nothing, one per page would.
const PROGRESS_INTERVAL_MS = 1_000;

/** Where a resync runs: the pass context, the pipeline, the upstream, the lease epoch and the stop signal. */
export interface ResyncEnv {
  ctx: PassContext;
  pipeline: PagePipeline;
  source: ReviewSource;
  epoch: number;
  signal: AbortSignal;
}

/** Starts the resync an operator asked for. */
export async function openResync(
  request: ResyncRequest,
  progressSink: ResyncProgressSink,
  { ctx, pipeline, source, epoch, signal }: ResyncEnv,
): Promise<LongPassRun> {
  await pipeline.settle();
  const { scope } = request;
  const wanted = scope.kind === 'ids' ? new Set(scope.ids) : null;
  const listing =
    scope.kind === 'since'
      ? source.pages({ updatedSince: scope.since, kind: 'sweep', signal })
      : source.pages({ cursor: null, kind: 'sweep', signal });
  const pages: AsyncIterator<Page> = listing[Symbol.asyncIterator]();
  const run = pipeline.open('resync', epoch);
  const progress: PassProgress = {
    kind: 'resync',
    requestId: request.id,
    seen: 0,
    estimatedTotal: wanted ? wanted.size : scope.kind === 'all' ? await progressSink.size() : null,
    startedAt: ctx.clock(),
    finishedAt: null,
  };
  let reported = 0;
  const report = async (force = false) => {
    const now = ctx.clock();
    if (!force && now - reported < PROGRESS_INTERVAL_MS) return;
    reported = now;
    const { fraction } = progressOf({ ...progress, now });
    ctx.metrics.passProgress('resync', progress.finishedAt === null ? fraction : null);
    await progressSink.setPassProgress({ ...progress });
  };
  await report(true);
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await pages.return?.();
  };
  return tracedScan(run, signal, {
    type: 'resync',
    summary: run.summary,
    // A resync runs after the initial load only: polls always can.
    pollable: true,
    step: async () => {
      const next = wanted && wanted.size === 0 ? null : await pages.next();
      if (!next || next.done) {
        await close();
        await run.commit({});
        progress.finishedAt = ctx.clock();
        await report(true);
        await progressSink.finishResync(request);
        return false;
      }
      const page = wanted ? only(next.value, wanted) : next.value;
      progress.seen += page.reviews.length + page.rejects.length;
      await run.submit(page);
      await report();
      return true;
    },
    close,
  });
}

/** The part of a page a resync by id wants; the ids found are struck from `wanted` so the resync can stop early. */
function only(page: Page, wanted: Set<number>): Page {
  const reviews = page.reviews.filter((r) => wanted.delete(r.id));
  const rejects = page.rejects.filter((r) => r.id !== null && wanted.delete(Number(r.id)));
  return { ...page, reviews, rejects };
}
