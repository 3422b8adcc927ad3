import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { diffReview } from './diff.js';
import type { Detection, ReviewEvent } from './events.js';
import type { BridgeMetrics } from './metrics.js';
import type { DeadLetter, EventSink } from './publisher.js';
import type { SnapshotEntry } from './snapshot/entry.js';
import type { Checkpoint, CheckpointUpdate, SnapshotStore } from './snapshot/store.js';
import type { Page, PassKind, ReviewSource } from './upstream/types.js';

// The passes. Every page goes through the same strict order: read the page's snapshot entries, diff (pure),
// publish and await the acks, then commit entries and checkpoint atomically. A crash anywhere before the
// commit re-processes the page and re-publishes the same events (same ids): at least once, never lost.

/** What the passes need; all I/O is behind these. */
export interface PollerDeps {
  source: ReviewSource;
  store: SnapshotStore;
  sink: EventSink;
  metrics: BridgeMetrics;
  logger: Logger;
  /** CloudEvents source of this bridge. */
  eventSource: string;
  initialLoadMode: 'mark' | 'suppress';
  /** How far before the watermark incremental polls start (covers clock skew and unordered listings). */
  overlapMs: number;
  clock?: () => number;
  /** Test hook: runs after a page is published and before it is committed (fault injection). */
  beforeCommit?: (page: Page) => Promise<void> | void;
}

/** Outcome of one pass or sweep step. */
export interface PassSummary {
  pages: number;
  reviews: number;
  events: number;
  deadLetters: number;
}

/** A sweep (or the initial load) in progress; advanced one page at a time so incremental polls can cut in. */
export interface SweepRun {
  readonly kind: 'initial' | 'sweep';
  /** Processes the next page; resolves false when the sweep has completed and been committed. */
  step(): Promise<boolean>;
  /** Totals so far. */
  readonly summary: PassSummary;
}

// Unchanged pages of a sweep commit their cursor at most this often: re-reading a few unchanged pages after a
// crash is harmless, and skipping the write keeps the unchanged path to one Redis round trip a page.
const CURSOR_COMMIT_INTERVAL_MS = 1_000;

// A record dead-lettered once is not sent again for a day (a daily sweep sends it again while it stays bad).
const DEAD_LETTER_MEMORY_SECONDS = 86_400;

/** Runs incremental polls and sweeps for one account under a lease epoch. */
export class Poller {
  private readonly clock: () => number;

  // Page N's publish and commit run while page N+1 is read and diffed (the bridge is otherwise idle while Kafka
  // and Redis acknowledge). At most one page is in flight; `inflightWrites` are the entries it will commit, so the
  // next page of the same run diffs against them, and anything else waits for it first (drain).
  private inflight: Promise<void> | null = null;
  private inflightWrites: Map<number, SnapshotEntry> | null = null;
  private inflightRun: object | null = null;

  constructor(private readonly deps: PollerDeps) {
    this.clock = deps.clock ?? Date.now;
  }

  /** Waits until the page in flight is published and committed; rethrows its failure. */
  async drain(): Promise<void> {
    const inflight = this.inflight;
    this.inflight = null;
    this.inflightWrites = null;
    this.inflightRun = null;
    if (inflight) await inflight;
  }

  /** The checkpoint as committed. */
  checkpoint(): Promise<Checkpoint> {
    return this.deps.store.checkpoint();
  }

  /**
   * One incremental poll from the watermark minus the overlap window. The watermark moves only when the whole
   * poll is committed, to the largest updated_date seen but never past the poll's start: a change made while the
   * poll was paging (behind its position in an unknown sort order) is then still ahead of the next poll.
   */
  async incremental(epoch: number, signal: AbortSignal): Promise<PassSummary> {
    const started = this.clock();
    await this.drain();
    const run = {};
    const ckpt = await this.deps.store.checkpoint();
    if (!ckpt.initialDone || ckpt.watermark === null) throw new Error('incremental poll before the initial load');
    const summary = emptySummary();
    let maxSeen = ckpt.watermark;
    const since = Math.max(0, ckpt.watermark - this.deps.overlapMs);
    for await (const page of this.deps.source.pages({ updatedSince: since, kind: 'incremental', signal })) {
      for (const r of page.reviews) maxSeen = Math.max(maxSeen, r.updated_date);
      await this.processPage(run, epoch, page, 'incremental', 'incremental', summary, null, false);
    }
    // The watermark may move only once every page of the poll is committed.
    await this.drain();
    const now = this.clock();
    await this.commit(epoch, [], { watermark: Math.min(maxSeen, started), lastIncrementalAt: now });
    this.deps.metrics.setWatermark(Math.max(ckpt.watermark, Math.min(maxSeen, started)));
    this.deps.metrics.incrementalPollCompleted(new Date(now));
    return summary;
  }

  /** Starts or resumes (from its checkpointed cursor) a sweep; the initial load when the snapshot is empty. */
  async openSweep(epoch: number, signal: AbortSignal): Promise<SweepRun> {
    await this.drain();
    const run = {};
    const ckpt = await this.deps.store.checkpoint();
    let state = ckpt.sweep;
    if (state === null) {
      state = { kind: ckpt.initialDone ? 'sweep' : 'initial', cursor: null, startedAt: this.clock(), seen: 0 };
      await this.commit(epoch, [], { sweep: state });
    } else {
      this.deps.logger.info({ kind: state.kind, seen: state.seen }, 'resuming sweep from its checkpoint');
    }
    const sweep = state;
    const detection: Detection = sweep.kind === 'initial' ? 'initial' : 'sweep';
    const pages = this.deps.source.pages({ cursor: sweep.cursor, kind: 'sweep', signal })[Symbol.asyncIterator]();
    const summary = emptySummary();
    let lastCursorCommit = this.clock();
    this.deps.metrics.sweepProgress(sweep.seen, true);
    return {
      kind: sweep.kind,
      summary,
      step: async () => {
        const next = await pages.next();
        if (next.done) {
          await this.drain();
          const now = this.clock();
          // The initial load covers everything changed before it started; polls take over from there.
          const update: CheckpointUpdate = { sweep: null, lastSweepAt: now, initialDone: true };
          if (sweep.kind === 'initial') update.watermark = sweep.startedAt;
          await this.commit(epoch, [], update);
          if (update.watermark !== undefined) this.deps.metrics.setWatermark(update.watermark);
          this.deps.metrics.sweepProgress(sweep.seen, false);
          return false;
        }
        const page = next.value;
        sweep.cursor = page.nextCursor;
        sweep.seen += page.reviews.length + page.rejects.length;
        const dueCursor = this.clock() - lastCursorCommit >= CURSOR_COMMIT_INTERVAL_MS;
        const committed = await this.processPage(
          run,
          epoch,
          page,
          detection,
          'sweep',
          summary,
          { ...sweep },
          dueCursor,
        );
        if (committed) lastCursorCommit = this.clock();
        this.deps.metrics.sweepProgress(sweep.seen, true);
        return true;
      },
    };
  }

  /**
   * Read and diff one page now, then publish and commit it once the page before it is committed; the caller goes
   * on with the next page meanwhile. A sweep's state is checkpointed with every commit; a page with nothing to
   * write commits only when `forceCommit` says its cursor is due. Resolves whether a commit will be made.
   */
  private async processPage(
    run: object,
    epoch: number,
    page: Page,
    detection: Detection,
    kind: PassKind,
    summary: PassSummary,
    sweep: Checkpoint['sweep'],
    forceCommit: boolean,
  ): Promise<boolean> {
    if (this.inflightRun !== run) await this.drain();
    const overlay = this.inflightWrites;
    const ids = page.reviews.map((r) => r.id);
    const known = await this.deps.store.read(ids);
    const events: ReviewEvent[] = [];
    const writes = new Map<number, SnapshotEntry>();
    const suppressCreated = detection === 'initial' && this.deps.initialLoadMode === 'suppress';
    for (const review of page.reviews) {
      const previous = writes.get(review.id) ?? overlay?.get(review.id) ?? known.get(review.id) ?? null;
      const result = diffReview({
        previous,
        review,
        detection,
        source: this.deps.eventSource,
        fetchedAt: page.fetchedAt,
        suppressCreated,
      });
      if (result.next) writes.set(review.id, result.next);
      events.push(...result.events);
    }
    const now = this.clock();
    // The upstream client has logged each reject (id and reason only); the dead-letter topic keeps the record,
    // once per distinct record and day rather than once per poll that happens to re-read it.
    const digests = page.rejects.map((r) =>
      createHash('sha1')
        .update(JSON.stringify(r.raw) ?? 'undefined')
        .digest('hex'),
    );
    const unseen = await this.deps.store.unseenDeadLetters(digests);
    const deadLetters: DeadLetter[] = page.rejects
      .filter((_, i) => unseen.has(digests[i]!))
      .map((reject) => ({ reject, pass: kind, detectedAt: now }));
    const mustCommit = writes.size > 0 || forceCommit;

    // Order: this page is published only after the page before it is committed.
    await this.drain();
    const finish = async () => {
      if (events.length > 0 || deadLetters.length > 0) {
        const t0 = performance.now();
        await this.deps.sink.publish(events, deadLetters);
        this.deps.metrics.observePublish((performance.now() - t0) / 1000);
      }
      await this.deps.beforeCommit?.(page);
      if (mustCommit) await this.commit(epoch, [...writes.entries()], sweep ? { sweep } : {});
      if (unseen.size > 0) await this.deps.store.rememberDeadLetters(unseen, DEAD_LETTER_MEMORY_SECONDS);
      this.record(page, events, deadLetters, detection, summary);
    };
    const inflight = finish();
    // Observed by the next drain; until then, keep Node from reporting it as unhandled.
    inflight.catch(() => undefined);
    this.inflight = inflight;
    this.inflightWrites = writes;
    this.inflightRun = run;
    return mustCommit;
  }

  private async commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
  ): Promise<void> {
    const t0 = performance.now();
    await this.deps.store.commit(epoch, entries, update);
    this.deps.metrics.observeCommit((performance.now() - t0) / 1000);
  }

  private record(
    page: Page,
    events: ReviewEvent[],
    deadLetters: DeadLetter[],
    detection: Detection,
    summary: PassSummary,
  ): void {
    const { metrics } = this.deps;
    const now = this.clock();
    summary.pages += 1;
    summary.reviews += page.reviews.length;
    summary.events += events.length;
    summary.deadLetters += deadLetters.length;
    metrics.reviewsProcessed(detection, page.reviews.length);
    for (const dl of deadLetters) metrics.deadLetter(dl.reject.reason);
    if (events.length > 0) metrics.eventsCommitted(new Date(now));
    for (const event of events) {
      metrics.eventsPublished(event.type, 1);
      if (event.type === 'review.status_changed') {
        const { status } = event.data;
        if (status.client_publication_status.from !== status.client_publication_status.to) {
          metrics.statusTransition(
            'client_publication_status',
            status.client_publication_status.from,
            status.client_publication_status.to,
          );
        }
        if (status.pwr_publication_status.from !== status.pwr_publication_status.to) {
          metrics.statusTransition(
            'pwr_publication_status',
            status.pwr_publication_status.from,
            status.pwr_publication_status.to,
          );
        }
      }
      if (detection !== 'initial' && event.type !== 'review.updated') {
        metrics.observeEventDelay(Math.max(0, (now - event.data.review.updated_date) / 1000));
      }
    }
  }
}

function emptySummary(): PassSummary {
  return { pages: 0, reviews: 0, events: 0, deadLetters: 0 };
}
