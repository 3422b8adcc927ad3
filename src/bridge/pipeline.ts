import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { diffReview } from '../core/diff.js';
import type { PassType } from '../core/domain.js';
import { refreshedState, type ReviewEvent, type ReviewState } from '../core/events.js';
import { fitReviewEvents } from '../core/event-size.js';
import type { BridgeMetrics } from '../ops/metrics.js';
import type { ChangelogBatch, ChangelogOffsets, DeadLetter, EventSink } from '../kafka/publisher.js';
import { encodeEntry, type SnapshotEntry } from '../core/snapshot-entry.js';
import { applyCheckpointUpdate, type Checkpoint, type CheckpointUpdate } from '../core/checkpoint.js';
import type { ChangelogCheckpoint } from '../core/changelog.js';
import type { FingerprintKey } from '../core/fingerprint-key.js';
import type { ReviewDeletedEvent } from '../core/events.js';
import { STATUS_FIELDS } from '../core/review.js';
import type { Page, Reject } from '../upstream/types.js';
import { recordDigest } from '../core/record-digest.js';
import type { Span } from '@opentelemetry/api';
import {
  endSpan,
  noopPassTracer,
  SPAN_ATTRIBUTES,
  withTraceparent,
  type PassTracer,
  type SpanOutcome,
} from '../ops/tracing.js';

// The page pipeline: every page goes read entries → diff (pure) → one Kafka commit (events, state rows, dead
// letters and the changelog: entries and the whole checkpoint, in one transaction when exactly-once is on) → the
// same entries and checkpoint into Redis, atomically. Page N is committed while page N+1 of the same run is read and
// diffed, because the bridge would otherwise sit idle while Kafka and Redis acknowledge; at most one page is in
// flight. A crash before the Kafka commit leaves nothing visible to read_committed readers and re-processes the
// page; a crash after it leaves Redis behind Kafka, and the next leader applies the changelog instead of deriving
// the events again (src/bridge/restore.ts).

/** Where Kafka's changelog stood after a commit: its transaction number and the offsets its records got. */
export interface ChangelogMark {
  txn: number;
  offsets: ChangelogOffsets;
}

/** The snapshot operations the pipeline needs (SnapshotStore in production, an in-memory fake in unit tests). */
export interface SnapshotPort {
  /**
   * With `epoch`: fails when the account's keys are gone or belong to another epoch; with `minTxn`: when Redis
   * holds fewer changelog transactions than that (a failover lost commits). See SnapshotStore.read.
   */
  read(ids: readonly number[], epoch?: number, minTxn?: number): Promise<Map<number, SnapshotEntry>>;
  /** `expectTxn`: the changelog transaction Redis must hold before this commit (else SnapshotLostError). */
  commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: ChangelogMark,
    expectTxn?: number,
  ): Promise<void>;
  /** With `live` (a leader's read): fails with SnapshotLostError when the account's keys are gone. */
  checkpoint(live?: boolean): Promise<Checkpoint>;
  /** The number of the last changelog transaction Redis reflects (0: none). */
  changelogTxn(): Promise<number>;
  /** How many reviews the snapshot holds (progress estimates). */
  size(): Promise<number>;
  unseenDeadLetters(digests: readonly string[]): Promise<Set<string>>;
  rememberDeadLetters(digests: ReadonlySet<string>, ttlSeconds: number): Promise<void>;
}

/** The metrics the pipeline reports. */
export type PipelineMetrics = Pick<
  BridgeMetrics,
  | 'observePublish'
  | 'observeCommit'
  | 'reviewsProcessed'
  | 'deadLetter'
  | 'eventsCommitted'
  | 'eventsPublished'
  | 'statusTransition'
  | 'observeEventDelay'
  | 'recordsQuarantined'
  | 'eventTruncated'
>;

/** What the pipeline is built from. */
export interface PipelineDeps {
  snapshot: SnapshotPort;
  sink: EventSink;
  metrics: PipelineMetrics;
  logger: Logger;
  /** CloudEvents source of this bridge. */
  eventSource: string;
  initialLoadMode: 'mark' | 'suppress';
  clock?: () => number;
  /** Test hook: runs after a page is published and before it is committed (fault injection). */
  beforeCommit?: (page: Page) => Promise<void> | void;
  /** After this many consecutive failures of the same page, it is published record by record (default 3). */
  isolateAfter?: number;
  /** The key of the fingerprints (and so of the event ids); absent: unkeyed, and no changelog can be written. */
  fingerprintKey?: () => Promise<FingerprintKey>;
  /** The account's spans (pass, page, steps); absent: the no-op tracer. */
  tracer?: PassTracer;
}

/** One commit: what goes to Kafka, and the entries and checkpoint fields that go to Kafka's changelog and Redis. */
export interface CommitUnit {
  events?: readonly ReviewEvent[];
  deadLetters?: readonly DeadLetter[];
  states?: readonly ReviewState[];
  entries?: ReadonlyArray<[number, SnapshotEntry]>;
  update?: CheckpointUpdate;
  /** Commit even when nothing else is written (checkpoint fields). */
  force?: boolean;
  /** Checkpoint fields that must survive a Redis loss too (a pass's start and end): written to Kafka as well. */
  durable?: boolean;
}

/** Totals of one run. */
export interface PassSummary {
  pages: number;
  reviews: number;
  events: number;
  deadLetters: number;
}

/** How a page is committed. */
export interface SubmitOptions {
  /** Checkpoint fields to write with the page's entries (a sweep's cursor). */
  checkpoint?: CheckpointUpdate;
  /** Commit even when no entry changed (so that the checkpoint above is written). */
  commitIfUnchanged?: boolean;
}

// A record dead-lettered once is not sent again for a day (a daily sweep sends it again while it stays bad).
const DEAD_LETTER_MEMORY_SECONDS = 86_400;

// Pages that failed and records that were quarantined are remembered in memory, bounded: enough for every page an
// account's passes hold in the overlap window, small enough that a listing full of bad records cannot grow it.
const MEMORY_LIMIT = 10_000;

interface InFlight {
  run: PipelineRun;
  done: Promise<void>;
  /** The entries this page will commit: the next page of the same run diffs against them. */
  writes: Map<number, SnapshotEntry>;
}

/** Owns the one page in flight of a bridge; passes open runs on it. */
export class PagePipeline {
  private inflight: InFlight | null = null;
  readonly clock: () => number;
  /** Consecutive failures of a page, by its key (pass type, cursor and the state of its reviews). */
  readonly pageFailures = new BoundedMap<string, number>(MEMORY_LIMIT);
  /** Reviews (id and state) that broke their page and were dead-lettered by reference: skipped until they change. */
  readonly quarantined = new BoundedMap<string, true>(MEMORY_LIMIT);
  /** The checkpoint as Kafka's changelog holds it after the last commit; loaded from Redis when null. */
  private position: ChangelogCheckpoint | null = null;
  /** The changelog transaction Redis is known to hold (null: not known yet this leadership). */
  redisTxn: number | null = null;
  /** A commit Kafka has and Redis not yet (its Redis write failed): written before anything else. */
  private pendingRedis: {
    epoch: number;
    entries: ReadonlyArray<[number, SnapshotEntry]>;
    update: CheckpointUpdate;
    mark: ChangelogMark;
  } | null = null;

  readonly tracer: PassTracer;

  constructor(readonly deps: PipelineDeps) {
    this.clock = deps.clock ?? Date.now;
    this.tracer = deps.tracer ?? noopPassTracer();
  }

  /**
   * Forgets what this process knows of the changelog (a new leadership: Redis may have been restored from Kafka
   * meanwhile, which then holds every commit this process had not written to Redis).
   */
  reset(): void {
    this.position = null;
    this.pendingRedis = null;
    this.redisTxn = null;
  }

  /**
   * Commits one unit: to Kafka first (events, state rows, dead letters, and the changelog's entries and whole
   * checkpoint under the next transaction number), then to Redis. A unit of checkpoint fields only goes to Redis
   * only unless `durable`: the cursor of a sweep's unchanged pages only saves re-reading pages, and a restore that
   * misses it re-reads a few, which publishes nothing twice.
   */
  async commitUnit(epoch: number, unit: CommitUnit, page?: Page, span?: Span): Promise<void> {
    const { deps } = this;
    await this.flushPending();
    const entries = unit.entries ?? [];
    const update = unit.update ?? {};
    const events = unit.events ?? [];
    const deadLetters = unit.deadLetters ?? [];
    const states = unit.states ?? [];
    const position = (this.position ??= await this.loadPosition(epoch));
    const next = applyCheckpointUpdate(position, update);
    const empty = events.length === 0 && deadLetters.length === 0 && states.length === 0 && entries.length === 0;
    // A checkpoint-only unit reaches Kafka only when it moves what a restore needs (not an idle poll's clock).
    if (empty && !(unit.durable && movesCheckpoint(position, next))) {
      if (!unit.force && Object.keys(update).length === 0) return;
      await this.write(epoch, [], update);
      this.position = next;
      return;
    }
    const changelog = { ...next, txn: position.txn + 1, epoch };
    const t0 = performance.now();
    const publishing = span && this.tracer.startChild(span, 'publish', { [SPAN_ATTRIBUTES.events]: events.length });
    const offsets = await deps.sink
      .publish(events, deadLetters, states, { entries: this.keyed(entries), checkpoint: changelog })
      .catch((err: unknown) => {
        if (publishing) endSpan(publishing, 'error', err);
        throw err;
      });
    if (publishing) endSpan(publishing, 'ok');
    deps.metrics.observePublish((performance.now() - t0) / 1000);
    // Kafka has it now: from here on this unit is never derived again, only written to Redis (now or on restore).
    this.position = changelog;
    this.pendingRedis = { epoch, entries, update, mark: { txn: changelog.txn, offsets } };
    if (page) await deps.beforeCommit?.(page);
    const committing = span && this.tracer.startChild(span, 'commit', { [SPAN_ATTRIBUTES.epoch]: epoch });
    await this.flushPending().catch((err: unknown) => {
      if (committing) endSpan(committing, 'error', err);
      throw err;
    });
    if (committing) endSpan(committing, 'ok');
  }

  /**
   * Publishes review.deleted events with their tombstones and changelog deletion markers, then removes the
   * entries from Redis; resolves how many were removed.
   */
  async commitDeletions(
    epoch: number,
    events: readonly ReviewDeletedEvent[],
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    sink: {
      publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets>;
    },
    remove: (epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>) => Promise<number>,
  ): Promise<number> {
    await this.flushPending();
    const position = (this.position ??= await this.loadPosition(epoch));
    const changelog = { ...position, txn: position.txn + 1, epoch };
    const offsets = await sink.publishDeletions(events, {
      entries: [],
      deleted: this.keyed(entries),
      checkpoint: changelog,
    });
    this.position = changelog;
    this.pendingRedis = { epoch, entries: [], update: {}, mark: { txn: changelog.txn, offsets } };
    const removed = await remove(epoch, entries);
    await this.flushPending();
    return removed;
  }

  // Entries written before keys cannot go to the changelog (their fingerprints are unkeyed); the diff re-keys
  // every entry it writes, so this only drops what a key-less configuration writes.
  private keyed(entries: ReadonlyArray<readonly [number, SnapshotEntry]>): Array<readonly [number, SnapshotEntry]> {
    return entries.filter(([, entry]) => entry.keyId !== null);
  }

  private async flushPending(): Promise<void> {
    const pending = this.pendingRedis;
    if (!pending) return;
    await this.write(pending.epoch, pending.entries, pending.update, pending.mark);
    if (this.pendingRedis === pending) this.pendingRedis = null;
  }

  private async loadPosition(epoch: number): Promise<ChangelogCheckpoint> {
    const [checkpoint, txn] = await Promise.all([
      this.deps.snapshot.checkpoint(true),
      this.deps.snapshot.changelogTxn(),
    ]);
    this.redisTxn = txn;
    return { ...checkpoint, txn, epoch };
  }

  private async write(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: ChangelogMark,
  ): Promise<void> {
    const t0 = performance.now();
    // Redis must hold exactly the transactions before this one: a failover that lost some is caught here.
    const expectTxn = this.redisTxn === null ? undefined : this.redisTxn;
    await this.deps.snapshot.commit(epoch, entries, update, mark, expectTxn);
    if (mark) this.redisTxn = mark.txn;
    this.deps.metrics.observeCommit((performance.now() - t0) / 1000);
  }

  /**
   * Starts a run (one pass) under a lease epoch. `createdAsInitial`: the initial load is still running, so the
   * reviews this run finds first are created as the load creates them (marked initial, or suppressed).
   */
  open(type: PassType, epoch: number, options: { createdAsInitial?: boolean } = {}): PipelineRun {
    return new PipelineRun(this, type, epoch, options.createdAsInitial ?? false);
  }

  /**
   * Waits until the page in flight is published and committed. Its failure is not thrown here but kept by the run
   * that submitted it, so that a failed sweep page fails the sweep and not the poll that happened to wait for it.
   */
  async settle(): Promise<void> {
    const inflight = this.inflight;
    if (!inflight) return;
    try {
      await inflight.done;
    } catch (err) {
      inflight.run.fail(err);
    } finally {
      if (this.inflight === inflight) this.inflight = null;
    }
  }

  /** The entries the page in flight of `run` will commit, if that page belongs to `run`. */
  overlayOf(run: PipelineRun): Map<number, SnapshotEntry> | null {
    return this.inflight?.run === run ? this.inflight.writes : null;
  }

  /** Waits for the page in flight when it belongs to another run (its entries are not ours to diff against). */
  async settleOthers(run: PipelineRun): Promise<void> {
    if (this.inflight && this.inflight.run !== run) await this.settle();
  }

  /** Registers the page a run just handed over for publishing. */
  launch(run: PipelineRun, done: Promise<void>, writes: Map<number, SnapshotEntry>): void {
    // Observed by the next settle; until then, keep Node from reporting it as unhandled.
    done.catch(() => undefined);
    this.inflight = { run, done, writes };
  }
}

/** The outcome of one review: its events and the entry to store, under the key of its state. */
interface ReviewChange {
  id: number;
  /** Identifies the review's state (id, updated_date, statuses, fingerprint): what quarantine remembers. */
  state: string;
  events: ReviewEvent[];
  entry: SnapshotEntry;
}

/** What the pipeline made of one page before publishing it. */
interface DiffedPage {
  changes: ReviewChange[];
  /** State-topic rows of unchanged reviews (a resync refreshes every review it reads). */
  states: ReviewState[];
  writes: Map<number, SnapshotEntry>;
  rejects: Reject[];
}

/** One pass's use of the pipeline: pages in order, then a final checkpoint commit. */
export class PipelineRun {
  readonly summary: PassSummary = { pages: 0, reviews: 0, events: 0, deadLetters: 0 };
  private failure: { err: unknown } | null = null;
  /** The pass's span (null when tracing is off): its pages' spans hang under it. */
  private readonly span: Span | null;

  constructor(
    private readonly pipeline: PagePipeline,
    readonly type: PassType,
    readonly epoch: number,
    private readonly createdAsInitial = false,
  ) {
    const { tracer } = pipeline;
    this.span = tracer.enabled ? tracer.startPass(type, { [SPAN_ATTRIBUTES.epoch]: epoch }) : null;
  }

  /** A step of the pass outside its pages (deletion detection): a child span, null when tracing is off. */
  startStep(name: string): Span | null {
    return this.span ? this.pipeline.tracer.startChild(this.span, name) : null;
  }

  /** Ends the pass's span (once; later calls do nothing): completed, failed, aborted or abandoned. */
  end(outcome: SpanOutcome, err?: unknown): void {
    const span = this.span;
    if (!span?.isRecording()) return;
    span.setAttribute(SPAN_ATTRIBUTES.pageReviews, this.summary.reviews);
    span.setAttribute(SPAN_ATTRIBUTES.events, this.summary.events);
    span.setAttribute('reviews_bridge.pages', this.summary.pages);
    endSpan(span, outcome, err);
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
    const span = this.startPage(page);
    try {
      return await this.submitTraced(page, options, span);
    } catch (err) {
      if (span) endSpan(span, 'error', err);
      throw err;
    }
  }

  /** The span of a page, from its upstream request on, with its listing step (null when tracing is off). */
  private startPage(page: Page): Span | null {
    if (!this.span) return null;
    const { tracer } = this.pipeline;
    const sizes = {
      [SPAN_ATTRIBUTES.pageReviews]: page.reviews.length,
      [SPAN_ATTRIBUTES.pageRejects]: page.rejects.length,
    };
    const span = tracer.startChild(this.span, 'page', { [SPAN_ATTRIBUTES.pass]: this.type, ...sizes }, page.fetchedAt);
    const listing = tracer.startChild(span, 'listing', sizes, page.fetchedAt);
    endSpan(listing, 'ok', undefined, Math.max(page.fetchedAt, page.receivedAt ?? this.pipeline.clock()));
    return span;
  }

  private async submitTraced(page: Page, options: SubmitOptions, span: Span | null): Promise<boolean> {
    const { pipeline } = this;
    await pipeline.settleOthers(this);
    const diffing = span && pipeline.tracer.startChild(span, 'diff');
    const { diffed, deadLetters } = await (async () => {
      const diffed = await this.diff(page);
      return { diffed, deadLetters: await this.newDeadLetters(diffed.rejects) };
    })().catch((err: unknown) => {
      if (diffing) endSpan(diffing, 'error', err);
      throw err;
    });
    const key = pageKey(this.type, page, diffed);
    const mustCommit = diffed.writes.size > 0 || options.commitIfUnchanged === true;
    if (diffing) {
      diffing.setAttribute(
        SPAN_ATTRIBUTES.events,
        diffed.changes.reduce((n, c) => n + c.events.length, 0),
      );
      diffing.setAttribute(SPAN_ATTRIBUTES.deadLetters, deadLetters.list.length);
      endSpan(diffing, 'ok');
    }

    // Order: this page is published only after the page before it is committed.
    await this.settle();
    if ((pipeline.pageFailures.get(key) ?? 0) >= (pipeline.deps.isolateAfter ?? 3)) {
      await this.isolate(page, diffed, deadLetters, options.checkpoint ?? {}, span);
      pipeline.pageFailures.delete(key);
      if (span) endSpan(span, 'ok');
      return true;
    }
    const done = (async () => {
      const events = stamped(
        diffed.changes.flatMap((c) => c.events),
        span,
      );
      const unit = {
        events,
        deadLetters: deadLetters.list,
        states: diffed.states,
        entries: [...diffed.writes.entries()],
        update: options.checkpoint ?? {},
        force: mustCommit,
      };
      await pipeline.commitUnit(this.epoch, unit, page, span ?? undefined);
      await this.remember(deadLetters.digests);
      this.record(page, events, deadLetters.list);
    })().then(
      () => {
        pipeline.pageFailures.delete(key);
        if (span) endPage(span, diffed, deadLetters.list.length, mustCommit);
      },
      (err: unknown) => {
        pipeline.pageFailures.set(key, (pipeline.pageFailures.get(key) ?? 0) + 1);
        if (span) endSpan(span, 'error', err);
        throw err;
      },
    );
    pipeline.launch(this, done, diffed.writes);
    return mustCommit;
  }

  /** Commits checkpoint fields after this run's pages are committed (a poll's watermark, a sweep's end). */
  async commit(update: CheckpointUpdate): Promise<void> {
    await this.settle();
    await this.pipeline.commitUnit(
      this.epoch,
      { update, force: true, durable: true },
      undefined,
      this.span ?? undefined,
    );
  }

  /** Waits until this run's page in flight is committed; throws its failure. */
  async settle(): Promise<void> {
    this.throwIfFailed();
    if (this.pipeline.overlayOf(this)) await this.pipeline.settle();
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure.err;
  }

  /**
   * Diffs every review of the page against the snapshot (or this run's page in flight). Each review is handled on
   * its own: anything that throws for one review (fingerprint, event building, entry encoding) makes that review
   * a dead letter and the rest of the page goes on.
   */
  private async diff(page: Page): Promise<DiffedPage> {
    const { deps, quarantined } = this.pipeline;
    const key = deps.fingerprintKey ? await deps.fingerprintKey() : null;
    const overlay = this.pipeline.overlayOf(this);
    const known = await deps.snapshot.read(
      page.reviews.map((r) => r.id),
      this.epoch,
      this.pipeline.redisTxn ?? undefined,
    );
    const changes: ReviewChange[] = [];
    const states: ReviewState[] = [];
    const writes = new Map<number, SnapshotEntry>();
    const rejects: Reject[] = [...page.rejects];
    const initialCreates = this.type === 'initial' || this.createdAsInitial;
    const suppressCreated = initialCreates && deps.initialLoadMode === 'suppress';
    for (const review of page.reviews) {
      try {
        const previous = writes.get(review.id) ?? overlay?.get(review.id) ?? known.get(review.id) ?? null;
        const result = diffReview({
          previous,
          review,
          detection: this.type,
          source: deps.eventSource,
          fetchedAt: page.fetchedAt,
          suppressCreated,
          createdDetection: initialCreates ? 'initial' : undefined,
          key,
        });
        if (!result.next) {
          if (this.type === 'resync' && previous)
            states.push(refreshedState(deps.eventSource, review, previous.sequence));
          continue;
        }
        const state = `${review.id}|${result.next.updatedDate}|${result.next.client}|${result.next.pwr}|${result.next.digest}`;
        if (quarantined.get(state)) {
          rejects.push(quarantineReject(review.id));
          continue;
        }
        // Encoded here, not only at commit, so that an entry that cannot be stored fails its review, not the page.
        encodeEntry(result.next);
        // Events over Kafka's limit are cut to fit, or the review becomes a too_large dead letter (by reference).
        const fit =
          deps.sink.maxMessageBytes === undefined ? null : fitReviewEvents(result.events, deps.sink.maxMessageBytes);
        if (fit?.verdict === 'too_large') {
          rejects.push(fit.reject);
          continue;
        }
        writes.set(review.id, result.next);
        changes.push({ id: review.id, state, events: fit?.events ?? result.events, entry: result.next });
      } catch (err) {
        deps.logger.warn({ id: review.id, err: errorName(err) }, 'review could not be processed; dead-lettered');
        rejects.push({
          id: String(review.id),
          reason: 'processing_failed',
          detail: '(record):processing_failed',
          raw: review,
        });
      }
    }
    return { changes, states, writes, rejects };
  }

  /** The dead letters not already sent today (the topic keeps each distinct bad record once a day). */
  private async newDeadLetters(rejects: Reject[]): Promise<{ list: DeadLetter[]; digests: Set<string> }> {
    if (rejects.length === 0) return { list: [], digests: new Set() };
    const now = this.pipeline.clock();
    const digests = rejects.map((r) => recordDigest(r.raw));
    const unseen = await this.pipeline.deps.snapshot.unseenDeadLetters(digests);
    const list = rejects
      .filter((_, i) => unseen.has(digests[i]!))
      .map((reject) => ({ reject, pass: this.type, detectedAt: now }));
    return { list, digests: unseen };
  }

  /**
   * Publishes and commits a page that keeps failing in halves, down to single reviews, so that the review that
   * breaks it is found and dead-lettered by reference while the rest is published. A review is only blamed when
   * Kafka refused its record as such, or when another part of the same page went through (so Kafka and Redis
   * work); otherwise the failure is taken for an outage and the pass fails as usual, losing nothing.
   */
  private async isolate(
    page: Page,
    diffed: DiffedPage,
    deadLetters: { list: DeadLetter[]; digests: Set<string> },
    checkpoint: CheckpointUpdate,
    span: Span | null = null,
  ): Promise<void> {
    const { deps, quarantined } = this.pipeline;
    const published: ReviewEvent[] = [];
    const suspects: { change: ReviewChange; err: unknown }[] = [];
    let succeeded = 0;
    await this.pipeline.commitUnit(this.epoch, { deadLetters: deadLetters.list, states: diffed.states });
    const attempt = async (group: ReviewChange[]): Promise<void> => {
      if (group.length === 0) return;
      const events = stamped(
        group.flatMap((c) => c.events),
        span,
      );
      try {
        const unit = { events, entries: group.map((c): [number, SnapshotEntry] => [c.id, c.entry]) };
        await this.pipeline.commitUnit(this.epoch, unit, undefined, span ?? undefined);
        published.push(...events);
        succeeded += 1;
      } catch (err) {
        if (group.length === 1) return void suspects.push({ change: group[0]!, err });
        const half = Math.ceil(group.length / 2);
        await attempt(group.slice(0, half));
        await attempt(group.slice(half));
      }
    };
    await attempt(diffed.changes);
    // A suspect gets one more try after the rest: a blip of Kafka or Redis must not get a good review quarantined.
    for (const suspect of suspects.splice(0)) await attempt([suspect.change]);
    const blamed = suspects.filter((s) => succeeded > 0 || isRecordRefusal(s.err));
    if (blamed.length < suspects.length) throw suspects.find((s) => !blamed.includes(s))!.err;
    const references = blamed.map((s) => quarantineReject(s.change.id));
    const quarantineLetters = await this.newDeadLetters(references);
    await this.pipeline.commitUnit(this.epoch, {
      deadLetters: quarantineLetters.list,
      update: checkpoint,
      force: true,
    });
    for (const { change, err } of blamed) {
      quarantined.set(change.state, true);
      const reason = isRecordRefusal(err) ? 'record_refused' : 'isolated';
      deps.metrics.recordsQuarantined(reason);
      deps.logger.error({ id: change.id, err: errorName(err), reason }, 'review quarantined: it kept failing its page');
    }
    await this.remember(new Set([...deadLetters.digests, ...quarantineLetters.digests]));
    this.record(page, published, [...deadLetters.list, ...quarantineLetters.list]);
  }

  private async remember(digests: ReadonlySet<string>): Promise<void> {
    if (digests.size > 0) await this.pipeline.deps.snapshot.rememberDeadLetters(digests, DEAD_LETTER_MEMORY_SECONDS);
  }

  private record(page: Page, events: ReviewEvent[], deadLetters: DeadLetter[]): void {
    const { metrics } = this.pipeline.deps;
    const now = this.pipeline.clock();
    const summary = this.summary;
    summary.pages += 1;
    summary.reviews += page.reviews.length;
    summary.events += events.length;
    summary.deadLetters += deadLetters.length;
    metrics.reviewsProcessed(this.type, page.reviews.length);
    for (const dl of deadLetters) metrics.deadLetter(dl.reject.reason);
    if (events.length > 0) metrics.eventsCommitted(new Date(now));
    for (const event of events) {
      metrics.eventsPublished(event.type, 1);
      if (event.data.truncated_fields?.length) metrics.eventTruncated(event.type);
      if (event.type === 'review.status_changed') {
        for (const field of STATUS_FIELDS) {
          const change = event.data.status[field];
          if (change.from !== change.to) metrics.statusTransition(field, change.from, change.to);
        }
      }
      if (this.type !== 'initial' && event.type !== 'review.updated') {
        metrics.observeEventDelay(Math.max(0, (now - event.data.review.updated_date) / 1000));
      }
    }
  }
}

/** The events with the traceparent of the page span that produced them, so a consumer can link to it. */
function stamped(events: ReviewEvent[], span: Span | null): ReviewEvent[] {
  return withTraceparent(events, span);
}

/** Ends a page span that committed, with what the page amounted to. */
function endPage(span: Span, diffed: DiffedPage, deadLetters: number, committed: boolean): void {
  span.setAttribute(
    SPAN_ATTRIBUTES.events,
    diffed.changes.reduce((n, c) => n + c.events.length, 0),
  );
  span.setAttribute(SPAN_ATTRIBUTES.deadLetters, deadLetters);
  span.setAttribute('reviews_bridge.page.committed', committed);
  endSpan(span, 'ok');
}

/** Whether a checkpoint change matters to a restore: anything but the time of the last poll. */
function movesCheckpoint(before: Checkpoint, after: Checkpoint): boolean {
  return (
    before.watermark !== after.watermark ||
    before.initialDone !== after.initialDone ||
    before.lastSweepAt !== after.lastSweepAt ||
    before.deferredSweeps !== after.deferredSweeps ||
    before.deferredReason !== after.deferredReason ||
    JSON.stringify(before.unreadable) !== JSON.stringify(after.unreadable) ||
    JSON.stringify(before.sweep) !== JSON.stringify(after.sweep)
  );
}

/** A Map that forgets its oldest keys beyond a size limit (insertion order). */
class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    if (this.size > this.limit) this.delete(this.keys().next().value as K);
    return this;
  }
}

/** Identifies a page across retries: the same pass, cursor and review states make the same key. */
function pageKey(type: PassType, page: Page, diffed: DiffedPage): string {
  const hash = createHash('sha1').update(`${type}|${page.cursor ?? ''}|`);
  for (const change of diffed.changes) hash.update(change.state).update(';');
  return hash.digest('hex');
}

/** The dead letter of a quarantined review: a reference (its id), not the record. */
function quarantineReject(id: number): Reject {
  return { id: String(id), reason: 'quarantined', detail: '(record):quarantined', raw: { id, reference: true } };
}

// Kafka error codes that refuse one record or batch for what it is, not for the state of the cluster.
const RECORD_REFUSALS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'INVALID_TIMESTAMP',
]);

/** Whether Kafka refused a record as such (walks kafkajs's wrapped causes). */
function isRecordRefusal(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && RECORD_REFUSALS.has(type)) return true;
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}

function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}
