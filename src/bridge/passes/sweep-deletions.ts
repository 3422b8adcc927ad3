import { inferUnreadable, SweepListing } from '../../core/deletion-inference.js';
import type { Checkpoint, CheckpointUpdate } from '../../core/checkpoint.js';
import { keyedRecordDigest, recordDigest } from '../../core/record-digest.js';
import type { PagePipeline, PipelineRun } from '../pipeline.js';
import type { Page } from '../../upstream/types.js';
import { DeletionScan, type DeletionDeps } from './deletions.js';

// The deletion side of a full scan: only a scan that lists every page in one run can tell deletions (a resumed one
// did not see the pages before its cursor). It records what the pages list (in any order), then runs the detection
// a snapshot batch per step, polls in between; once the snapshot is scanned it knows which reviews the sweep did
// not list, infers which of them records without a readable id may stand for (docs/bad-input.md), deletes the
// others and remembers the inference with the sweep's end commit. A complete initial load only remembers its
// unreadable records (standing for no review it knows) for the first sweep.

/** What a full scan lists for deletion detection, and how it ends. */
export class SweepIds {
  private readonly listing = new SweepListing();

  /** `digestOf`: the digest an unreadable record is remembered by (see unreadableDigester). */
  constructor(private readonly digestOf: (raw: unknown) => string) {}

  /** Records a page's records. */
  list(page: Page): void {
    listPage(this.listing, page, this.digestOf);
  }

  /** The end of a complete initial load: it remembers its unreadable records (unless too many) for the first sweep. */
  endInitialLoad(update: CheckpointUpdate): void {
    if (this.listing.tooMany) Object.assign(update, { unreadable: null, unreadableCandidates: null });
    else {
      const { memory } = inferUnreadable(this.listing.digests, null, []);
      Object.assign(update, { unreadable: memory.digests, unreadableCandidates: memory.candidates });
    }
  }

  /**
   * The end of a complete sweep, once its last page is committed: resolves the detection to step through, which
   * adds its inference to `update` (the sweep's end commit), or null when there are too many unreadable records
   * to remember (then `update` says so at once).
   */
  endSweep(
    end: {
      pipeline: PagePipeline;
      run: PipelineRun;
      deletion: DeletionDeps;
      ckpt: Checkpoint;
      startedAt: number;
      /** Whether the reads alongside have read since the listing ended (null: none run alongside). */
      read: (() => boolean) | null;
    },
    update: CheckpointUpdate,
  ): SweepDeletions | null {
    const { pipeline, run, deletion, ckpt } = end;
    const { listing } = this;
    const { logger } = pipeline.deps;
    if (listing.tooMany) {
      const deferredSweeps = ckpt.deferredSweeps + 1;
      const reason = 'too_many_unreadable';
      Object.assign(update, { unreadable: null, unreadableCandidates: null, deferredSweeps, deferredReason: reason });
      logger.warn(
        { reason, unreadable: listing.unreadableCount, deferredSweeps },
        'deletion detection deferred: the listing has records whose id cannot be read (docs/bad-input.md)',
      );
      deletion.metrics.deletionDeferred(reason);
      deletion.metrics.setDeletionDeferredSweeps(deferredSweeps);
      return null;
    }
    const previous = { digests: ckpt.unreadable, candidates: ckpt.unreadableCandidates };
    const hold = (unlisted: readonly number[]): ReadonlySet<number> => {
      const inference = inferUnreadable(listing.digests, previous, unlisted);
      const { held, reason, unreadable, fresh, undecided } = inference;
      const { digests, candidates } = inference.memory;
      const deferredSweeps = reason === null ? 0 : ckpt.deferredSweeps + 1;
      Object.assign(update, { unreadable: digests, unreadableCandidates: candidates, deferredSweeps });
      update.deferredReason = reason;
      deletion.metrics.setDeletionDeferredSweeps(deferredSweeps);
      if (reason !== null) {
        logger.warn(
          { reason, unreadable, new: fresh, held: held.size, undecided, deferredSweeps },
          'deletion detection deferred: the listing has records whose id cannot be read (docs/bad-input.md)',
        );
        deletion.metrics.deletionDeferred(reason);
      } else if (held.size > 0) {
        logger.info({ kept: held.size, unreadable }, 'reviews an unreadable record may stand for kept');
      }
      return held;
    };
    const span = run.startStep('deletions');
    const listed = (id: number) => listing.seen.has(id);
    const scan = new DeletionScan(pipeline, deletion, run.epoch, listed, end.startedAt, span, hold);
    return new SweepDeletions(scan, end.read ?? (() => true));
  }
}

/**
 * Deletion detection at the end of a complete sweep, a snapshot batch per step, then a wait for the reads
 * alongside before it decides. A sweep does not list a review that moved behind its cursor while it paged (listed
 * newest first, a review whose updated_date moves jumps to the front); the polls, and for a change shown late the
 * widest trailing reads, read it next, and a read since the sweep started keeps a review from its deletions
 * (deletions.ts re-reads the candidates' entries). So it decides only once each has read since the listing ended.
 */
export class SweepDeletions {
  private scanned = false;

  constructor(
    private readonly scan: DeletionScan,
    /** Whether the reads alongside have each read since the listing ended. */
    private readonly read: () => boolean,
  ) {}

  /** Whether it waits for the reads alongside (the loop runs none of its steps meanwhile). */
  get idle(): boolean {
    return this.scanned && !this.read();
  }

  /** Scans a batch of the snapshot; once scanned and read since, publishes the deletions and resolves false. */
  async step(): Promise<boolean> {
    if (!this.scanned) {
      if (await this.scan.step()) return true;
      this.scanned = true;
    }
    if (!this.read()) return true;
    await this.scan.finish();
    await this.scan.close();
    return false;
  }

  /** Abandons the detection (closes its snapshot scan). */
  close(): Promise<void> {
    return this.scan.close();
  }
}

/** Records a page's records: a readable id is a listed review; without one, the record's keyed digest. */
function listPage(listing: SweepListing, page: Page, digestOf: (raw: unknown) => string): void {
  for (const review of page.reviews) listing.listed(review.id);
  for (const reject of page.rejects) {
    const id = reject.id === null ? NaN : Number(reject.id);
    if (Number.isSafeInteger(id) && id > 0) listing.listed(id);
    else listing.unreadableRecord(digestOf(reject.raw));
  }
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
