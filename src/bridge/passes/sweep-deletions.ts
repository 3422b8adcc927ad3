import { decideDetection, SweepListing, UNREADABLE_MEMORY_MAX } from '../../core/deletion-inference.js';
import type { Checkpoint, CheckpointUpdate } from '../../core/checkpoint.js';
import { keyedRecordDigest, recordDigest } from '../../core/record-digest.js';
import type { PagePipeline, PipelineRun } from '../pipeline.js';
import type { Page } from '../../upstream/types.js';
import { DeletionScan, type DeletionDeps } from './deletions.js';

// The deletion side of a full scan: only a scan that lists every page in one run can tell deletions (a resumed one
// did not see the pages before its cursor). It records what each page lists, decides at the end whether deletions
// can be told (records without a readable id may stand for listed reviews: docs/bad-input.md), and then runs the
// detection a snapshot batch per step, polls in between. A complete initial load only remembers its unreadable
// records for the first sweep.

/** What a full scan lists for deletion detection, and how it ends. */
export class SweepIds {
  private readonly listing = new SweepListing();

  /** `digestOf`: the digest an unreadable record is remembered by (see unreadableDigester). */
  constructor(private readonly digestOf: (raw: unknown) => string) {}

  /** Records a page's records in listing order. */
  list(page: Page): void {
    listPage(this.listing, page, this.digestOf);
  }

  /** The end of a complete initial load: it remembers its unreadable records (unless too many) for the first sweep. */
  endInitialLoad(update: CheckpointUpdate): void {
    const remember = this.listing.unreadable.map((u) => u.digest).sort();
    update.unreadable = this.listing.unreadableCount > UNREADABLE_MEMORY_MAX ? null : remember;
  }

  /**
   * The end of a complete sweep, once its last page is committed: adds the decision's checkpoint fields to
   * `update`; resolves the detection to step through, or null when detection is deferred.
   */
  endSweep(
    end: { pipeline: PagePipeline; run: PipelineRun; deletion: DeletionDeps; ckpt: Checkpoint; startedAt: number },
    update: CheckpointUpdate,
  ): SweepDeletions | null {
    const { pipeline, run, deletion, ckpt } = end;
    const { listing } = this;
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
      return null;
    }
    Object.assign(update, { deferredSweeps: 0, deferredReason: null });
    deletion.metrics.setDeletionDeferredSweeps(0);
    const span = run.startStep('deletions');
    const seen = { listed: (id: number) => listing.seen.has(id), mayStandFor: decision.keep };
    return new SweepDeletions(pipeline, deletion, run.epoch, end.startedAt, span, seen);
  }
}

/** Deletion detection at the end of a complete sweep, a snapshot batch per step. */
export class SweepDeletions {
  private kept = 0;
  private readonly scan: DeletionScan;

  constructor(
    private readonly pipeline: PagePipeline,
    deletion: DeletionDeps,
    epoch: number,
    startedAt: number,
    span: ReturnType<PipelineRun['startStep']>,
    /** Whether the sweep listed a review, or whether an unreadable record may stand for it (it is kept then). */
    seen: { listed: (id: number) => boolean; mayStandFor: (id: number) => boolean },
  ) {
    const saw = (id: number) => seen.listed(id) || (seen.mayStandFor(id) && ++this.kept > 0);
    this.scan = new DeletionScan(pipeline, deletion, epoch, saw, startedAt, span);
  }

  /** Scans a batch of the snapshot; at the end publishes the deletions and resolves false. */
  async step(): Promise<boolean> {
    if (await this.scan.step()) return true;
    const outcome = await this.scan.finish();
    await this.scan.close();
    const kept = this.kept;
    if (kept > 0) this.pipeline.deps.logger.info({ kept, outcome }, 'reviews an unreadable record may stand for kept');
    return false;
  }

  /** Abandons the detection (closes its snapshot scan). */
  close(): Promise<void> {
    return this.scan.close();
  }
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
export async function unreadableDigester(pipeline: PagePipeline): Promise<(raw: unknown) => string> {
  const key = pipeline.deps.fingerprintKey ? await pipeline.deps.fingerprintKey() : null;
  return key ? (raw) => keyedRecordDigest(raw, key) : (raw) => recordDigest(raw).slice(0, 16);
}
