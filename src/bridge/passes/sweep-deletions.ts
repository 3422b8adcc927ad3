import { confirmationSince, inferUnreadable, SweepListing } from '../../core/deletion-inference.js';
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

/** The reads that run alongside a sweep (the polls and the trailing reads: poll-state.ts), as its deletions see them. */
export interface ReadsAlongside {
  /**
   * Whether a poll, and with `late` a read of the widest trailing tier too, has begun after local time `at` and
   * committed.
   */
  readSince(at: number, late: boolean): boolean;
  /** Asks for a read of the widest trailing tier begun after local time `at` as soon as none is open. */
  hurryTrailing(at: number): void;
}

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
      /** The reads alongside, which the decision waits for (null: none run alongside). */
      alongside: ReadsAlongside | null;
      /** Opens a read of the listing from an updated_date (the confirmation of a newest-first sweep's deletions). */
      reread: (since: number) => AsyncIterator<Page>;
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
    return new SweepDeletions(scan, listing, { clock: pipeline.clock, alongside: end.alongside, reread: end.reread });
  }
}

/**
 * How many times a newest-first sweep's deletions read the listing again down to the oldest candidate: again after a
 * read that listed some candidates, or listed other reviews or stamps than the read before it (the first always),
 * since others may have moved ahead of its cursor meanwhile. Schedule seed 8864: a burst shown 110 s late moved 14
 * reviews ahead of a sweep's cursor and 7 of them ahead of the second read's; shown later than POLL_OVERLAP_MS, no
 * poll nor trailing read listed them, and they were reported deleted. Seed 1100546: the one missing review moved
 * again while the second read paged, which listed none of the missing, and it was reported deleted.
 */
export const MAX_CONFIRMATION_READS = 4;

/**
 * Deletion detection at the end of a complete sweep: a snapshot batch per step; then, after a listing sorted newest
 * first, a read of it again down to the oldest candidate (again until one lists none of them and what the read
 * before it listed, up to MAX_CONFIRMATION_READS); then a wait for the reads alongside; then the decision.
 * Listed newest first, a review whose updated_date moves while the sweep pages jumps ahead of its cursor and is not
 * listed: the second read lists every candidate that still exists (a review's updated_date never goes below its
 * entry's) unless it moves again meanwhile, and the polls (and, for a change shown late, the widest trailing reads)
 * begun after it read that one. A review any of them listed, or whose entry a read wrote since the sweep started
 * (deletions.ts re-reads the candidates' entries), is not deleted.
 * Listed by id or oldest first, a review that still exists is listed (SweepListing.stable): the decision waits only
 * for a poll begun after the listing. Otherwise the widest trailing read it waits for is asked for at once
 * (TrailingSchedule.hurry): without that, with the budget short of the trailing reads, the wait took up to twice
 * the bound they held (issue 48, bursts).
 */
export class SweepDeletions {
  private phase: 'scan' | 'reread' | 'wait' = 'scan';
  private pages: AsyncIterator<Page> | null = null;
  /** Confirmation reads opened, and the candidates left when the last one opened. */
  private rereads = 0;
  private unlistedBefore = 0;
  /** What the confirmation read under way listed (id@updated_date), and what the one before it did (null: none). */
  private readNow: string[] = [];
  private readBefore: string | null = null;
  /** Local time the last read of the listing (the sweep's, or the second) ended. */
  private listedAt: number;

  constructor(
    private readonly scan: DeletionScan,
    private readonly listing: SweepListing,
    private readonly deps: {
      clock: () => number;
      alongside: ReadsAlongside | null;
      reread: (since: number) => AsyncIterator<Page>;
    },
  ) {
    this.listedAt = deps.clock();
  }

  /** Whether it waits for the reads alongside (the loop runs none of its steps meanwhile). */
  get idle(): boolean {
    return this.phase === 'wait' && !this.readSince();
  }

  /** One step: a snapshot batch, a page of the second read, or the decision once the reads alongside read since. */
  async step(): Promise<boolean> {
    if (this.phase === 'scan') {
      if (await this.scan.step()) return true;
      if (this.listing.newestFirst && this.readAgain()) return true;
      this.phase = 'wait';
      this.awaitReads();
    }
    if (this.phase === 'reread' && this.pages) {
      const next = await this.pages.next();
      if (!next.done) {
        listAgain(this.listing, next.value);
        for (const r of next.value.reviews) this.readNow.push(`${r.id}@${r.updated_date}`);
        return true;
      }
      this.pages = null;
      this.listedAt = this.deps.clock();
      // A read that found candidates, or listed what the read before did not (reviews moved meanwhile), may have
      // missed others that moved again while it paged: read again until a read finds none and lists what the one
      // before it listed (issue 48, bursts).
      const found = this.unlistedBefore - this.scan.candidates().length;
      const listed = this.readNow.sort().join(',');
      const moved = listed !== this.readBefore;
      this.readBefore = listed;
      if ((found > 0 || moved) && this.rereads < MAX_CONFIRMATION_READS && this.readAgain()) return true;
      this.phase = 'wait';
      this.awaitReads();
    }
    if (!this.readSince()) return true;
    await this.scan.finish();
    await this.close();
    return false;
  }

  /** Opens a read of the listing down to the oldest candidate; false without candidates. */
  private readAgain(): boolean {
    const candidates = this.scan.candidates();
    const since = confirmationSince(candidates.map(([, e]) => e));
    if (since === null) return false;
    this.unlistedBefore = candidates.length;
    this.readNow = [];
    this.rereads++;
    this.pages = this.deps.reread(since);
    this.phase = 'reread';
    return true;
  }

  /** Abandons the detection (closes its snapshot scan and its second read). */
  async close(): Promise<void> {
    const pages = this.pages;
    this.pages = null;
    await pages?.return?.();
    await this.scan.close();
  }

  /**
   * Whether the decision waits for the widest trailing read too: unless the listing was sorted by id or oldest first
   * (nothing that still exists can hide there), a move shown later than the polls look back may hide a review.
   */
  private get late(): boolean {
    return !this.listing.stable;
  }

  /** Entering the wait: asks for the widest trailing read it waits for at once. */
  private awaitReads(): void {
    if (this.late && this.scan.candidates().length > 0) this.deps.alongside?.hurryTrailing(this.listedAt);
  }

  private readSince(): boolean {
    // Nothing missing from the listing (the usual sweep): no decision to make safe, so no wait.
    if (this.scan.candidates().length === 0) return true;
    return this.deps.alongside?.readSince(this.listedAt, this.late) ?? true;
  }
}

/** Records the readable ids of a page of the second read (its unreadable records were counted by the sweep's). */
function listAgain(listing: SweepListing, page: Page): void {
  for (const review of page.reviews) listing.seen.add(review.id);
  for (const reject of page.rejects) {
    const id = reject.id === null ? NaN : Number(reject.id);
    if (Number.isSafeInteger(id) && id > 0) listing.seen.add(id);
  }
}

/** Records a page's records: a readable id is a listed review; without one, the record's keyed digest. */
function listPage(listing: SweepListing, page: Page, digestOf: (raw: unknown) => string): void {
  for (const review of page.reviews) listing.listed(review.id, review.updated_date);
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
