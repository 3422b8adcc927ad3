import type { PassType } from '../core/domain.js';
import { noopPassTracer, type PassTracer } from '../ops/tracing.js';
import { Committer } from './pipeline/commit.js';
import { InFlightSlot, PageMemory } from './pipeline/in-flight.js';
import { PipelineRun, type RunHost } from './pipeline/run.js';
import type { PipelineDeps } from './pipeline/types.js';

// The page pipeline: every page goes read entries → diff (pure) → one Kafka commit (events, state rows, dead
// letters and the changelog: entries and the whole checkpoint, in one transaction when exactly-once is on) → the
// same entries and checkpoint into Redis, atomically. Page N is committed while page N+1 of the same run is read and
// diffed, because the bridge would otherwise sit idle while Kafka and Redis acknowledge; at most one page is in
// flight. A crash before the Kafka commit leaves nothing visible to read_committed readers and re-processes the
// page; a crash after it leaves Redis behind Kafka, and the next leader applies the changelog instead of deriving
// the events again (src/bridge/restore.ts).
//
// Its parts, under src/bridge/pipeline/: the run of a pass (run.ts), the diff of a page (page-diff.ts), its dead
// letters (dead-letters.ts), the commit step (commit.ts), the page in flight (in-flight.ts), the halving of a page
// that keeps failing (isolation.ts), the spans (run-trace.ts) and the metrics of a committed page (page-metrics.ts).

/** How a run treats what it finds. */
export interface RunOptions {
  /** Reviews a poll finds first are created as the initial load would create them (polls during the load). */
  createdAsInitial?: boolean;
  /** Changes older than this updated_date (null: none) are counted as late (reviews_bridge_late_changes_total). */
  lateBefore?: () => number | null;
  /** Who a late change counts as found by (found_by of reviews_bridge_late_changes_total); absent: poll or sweep. */
  foundBy?: string;
  /** Told the lateness (ms) of the oldest late change of each committed page (before `lateBefore`). */
  onLate?: (latenessMs: number) => void;
}

export type {
  ChangelogMark,
  CommitUnit,
  PassSummary,
  PipelineDeps,
  PipelineMetrics,
  SnapshotPort,
  SubmitOptions,
} from './pipeline/types.js';
export type { PipelineRun } from './pipeline/run.js';
export type { DeletionPublisher } from './pipeline/commit.js';

/** Owns the one page in flight of a bridge; passes open runs on it. */
export class PagePipeline implements RunHost {
  readonly clock: () => number;
  readonly tracer: PassTracer;
  readonly memory = new PageMemory();
  readonly committer: Committer;
  readonly inflight = new InFlightSlot<PipelineRun>();

  constructor(readonly deps: PipelineDeps) {
    this.clock = deps.clock ?? Date.now;
    this.tracer = deps.tracer ?? noopPassTracer();
    this.committer = new Committer(deps, this.tracer);
  }

  /**
   * Forgets what this process knows of the changelog (a new leadership: Redis may have been restored from Kafka
   * meanwhile, which then holds every commit this process had not written to Redis).
   */
  reset(): void {
    this.committer.reset();
  }

  /** A restore brought Redis up to changelog transaction `txn`: a Redis found to hold less later lost it. */
  restored(txn: number): void {
    this.committer.redisTxn = txn;
  }

  /** The leadership sealed the account (Passes.prepare): from now on its reads and commits ask for the markers. */
  sealed(): void {
    this.committer.sealed = true;
  }

  /**
   * Starts a run (one pass) under a lease epoch. `createdAsInitial`: the initial load is still running, so the
   * reviews this run finds first are created as the load creates them (marked initial, or suppressed).
   */
  open(type: PassType, epoch: number, options: RunOptions = {}): PipelineRun {
    return new PipelineRun(this, type, epoch, options.createdAsInitial ?? false, options.lateBefore, options);
  }

  /**
   * Waits until the page in flight is published and committed. Its failure is kept by the run that submitted it
   * (see InFlightSlot.settle).
   */
  settle(): Promise<void> {
    return this.inflight.settle();
  }
}
