import type { Span } from '@opentelemetry/api';
import type { PassType } from '../../core/domain.js';
import type { CheckpointUpdate } from '../../core/checkpoint.js';
import type { ReviewEvent } from '../../core/events.js';
import type { DeadLetter } from '../../kafka/publisher.js';
import type { Page } from '../../upstream/types.js';
import type { PassTracer, SpanOutcome } from '../../ops/tracing.js';
import type { Committer } from './commit.js';
import { newDeadLetters, rememberDeadLetters, type PageDeadLetters } from './dead-letters.js';
import type { InFlightSlot, PageMemory } from './in-flight.js';
import { isolatePage } from './isolation.js';
import { diffPage, eventCount, pageKey, type DiffedPage } from './page-diff.js';
import { recordPage } from './page-metrics.js';
import { RunTrace, type PageTrace } from './run-trace.js';
import type { PassSummary, PipelineDeps, SubmitOptions } from './types.js';

// A run is one pass's use of the pipeline. Data flows one way: a page in, read and diffed (its events and dead
// letters out), then committed last, in the background, once the run's page before it is committed.

/** What a run uses of its pipeline: the settings, the page memories, the commit step and the page in flight. */
export interface RunHost {
  readonly deps: PipelineDeps;
  readonly clock: () => number;
  readonly tracer: PassTracer;
  readonly memory: PageMemory;
  readonly committer: Committer;
  readonly inflight: InFlightSlot<PipelineRun>;
}

/** Creations and status changes (edits keep their updated_date) stamped before `before`, and the oldest stamp. */
function lateOf(events: readonly ReviewEvent[], before: number): { n: number; oldest: number } {
  let n = 0;
  let oldest = Infinity;
  for (const e of events) {
    const date = e.data.review.updated_date;
    if (e.type === 'review.updated' || !(date < before)) continue;
    n += 1;
    oldest = Math.min(oldest, date);
  }
  return { n, oldest };
}

/** One pass's use of the pipeline: pages in order, then a final checkpoint commit. */
export class PipelineRun {
  readonly summary: PassSummary = { pages: 0, reviews: 0, events: 0, deadLetters: 0, changes: 0, oldestChange: null };
  private failure: { err: unknown } | null = null;
  private readonly trace: RunTrace;

  constructor(
    private readonly host: RunHost,
    readonly type: PassType,
    readonly epoch: number,
    private readonly createdAsInitial = false,
    /** Changes older than this updated_date are late: polls had covered that time (absent: not counted). */
    private readonly lateBefore?: () => number | null,
    /** Who finds late changes, and who learns their lateness (see RunOptions). */
    private readonly late: { foundBy?: string; onLate?: (latenessMs: number) => void } = {},
  ) {
    this.trace = new RunTrace(host.tracer, type, epoch, host.clock);
  }

  /** A step of the pass outside its pages (deletion detection): a child span, null when tracing is off. */
  startStep(name: string): Span | null {
    return this.trace.step(name);
  }

  /** Ends the pass's span (once; later calls do nothing): completed, failed, aborted or abandoned. */
  end(outcome: SpanOutcome, err?: unknown): void {
    this.trace.end(this.summary, outcome, err);
  }

  /** Records the failure of this run's page in flight; the run's next call throws it. */
  fail(err: unknown): void {
    this.failure ??= { err };
  }

  /**
   * Reads and diffs a page now, then publishes and commits it once this run's previous page is committed; the
   * caller goes on with its next page meanwhile. Resolves whether a commit will be made.
   */
  async submit(page: Page, options: SubmitOptions = {}): Promise<boolean> {
    this.throwIfFailed();
    const trace = this.trace.page(page);
    try {
      return await this.hand(page, options, trace);
    } catch (err) {
      trace.failed(err);
      throw err;
    }
  }

  /** Commits checkpoint fields after this run's pages are committed (a poll's watermark, a sweep's end). */
  async commit(update: CheckpointUpdate): Promise<void> {
    await this.settle();
    await this.host.committer.commitUnit(
      this.epoch,
      { update, force: true, durable: true },
      undefined,
      this.trace.span,
    );
  }

  /** Waits until this run's page in flight is committed; throws its failure. */
  async settle(): Promise<void> {
    this.throwIfFailed();
    if (this.host.inflight.overlayOf(this)) await this.host.inflight.settle();
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure.err;
  }

  /** Diffs the page, then hands it to the commit step: in flight, or record by record when it keeps failing. */
  private async hand(page: Page, options: SubmitOptions, trace: PageTrace): Promise<boolean> {
    const { inflight, memory, deps } = this.host;
    await inflight.settleOthers(this);
    const { diffed, deadLetters } = await trace.diff(
      () => this.read(page),
      (read) => ({ events: eventCount(read.diffed), deadLetters: read.deadLetters.list.length }),
    );
    const key = pageKey(this.type, page, diffed);
    const mustCommit = diffed.writes.size > 0 || options.commitIfUnchanged === true;
    const update = options.checkpoint ?? {};
    // Order: this page is published only after the page before it is committed.
    await this.settle();
    if ((memory.pageFailures.get(key) ?? 0) >= (deps.isolateAfter ?? 3)) {
      const { committer, clock } = this.host;
      const run = { epoch: this.epoch, type: this.type, committer, deps, clock, quarantined: memory.quarantined };
      const committed = await isolatePage(run, diffed, deadLetters, update, trace);
      this.record(page, committed.events, committed.deadLetters);
      memory.pageFailures.delete(key);
      trace.ok();
      return true;
    }
    const done = this.commitPage(page, diffed, deadLetters, update, mustCommit, trace).then(
      () => {
        memory.pageFailures.delete(key);
        trace.committed(eventCount(diffed), deadLetters.list.length, mustCommit);
      },
      (err: unknown) => {
        memory.pageFailures.set(key, (memory.pageFailures.get(key) ?? 0) + 1);
        trace.failed(err);
        throw err;
      },
    );
    inflight.launch(this, done, diffed.writes);
    return mustCommit;
  }

  /** Reads the snapshot's entries of the page's reviews and diffs against them; then the new dead letters. */
  private async read(page: Page): Promise<{ diffed: DiffedPage; deadLetters: PageDeadLetters }> {
    const { deps, memory, committer, inflight, clock } = this.host;
    const key = deps.fingerprintKey ? await deps.fingerprintKey() : null;
    const overlay = inflight.overlayOf(this);
    // Redis must hold every Kafka commit before it is diffed against: a commit whose Redis write failed is written
    // first (the page in flight of this run is the overlay instead). An unresolved Kafka commit stops the read.
    if (overlay) committer.guard();
    else await committer.catchUp();
    const ids = page.reviews.map((r) => r.id);
    const known = await deps.snapshot.read(ids, this.epoch, committer.redisTxn ?? undefined, committer.sealed);
    // Reviews the snapshot does not hold may be comebacks (an initial load has deleted nothing): a second round
    // trip, only for pages with such reviews.
    const absent = this.type === 'initial' ? [] : ids.filter((id) => !known.has(id) && !overlay?.has(id));
    const gone = absent.length > 0 ? await deps.snapshot.goneSequences(absent, committer.sealed) : undefined;
    const diffed = diffPage(page, {
      type: this.type,
      initialCreates: this.type === 'initial' || this.createdAsInitial,
      deps,
      key,
      maxMessageBytes: deps.sink.maxMessageBytes,
      known,
      gone,
      overlay,
      quarantined: memory.quarantined,
    });
    return { diffed, deadLetters: await newDeadLetters(deps.snapshot, diffed.rejects, this.type, clock, key) };
  }

  /** Publishes and commits a diffed page as one unit. */
  private async commitPage(
    page: Page,
    diffed: DiffedPage,
    deadLetters: PageDeadLetters,
    update: CheckpointUpdate,
    force: boolean,
    trace: PageTrace,
  ): Promise<void> {
    const events = trace.stamp(diffed.changes.flatMap((c) => c.events));
    const entries = [...diffed.writes.entries()];
    const unit = { events, deadLetters: deadLetters.list, states: diffed.states, entries, update, force };
    await this.host.committer.commitUnit(this.epoch, unit, page, trace.span);
    await rememberDeadLetters(this.host.deps.snapshot, deadLetters.digests);
    this.record(page, events, deadLetters.list);
  }

  private record(page: Page, events: ReviewEvent[], deadLetters: DeadLetter[]): void {
    const { metrics } = this.host.deps;
    recordPage(metrics, this.summary, this.type, this.host.clock(), { page, events, deadLetters });
    const before = events.length > 0 ? (this.lateBefore?.() ?? null) : null;
    if (before === null) return;
    const { n, oldest } = lateOf(events, before);
    metrics.lateChanges(this.late.foundBy ?? (this.type === 'incremental' ? 'poll' : 'sweep'), n);
    if (n > 0) this.late.onLate?.(before - oldest);
  }
}
