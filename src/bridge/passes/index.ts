import { PagePipeline, type PassSummary, type PipelineDeps, type SnapshotPort } from '../pipeline.js';
import type { EventSink } from '../../kafka/publisher.js';
import { heartbeatEvent, type ReviewHeartbeatEvent } from '../../core/events.js';
import type { Checkpoint } from '../../redis/snapshot-store.js';
import type { ReviewSource } from '../../upstream/types.js';
import type { PassContext } from './context.js';
import { PollState } from './poll-state.js';
import type { DeletionDeps, DeletionSink, DeletionSnapshot } from './deletions.js';
import { openFullScan, type LongPassRun } from './full-scan.js';
import { runIncrementalPoll } from './incremental.js';
import { freshnessOf, openTrailingRead, type TrailingRun } from './trailing.js';
import type { FreshnessReport } from '../../core/freshness-report.js';
import { openResync, type ResyncProgressSink } from './resync.js';
import type { ResyncRequest } from '../../core/resync-request.js';
import type { CheckpointChange } from '../../core/checkpoint-change.js';
import type { FingerprintKeySource } from '../../core/fingerprint-key.js';
import { checkRedisIdentity, restoreFromChangelog, type RestoreMetrics, type RestorePorts } from '../restore.js';
import type { Identity } from '../../core/identity.js';
import { endSpan, SPAN_ATTRIBUTES } from '../../ops/tracing.js';
import { SnapshotLostError } from '../../core/errors.js';
import { evictionBackoffMs, evictionMessage, type EvictionSeen, type SnapshotHold } from '../../core/snapshot-hold.js';
import type { RestoreOutcome } from '../restore.js';

export type { LongPassRun } from './full-scan.js';
export type { TrailingRun } from './trailing.js';
export type { PassContext } from './context.js';

/** What the loop asks of the passes; unit tests of the loop give it a fake. */
export interface PassRunner {
  /**
   * Readies this replica's leadership under `epoch` before any pass: takes the transactional id at the broker
   * (fencing a former leader) and restores Redis from the Kafka changelog where it is empty or behind. Resolves
   * false when the lease must be taken anew first (the epoch is not above the one the changelog recorded).
   * `alive` is called as it makes progress (changelog records read, a start slot still awaited): a long restore
   * keeps the loop's liveness while it goes forward.
   */
  prepare(epoch: number, signal: AbortSignal, force?: boolean, alive?: () => void): Promise<boolean>;
  /** Takes (and clears) an operator's request for a restore from Kafka. */
  takeRestoreRequest(): Promise<boolean>;
  checkpoint(): Promise<Checkpoint>;
  /** Takes (and clears) an operator's request for a sweep. */
  takeSweepRequest(): Promise<boolean>;
  incremental(epoch: number, signal: AbortSignal): Promise<PassSummary>;
  /** Local time the next trailing read of a tier without one `open` is due (null or absent: none are run). */
  trailingDueAt?(open?: ReadonlySet<number>): number | null;
  /**
   * Which tier's trailing read goes a page next, among those `open` and those due (each tier's share of the budget:
   * src/core/trailing-shares.ts); null: none. Absent or undefined: no turns (the open read, else the one due).
   */
  trailingTurn?(open: ReadonlySet<number>): number | null | undefined;
  /**
   * Opens the trailing read of `tier` (absent: the one due now, among tiers without one `open`); null when none
   * is (src/core/trailing.ts).
   */
  openTrailing?(
    epoch: number,
    signal: AbortSignal,
    tier?: number,
    open?: ReadonlySet<number>,
  ): Promise<TrailingRun | null>;
  /** The bound that holds for late changes, as status and the health body show it; absent or null: not leading. */
  freshness?(): FreshnessReport | null;
  openFullScan(epoch: number, signal: AbortSignal): Promise<LongPassRun>;
  /** Waits for the page in flight to be published and committed (graceful stop). */
  settle(): Promise<void>;
  /** Takes an operator's pending resync request (an unreadable one is dropped and logged). */
  takeResync(): Promise<ResyncRequest | null>;
  openResync(epoch: number, signal: AbortSignal, request: ResyncRequest): Promise<LongPassRun>;
  /** Puts back a resync this replica took but did not complete (it stops leading), for the next leader. */
  requeueResync(request: ResyncRequest): Promise<void>;
  /** Since when an operator has paused the bridge (ms), or null. */
  pausedSince(): Promise<number | null>;
  /** Publishes a heartbeat: the watermark and the last complete poll, under `epoch`. */
  heartbeat(epoch: number, paused: boolean): Promise<void>;
  /**
   * Takes an operator's pending checkpoint change and commits it under `epoch` (Kafka changelog, then Redis, as any
   * checkpoint); resolves the change applied, or null when none was pending. Called only while the account is paused.
   */
  applyCheckpointChange?(epoch: number): Promise<CheckpointChange | null>;
}

/** The snapshot operations of the pipeline and of deletion detection, plus the operator's sweep requests. */
export interface PassesSnapshot
  extends
    SnapshotPort,
    DeletionSnapshot,
    ResyncProgressSink,
    Pick<
      RestorePorts,
      | 'changelogState'
      | 'clearForRestore'
      | 'restoreEntries'
      | 'restoreFinish'
      | 'setKafkaCluster'
      | 'seal'
      | 'sealIfComplete'
      | 'stampIdentity'
    > {
  takeSweepRequest(): Promise<boolean>;
  takeRestoreRequest(): Promise<boolean>;
  takeResyncRequest(): Promise<ResyncRequest | 'invalid' | null>;
  requeueResync(request: ResyncRequest): Promise<void>;
  pausedSince(): Promise<number | null>;
  /** An operator's pending checkpoint change ('invalid': unreadable, dropped); absent: none are taken. */
  nextCheckpointChange?(): Promise<{ change: CheckpointChange; stored: string } | 'invalid' | null>;
  /** Clears a change once committed (unless replaced meanwhile). */
  checkpointChangeApplied?(stored: string): Promise<void>;
  /** What of the sealed snapshot Redis no longer holds (null: nothing); absent: not checked. */
  verifyHeld?(): Promise<string | null>;
  /** Makes a lost pause flag read as paused from now on (src/redis/control-flags.ts); absent: not kept. */
  adoptPauseState?(): Promise<void>;
}

/** What Redis says of its memory: evictions, use and limit (null: it does not say), and bytes per entry. */
export interface MemoryProbe {
  stats(): Promise<{ evictedKeys: number; usedMemory: number; maxmemory: number } | null>;
  /** About how many bytes one snapshot entry takes (null: unknown). */
  bytesPerEntry(): Promise<number | null>;
}

/** Where the passes publish: change events and dead letters, and deletions. */
export interface PassesSink
  extends EventSink, DeletionSink, Pick<RestorePorts, 'readChangelog' | 'clusterId' | 'formerChangelog'> {
  publishHeartbeat(event: ReviewHeartbeatEvent): Promise<void>;
  /** Takes the account's transactional id at the broker for a new leadership (fences the former leader). */
  beginTransactions(): Promise<void>;
  /**
   * Reading only, before the leadership acts on Kafka: the changelog topic fits, and no other installation
   * publishes into the account's topics (KafkaPublisher.verifyBeforeActing); absent: nothing checked.
   */
  verifyBeforeActing?(
    redis: { instance: string; known: (instance: string) => boolean },
    windowMs: number,
    now: number,
  ): Promise<void>;
}

/** Settings of the passes. */
export interface PassesOptions {
  /** POLL_OVERLAP_MS: the most incremental polls look back before the watermark. */
  overlapMs: number;
  /**
   * How the lookback is chosen (absent: learned from 1 s, polls every second), and the trailing reads' bound
   * (FRESHNESS_BOUND_MS; absent: none).
   */
  polls?: {
    intervalMs: number;
    lookback: 'learned' | 'fixed';
    lookbackFloorMs: number;
    freshnessBoundMs?: number;
    readsPerInterval?: number;
    pageSize?: number;
  };
  metrics: PassContext['metrics'] & DeletionDeps['metrics'] & RestoreMetrics;
  /** Deletion detection at the end of complete sweeps: the guard's fraction, or null when it is off. */
  deleteMaxFraction: number | null;
  /** The account, as heartbeats name it. */
  account: string;
  /** Where the fingerprint key comes from (absent: unkeyed fingerprints, tests only). */
  keySource?: FingerprintKeySource;
  /** Who writes the changelog and where (checked before a restore trusts it); absent: nothing checked. */
  changelog?: { identity?: Identity; topic: string; adoptLegacy?: boolean };
  /**
   * The Redis instance the account keeps its state in (creates its id when none) and whether an instance is one
   * this process kept its state in, and how far back heartbeats claim the account's topics (src/core/claims.ts).
   */
  claims?: { instance(): Promise<string>; known(instance: string): boolean; windowMs: number };
  /**
   * Whether Redis holds the snapshot (a restore Redis evicted keys during does not hold: nothing is published until
   * one does), with what Redis says of its memory; absent: restores are not checked (tests on fakes).
   */
  eviction?: { hold: SnapshotHold; memory: MemoryProbe; setEvicting(on: boolean): void };
}

/** The passes of one account over one pipeline and one upstream. */
export class Passes implements PassRunner {
  readonly pipeline: PagePipeline;
  private readonly ctx: PassContext;
  private readonly snapshot: PassesSnapshot;
  private readonly deletion: DeletionDeps | null;
  private readonly sink: PassesSink;
  private readonly account: string;
  private readonly metrics: RestoreMetrics;
  private readonly keySource: FingerprintKeySource | undefined;
  private readonly changelog: PassesOptions['changelog'];
  private readonly claims: PassesOptions['claims'];
  private readonly eviction: PassesOptions['eviction'];
  /** The most entries the snapshot was known to hold (its count, or the last full restore): what Redis must fit. */
  private knownEntries = 0;
  /** What Redis used right after the last full restore cleared the account (null: not measured). */
  private baselineBytes: number | null = null;

  constructor(
    deps: PipelineDeps & { snapshot: PassesSnapshot; sink: PassesSink },
    private readonly source: ReviewSource,
    options: PassesOptions,
  ) {
    this.pipeline = new PagePipeline(deps);
    this.snapshot = deps.snapshot;
    this.sink = deps.sink;
    this.account = options.account;
    this.metrics = options.metrics;
    this.keySource = options.keySource;
    this.changelog = options.changelog;
    this.claims = options.claims;
    this.eviction = options.eviction;
    const polls = options.polls ?? { intervalMs: 1_000, lookback: 'learned', lookbackFloorMs: 1_000 };
    const pollState = new PollState({
      intervalMs: polls.intervalMs,
      mode: polls.lookback,
      floorMs: Math.min(polls.lookbackFloorMs, options.overlapMs),
      ceilingMs: options.overlapMs,
      freshnessBoundMs: polls.freshnessBoundMs ?? 0,
      readsPerInterval: polls.readsPerInterval,
      pageSize: polls.pageSize,
    });
    this.ctx = { overlapMs: options.overlapMs, polls: pollState, metrics: options.metrics, clock: this.pipeline.clock };
    const { deleteMaxFraction: maxFraction, metrics } = options;
    this.deletion = maxFraction === null ? null : { snapshot: deps.snapshot, sink: deps.sink, metrics, maxFraction };
  }

  checkpoint(): Promise<Checkpoint> {
    return this.snapshot.checkpoint(true, this.pipeline.committer.sealed);
  }

  async prepare(epoch: number, signal: AbortSignal, force = false, alive?: () => void): Promise<boolean> {
    this.pipeline.reset();
    // A new leadership: the trailing reads start afresh from the present (the sweep covers a gap in leadership).
    this.ctx.polls.trailing.reset();
    const ports: RestorePorts = {
      changelogState: () => this.snapshot.changelogState(),
      clearForRestore: () => this.snapshot.clearForRestore(),
      restoreEntries: (e, entries, verify) => this.snapshot.restoreEntries(e, entries, verify),
      restoreFinish: (e, ckpt, offsets, cluster, tail) => this.snapshot.restoreFinish(e, ckpt, offsets, cluster, tail),
      setKafkaCluster: (cluster) => this.snapshot.setKafkaCluster(cluster),
      seal: (e) => this.snapshot.seal(e),
      sealIfComplete: (e) => this.snapshot.sealIfComplete(e),
      ...(this.snapshot.stampIdentity ? { stampIdentity: (id: Identity) => this.snapshot.stampIdentity!(id) } : {}),
      readChangelog: (from, onRecords, s) => this.sink.readChangelog(from, onRecords, s),
      clusterId: () => this.sink.clusterId(),
      ...(this.sink.formerChangelog ? { formerChangelog: () => this.sink.formerChangelog!() } : {}),
    };
    const { logger } = this.pipeline.deps;
    const clock = this.pipeline.clock;
    // Identity first: nothing is fenced, written or copied on Kafka before the changelog topic, the installations
    // publishing into the account's topics and Redis's own records are found to be this deployment's.
    await this.verifyBeforeActing(ports);
    await this.sink.beginTransactions();
    const progress = async (seen: number, startedAt: number, finished: boolean): Promise<void> => {
      const finishedAt = finished ? clock() : null;
      const record = { kind: 'restore' as const, requestId: null, seen, estimatedTotal: null, startedAt, finishedAt };
      await this.snapshot.setPassProgress(record);
    };
    const { tracer } = this.pipeline;
    const span = tracer.enabled ? tracer.startPass('restore', { [SPAN_ATTRIBUTES.epoch]: epoch }) : null;
    const before = await this.memoryStats();
    this.knownEntries = Math.max(this.knownEntries, await this.snapshot.size().catch(() => 0));
    let outcome: RestoreOutcome | null = null;
    let lostDuring: string | null = null;
    try {
      outcome = await restoreFromChangelog(
        { ...ports, clearForRestore: () => this.clearMeasured() },
        {
          ...{ logger, metrics: this.metrics, clock, signal, progress, alive, account: this.account },
          ...(this.changelog
            ? {
                identity: this.changelog.identity,
                topic: this.changelog.topic,
                adoptLegacy: this.changelog.adoptLegacy,
              }
            : {}),
        },
        epoch,
        force,
      );
      span?.setAttributes({
        'reviews_bridge.restore.kind': outcome.kind,
        'reviews_bridge.restore.entries': outcome.entries,
      });
      if (span) endSpan(span, 'ok');
    } catch (err) {
      if (span) endSpan(span, signal.aborted ? 'aborted' : 'error', err);
      // Keys evicted under the restore itself (its batches and finish check them): it did not hold.
      if (!(this.eviction && err instanceof SnapshotLostError)) throw err;
      lostDuring = err.message.replace(/^LOST(-PART)?: /, '');
    }
    if (outcome?.reacquire) return false;
    await this.checkHeld(before, outcome, lostDuring);
    if (outcome?.kind === 'full') this.knownEntries = outcome.entries;
    if (outcome) this.pipeline.restored(outcome.txn);
    await this.snapshot.adoptPauseState?.();
    // The generated fingerprint key is copied to the changelog only once the restore trusted that topic.
    // After a full restore the topic may be new (a reset after it was created again): its copy is read again.
    await this.keySource?.persist(outcome?.kind === 'full');
    // Restored or sealed as it stands: a key lost from now on is told from one never written.
    this.pipeline.sealed();
    return true;
  }

  // Clears the account for a full restore, then reads what Redis uses without the account's snapshot.
  private async clearMeasured(): Promise<void> {
    await this.snapshot.clearForRestore();
    this.baselineBytes = (await this.memoryStats())?.usedMemory ?? null;
  }

  /** The checks that read only, before anything is fenced, written or copied on Kafka (see prepare). */
  private async verifyBeforeActing(ports: RestorePorts): Promise<void> {
    const claims = this.claims;
    if (this.sink.verifyBeforeActing) {
      const instance = claims ? await claims.instance() : '';
      const known = (id: string) => claims?.known(id) ?? true;
      await this.sink.verifyBeforeActing({ instance, known }, claims?.windowMs ?? 0, this.pipeline.clock());
    }
    if (!this.changelog?.identity) return;
    const [state, cluster] = await Promise.all([ports.changelogState(), ports.clusterId()]);
    checkRedisIdentity(state, cluster, ports, {
      identity: this.changelog.identity,
      topic: this.changelog.topic,
      account: this.account,
    });
  }

  takeRestoreRequest(): Promise<boolean> {
    return this.snapshot.takeRestoreRequest();
  }

  /**
   * Whether the restore just finished holds: Redis evicted nothing while it ran (INFO's evicted_keys, when Redis
   * answers INFO) and, after a full restore or any eviction, every key of the sealed snapshot is there. One that
   * does not hold throws SnapshotLostError (the loop restores again in full, backing off while Redis keeps
   * evicting): no pass runs on it, so nothing is published for the account meanwhile. Each change of state is
   * logged once.
   */
  private async checkHeld(
    before: { evictedKeys: number } | null,
    outcome: Pick<RestoreOutcome, 'kind' | 'entries'> | null,
    lostDuring: string | null,
  ): Promise<void> {
    const eviction = this.eviction;
    if (!eviction) return;
    const { logger } = this.pipeline.deps;
    const after = await this.memoryStats();
    const evicted = before && after ? Math.max(0, after.evictedKeys - before.evictedKeys) : null;
    const look = outcome?.kind === 'full' || (evicted ?? 0) > 0 || eviction.hold.state().kind === 'evicting';
    const lost = lostDuring ?? (look ? ((await this.snapshot.verifyHeld?.()) ?? null) : null);
    if (lost === null && !(evicted !== null && evicted > 0)) {
      eviction.setEvicting(false);
      if (eviction.hold.held()) {
        logger.warn({ account: this.account }, 'Redis holds the snapshot again: publishing resumes');
      }
      return;
    }
    const seen: EvictionSeen = {
      evicted,
      lost,
      needBytes: await this.needBytes(outcome),
      maxmemory: after?.maxmemory ?? null,
    };
    const message = evictionMessage(this.account, seen);
    eviction.setEvicting(true);
    if (eviction.hold.evicting(seen, this.pipeline.clock())) logger.error({ account: this.account, ...seen }, message);
    else logger.debug({ account: this.account, ...seen }, message);
    const state = eviction.hold.state();
    const attempts = state.kind === 'evicting' ? state.attempts : 1;
    throw new SnapshotLostError(`LOST-PART: ${message}`, true, evictionBackoffMs(attempts));
  }

  /**
   * About how many bytes Redis needs with the account's snapshot in it: what it used once the restore had cleared
   * the account, plus what the snapshot's entries take (as many as the last restore or the entry count knew, at the
   * bytes a few buckets measure); null when Redis does not say.
   */
  private async needBytes(outcome: Pick<RestoreOutcome, 'entries'> | null): Promise<number | null> {
    if (this.baselineBytes === null) return null;
    const perEntry = await this.eviction?.memory.bytesPerEntry().catch(() => null);
    if (!perEntry) return null;
    const entries = Math.max(this.knownEntries, outcome?.entries ?? 0);
    return Math.round(this.baselineBytes + perEntry * entries);
  }

  private async memoryStats(): Promise<{ evictedKeys: number; usedMemory: number; maxmemory: number } | null> {
    return (await this.eviction?.memory.stats().catch(() => null)) ?? null;
  }

  takeSweepRequest(): Promise<boolean> {
    return this.snapshot.takeSweepRequest();
  }

  incremental(epoch: number, signal: AbortSignal): Promise<PassSummary> {
    return runIncrementalPoll(this.ctx, this.pipeline, this.source, epoch, signal);
  }

  trailingDueAt(open: ReadonlySet<number> = new Set()): number | null {
    // Trailing reads count late changes against what polls covered: none before a poll has.
    const polls = this.ctx.polls;
    return polls.missedBefore(this.ctx.clock()) === null ? null : polls.trailing.nextDueAt(open);
  }

  trailingTurn(open: ReadonlySet<number>): number | null {
    return this.ctx.polls.trailing.turn(this.ctx.clock(), open);
  }

  openTrailing(
    epoch: number,
    signal: AbortSignal,
    tier?: number,
    open: ReadonlySet<number> = new Set(),
  ): Promise<TrailingRun | null> {
    return openTrailingRead(this.ctx, this.pipeline, this.source, epoch, signal, tier, open);
  }

  freshness(): FreshnessReport {
    return freshnessOf(this.ctx.polls, this.ctx.clock());
  }

  openFullScan(epoch: number, signal: AbortSignal): Promise<LongPassRun> {
    return openFullScan(this.ctx, this.pipeline, this.source, epoch, signal, this.deletion, true);
  }

  settle(): Promise<void> {
    return this.pipeline.settle();
  }

  pausedSince(): Promise<number | null> {
    return this.snapshot.pausedSince();
  }

  async takeResync(): Promise<ResyncRequest | null> {
    const request = await this.snapshot.takeResyncRequest();
    if (request === 'invalid') this.pipeline.deps.logger.error('dropped an unreadable resync request');
    return request === 'invalid' ? null : request;
  }

  requeueResync(request: ResyncRequest): Promise<void> {
    return this.snapshot.requeueResync(request);
  }

  openResync(epoch: number, signal: AbortSignal, request: ResyncRequest): Promise<LongPassRun> {
    const env = { ctx: this.ctx, pipeline: this.pipeline, source: this.source, epoch, signal };
    return openResync(request, this.snapshot, env);
  }

  async heartbeat(epoch: number, paused: boolean): Promise<void> {
    const ckpt = await this.snapshot.checkpoint();
    const event = heartbeatEvent({
      source: this.pipeline.deps.eventSource,
      account: this.account,
      watermark: ckpt.watermark,
      lastCompletePoll: ckpt.lastIncrementalAt,
      leaseEpoch: epoch,
      paused,
      now: this.pipeline.clock(),
    });
    await this.sink.publishHeartbeat(event);
  }

  async applyCheckpointChange(epoch: number): Promise<CheckpointChange | null> {
    const next = (await this.snapshot.nextCheckpointChange?.()) ?? null;
    const { logger } = this.pipeline.deps;
    if (next === 'invalid') logger.error('dropped an unreadable checkpoint change');
    if (next === null || next === 'invalid') return null;
    const { change, stored } = next;
    // Nothing else is in flight while paused; the change is a checkpoint-only commit that must reach the changelog.
    // Cleared only once committed: a failed commit leaves it for the next turn (applying it twice rewinds to the
    // same watermark).
    await this.pipeline.settle();
    await this.pipeline.committer.commitUnit(epoch, {
      update: { rewindWatermark: change.watermark },
      durable: true,
      force: true,
    });
    await this.snapshot.checkpointChangeApplied?.(stored);
    return change;
  }

  /** Runs a whole full scan now (the `sweep` command, benchmarks); `afterPage` runs after every page (progress). */
  async fullScan(epoch: number, signal: AbortSignal, afterPage?: () => Promise<void>): Promise<LongPassRun> {
    // Alone: no polls run beside it, so its deletions have no reads to wait for.
    const run = await openFullScan(this.ctx, this.pipeline, this.source, epoch, signal, this.deletion);
    try {
      // One page per step; the pipeline overlaps each page's publish with the next page's read.
      while (await run.step()) await afterPage?.();
    } finally {
      await run.close();
    }
    return run;
  }
}
