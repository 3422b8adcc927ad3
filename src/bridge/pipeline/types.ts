import type { Logger } from 'pino';
import type { BridgeMetrics } from '../../ops/metrics.js';
import type { ChangelogOffsets, DeadLetter, EventSink } from '../../kafka/publisher.js';
import type { ReviewEvent, ReviewState } from '../../core/events.js';
import type { SnapshotEntry } from '../../core/snapshot-entry.js';
import type { Checkpoint, CheckpointUpdate } from '../../core/checkpoint.js';
import type { FingerprintKey } from '../../core/fingerprint-key.js';
import type { Page } from '../../upstream/types.js';
import type { PassTracer } from '../../ops/tracing.js';

// The vocabulary of the page pipeline, apart from its parts so that each part (diff, commit, tracing, the run) can
// name it without importing the others; src/bridge/pipeline.ts re-exports it.

/** Where Kafka's changelog stood after a commit: its transaction number and the offsets its records got. */
export interface ChangelogMark {
  txn: number;
  offsets: ChangelogOffsets;
}

/** The snapshot operations the pipeline needs (SnapshotStore in production, an in-memory fake in unit tests). */
export interface SnapshotPort {
  /**
   * With `epoch`: fails when the account's keys are gone, in whole or in part, or belong to another epoch; with
   * `minTxn`: when Redis holds fewer changelog transactions than that (a failover lost commits); `sealed`: the
   * leader sealed the account, so its markers must be there. See SnapshotEntries.read.
   */
  read(ids: readonly number[], epoch?: number, minTxn?: number, sealed?: boolean): Promise<Map<number, SnapshotEntry>>;
  /**
   * `expectTxn`: the changelog transaction Redis must hold before this commit (else SnapshotLostError); `sealed`:
   * as for read.
   */
  /**
   * Of reviews without an entry, those the bridge reported deleted: the sequence of their review.deleted (a
   * comeback continues after it). `sealed`: fails (SnapshotLostError) when the sequences vanished from Redis.
   */
  goneSequences(ids: readonly number[], sealed?: boolean): Promise<Map<number, number>>;
  commit(
    epoch: number,
    entries: ReadonlyArray<[number, SnapshotEntry]>,
    update: CheckpointUpdate,
    mark?: ChangelogMark,
    expectTxn?: number,
    sealed?: boolean,
  ): Promise<void>;
  /**
   * With `live` (a leader's read): fails with SnapshotLostError when the account's keys are gone; with `sealed` too
   * when the checkpoint lacks its marker (gone with the manifest).
   */
  checkpoint(live?: boolean, sealed?: boolean): Promise<Checkpoint>;
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
  | 'lateChanges'
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
  /** Reviews with an event (what reads per change divides by). */
  changes?: number;
  /** The oldest updated_date of a creation or status change committed (how late a change became visible). */
  oldestChange?: number | null;
  /** The newest updated_date of a creation or status change committed (the data's clock, src/core/upstream-present.ts). */
  newestChange?: number | null;
  /** The review (event subject) newestChange is of: one review changed again and again is one sample of the present. */
  newestChangeOf?: string | null;
}

/** How a page is committed. */
export interface SubmitOptions {
  /** Checkpoint fields to write with the page's entries (a sweep's cursor). */
  checkpoint?: CheckpointUpdate;
  /** Commit even when no entry changed (so that the checkpoint above is written). */
  commitIfUnchanged?: boolean;
}
