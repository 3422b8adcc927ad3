import { decideDetection, SweepListing, UNREADABLE_MEMORY_MAX } from '../../core/deletion-inference.js';
import { keyedRecordDigest, recordDigest } from '../../core/record-digest.js';
import type { LongPassType } from '../../core/domain.js';
import type { PagePipeline, PassSummary, PipelineRun } from '../pipeline.js';
import type { Checkpoint, CheckpointUpdate } from '../../redis/snapshot-store.js';
import type { Page, ReviewSource } from '../../upstream/types.js';
import { progressOf } from '../../core/progress.js';
import { hasKind } from '../../core/errors.js';
import type { PassContext } from './context.js';
import { DeletionScan, type DeletionDeps } from './deletions.js';

// A full scan reads the whole listing from a resumable cursor: the initial load of an empty snapshot, or the
// reconciliation sweep that catches what polls missed. It advances one page per step so that incremental polls
// can cut in between pages, and checkpoints its cursor so that a restart resumes instead of starting over.

/** A full scan (or a resync) in progress: the loop steps it a page at a time between polls. */
export interface FullScanRun {
  readonly type: LongPassType;
  /** Totals so far. */
  readonly summary: PassSummary;
  /** Whether incremental polls can run alongside (the checkpoint has a watermark: an initial load's first page). */
  readonly pollable: boolean;
  /** Processes the next page; resolves false when the scan has completed and been committed. */
  step(): Promise<boolean>;
  /** Abandons the scan: closes the page iterator (its abort listeners and prefetch). The checkpoint keeps the cursor. */
  close(): Promise<void>;
}

// Unchanged pages commit their cursor at most this often: re-reading a few unchanged pages after a crash is
// harmless, and skipping the write keeps the unchanged path to one Redis round trip a page.
const CURSOR_COMMIT_INTERVAL_MS = 1_000;

/** Starts or resumes (from its checkpointed cursor) a full scan; the initial load when the snapshot is empty. */
export async function openFullScan(
  ctx: PassContext,
  pipeline: PagePipeline,
  source: ReviewSource,
  epoch: number,
  signal: AbortSignal,
  deletion: DeletionDeps | null = null,
): Promise<FullScanRun> {
  await pipeline.settle();
  const ckpt = await pipeline.deps.snapshot.checkpoint(true);
  let state: NonNullable<Checkpoint['sweep']>;
  const run = pipeline.open(ckpt.sweep?.kind ?? (ckpt.initialDone ? 'sweep' : 'initial'), epoch);
  if (ckpt.sweep === null) {
    state = { kind: ckpt.initialDone ? 'sweep' : 'initial', cursor: null, startedAt: ctx.clock(), seen: 0 };
    await run.commit({ sweep: state });
  } else {
    state = ckpt.sweep;
    pipeline.deps.logger.info({ kind: state.kind, seen: state.seen }, 'resuming sweep from its checkpoint');
  }
  const scan = state;
  // Only a scan that lists every page in this run can tell deletions (a resumed one did not see the pages before
  // its cursor); a complete initial load only remembers its unreadable records for the first sweep.
  const fromStart = scan.cursor === null && scan.seen === 0;
  const listing = deletion && fromStart ? new SweepListing() : null;
  const digestOf = await unreadableDigester(pipeline);
  const upstreamPages = source.pages({ cursor: scan.cursor, kind: 'sweep', signal });
  const pages: AsyncIterator<Page> = upstreamPages[Symbol.asyncIterator]();
  // Deletion detection after the last page, a snapshot batch per step (polls run in between), then the end commit.
  let detection: { scan: DeletionScan; update: CheckpointUpdate; kept: () => number } | null = null;
  if (deletion) deletion.metrics.setDeletionDeferredSweeps(ckpt.deferredSweeps);
  let lastCursorCommit = ctx.clock();
  let closed = false;
  // The initial load's first page sets the watermark to the upstream's time when it was asked for, so that polls
  // run during the load: every change made after that moment is at or after the watermark.
  let watermarkSet = ckpt.watermark !== null;
  let maxSeen: number | null = null;
  // The snapshot's size estimates the scan's total (none for the initial load of an empty snapshot).
  const estimatedTotal = scan.kind === 'initial' ? null : await pipeline.deps.snapshot.size();
  const progress = () => {
    ctx.metrics.sweepProgress(scan.seen, true);
    const sample = { seen: scan.seen, estimatedTotal, startedAt: scan.startedAt, now: ctx.clock() };
    ctx.metrics.passProgress(scan.kind, progressOf(sample).fraction);
  };
  progress();
  return tracedScan(run, signal, {
    type: scan.kind,
    summary: run.summary,
    get pollable() {
      return watermarkSet;
    },
    step: async () => {
      if (detection) {
        if (await detection.scan.step()) return true;
        const outcome = await detection.scan.finish();
        await detection.scan.close();
        const kept = detection.kept();
        if (kept > 0) pipeline.deps.logger.info({ kept, outcome }, 'reviews an unreadable record may stand for kept');
        await finishScan(detection.update);
        return false;
      }
      const next = await pages.next().catch(async (err: unknown) => {
        // An expired or invalid checkpointed cursor would fail from the same place for ever: the scan starts over.
        if (hasKind(err, 'cursor_invalid')) {
          await run.settle();
          await run.commit({ sweep: { kind: scan.kind, cursor: null, startedAt: ctx.clock(), seen: 0 } });
          pipeline.deps.logger.warn({ kind: scan.kind }, 'the listing refused the sweep cursor; the sweep starts over');
        }
        throw err;
      });
      if (next.done) {
        const now = ctx.clock();
        // The initial load covers everything changed before it started; polls take over from there.
        const update: CheckpointUpdate = { sweep: null, lastSweepAt: now, initialDone: true };
        // An upstream without Date headers gave no time for the first page: the largest updated_date read stands in.
        if (scan.kind === 'initial' && !watermarkSet) update.watermark = maxSeen ?? 0;
        if (listing && scan.kind === 'initial') {
          const remember = listing.unreadable.map((u) => u.digest).sort();
          update.unreadable = listing.unreadableCount > UNREADABLE_MEMORY_MAX ? null : remember;
        } else if (listing && deletion) {
          await run.settle();
          const decision = decideDetection(listing, ckpt.unreadable);
          update.unreadable = decision.remember;
          if (decision.action === 'defer') {
            const deferredSweeps = ckpt.deferredSweeps + 1;
            Object.assign(update, { deferredSweeps, deferredReason: decision.reason });
            pipeline.deps.logger.warn(
              { reason: decision.reason, unreadable: decision.unreadable, new: decision.fresh, deferredSweeps },
              'deletion detection deferred: the listing has records whose id cannot be read (docs/bad-input.md)',
            );
            deletion.metrics.deletionDeferred(decision.reason);
            deletion.metrics.setDeletionDeferredSweeps(deferredSweeps);
          } else {
            Object.assign(update, { deferredSweeps: 0, deferredReason: null });
            deletion.metrics.setDeletionDeferredSweeps(0);
            let kept = 0;
            const saw = (id: number) => listing.seen.has(id) || (decision.keep(id) && ++kept > 0);
            const span = run.startStep('deletions');
            const del = new DeletionScan(pipeline, deletion, epoch, saw, scan.startedAt, span);
            detection = { scan: del, update, kept: () => kept };
            return true;
          }
        }
        await finishScan(update);
        return false;
      }
      const page = next.value;
      scan.cursor = page.nextCursor;
      scan.seen += page.reviews.length + page.rejects.length;
      if (listing) listPage(listing, page, digestOf);
      for (const review of page.reviews) maxSeen = Math.max(maxSeen ?? 0, review.updated_date);
      const due = ctx.clock() - lastCursorCommit >= CURSOR_COMMIT_INTERVAL_MS;
      const checkpoint: CheckpointUpdate = { sweep: { ...scan } };
      const setsWatermark = scan.kind === 'initial' && !watermarkSet && typeof page.upstreamAt === 'number';
      if (setsWatermark) checkpoint.watermark = page.upstreamAt!;
      const committed = await run.submit(page, { checkpoint, commitIfUnchanged: due || setsWatermark });
      if (committed) lastCursorCommit = ctx.clock();
      if (setsWatermark) {
        // Committed with this page (the pipeline commits in order): polls may start once it is.
        await run.settle();
        watermarkSet = true;
        ctx.metrics.setWatermark(checkpoint.watermark!);
      }
      progress();
      return true;
    },
    close: async () => {
      await detection?.scan.close();
      if (closed) return;
      closed = true;
      await pages.return?.();
    },
  });

  async function finishScan(update: CheckpointUpdate): Promise<void> {
    closed = true;
    await run.commit(update);
    if (update.watermark !== undefined) ctx.metrics.setWatermark(update.watermark);
    ctx.metrics.sweepProgress(scan.seen, false);
    ctx.metrics.passProgress(scan.kind, null);
  }
}

/** A scan whose pass span ends with it: completed, failed (or aborted) at a step, or abandoned by close(). */
export function tracedScan(run: PipelineRun, signal: AbortSignal, scan: FullScanRun): FullScanRun {
  return {
    type: scan.type,
    summary: scan.summary,
    get pollable() {
      return scan.pollable;
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

/**
 * Records a page's records in listing order: the reviews, and the rejects at their positions (a readable id is a
 * listed review; without one, the record's keyed digest). A reject without a position puts the order in doubt.
 */
function listPage(listing: SweepListing, page: Page, digestOf: (raw: unknown) => string): void {
  const rejects = new Map<number, Page['rejects'][number]>();
  const onReject = (reject: Page['rejects'][number]) => {
    const id = reject.id === null ? NaN : Number(reject.id);
    if (Number.isSafeInteger(id) && id > 0) listing.listed(id);
    else listing.unreadableRecord(digestOf(reject.raw));
  };
  for (const reject of page.rejects) {
    if (reject.position === undefined || rejects.has(reject.position)) {
      listing.ordered = false;
      onReject(reject);
    } else rejects.set(reject.position, reject);
  }
  let next = 0;
  const total = page.reviews.length + rejects.size;
  for (let position = 0; position < total; position++) {
    const reject = rejects.get(position);
    if (reject) onReject(reject);
    else {
      const review = page.reviews[next++];
      if (review) listing.listed(review.id);
    }
  }
  for (const [position, reject] of rejects) if (position >= total) onReject(reject);
}

/**
 * The digest of an unreadable record: keyed with the fingerprint key, so that what the checkpoint and the Kafka
 * changelog keep of a record's personal data cannot confirm a guess. Without a key (a test configuration, which
 * writes no changelog) the plain digest stands in.
 */
async function unreadableDigester(pipeline: PagePipeline): Promise<(raw: unknown) => string> {
  const key = pipeline.deps.fingerprintKey ? await pipeline.deps.fingerprintKey() : null;
  return key ? (raw) => keyedRecordDigest(raw, key) : (raw) => recordDigest(raw).slice(0, 16);
}
