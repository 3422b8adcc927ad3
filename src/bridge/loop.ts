import type { Logger } from 'pino';
import { sleep as realSleep } from '../core/clock.js';
import type { BridgeMetrics } from '../ops/metrics.js';
import { LeaseKeeper, type LeasePort } from './lease-keeper.js';
import type { FullScanRun, PassRunner } from './passes/index.js';
import { kindOf } from '../core/errors.js';
import {
  NO_FAILURE,
  failed,
  heartbeatDue,
  nextStep,
  pauseCheckDue,
  pausedWaitMs,
  recovery,
  scanToOpen,
  standbyWaitMs,
  type FailureRun,
  type ScheduleTiming,
} from '../core/schedule.js';
import type { ResyncRequest } from '../core/resync-request.js';
import { errorKind } from '../ops/logger.js';

// The long-running loop of one replica: lead or stand by, run the initial load, then incremental polls on their
// interval with the reconciliation sweep advancing a page at a time in between (so the sweep always yields the
// upstream's rate budget to polls). Any failure abandons the pass without committing it and retries with backoff.
// What to do next and when is decided by the pure functions of src/core/schedule.ts; this class carries it out.

/** Timing of the loop (the schedule's settings). */
export type LoopTiming = ScheduleTiming;

/** What the loop drives; every dependency is a small port so that unit tests run it on fakes. */
export interface LoopDeps {
  passes: PassRunner;
  lease: LeasePort;
  metrics: Pick<BridgeMetrics, 'passFinished' | 'setLeadership' | 'setPaused'>;
  logger: Logger;
  timing: LoopTiming;
  clock?: () => number;
  /** Waits `ms` or until `signal` aborts (rejects then); tests pass a fake that advances a fake clock. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** The backoff jitter's draw in [0, 1); tests pass a constant. */
  random?: () => number;
  /** Called while standing by, after the sweep and any resync went back: frees what only a leader needs. */
  onStandby?: () => Promise<void>;
}

/** Liveness as the ops server reports it. */
export interface LoopHealth {
  ok: boolean;
  role: 'leader' | 'standby' | 'starting';
  lastTickAgeSeconds: number;
  /** The kind of the last failure (an error class or upstream error kind), never its message. */
  lastError: string | null;
}

/** One replica's poll loop. */
export class BridgeLoop {
  private readonly stopController = new AbortController();
  private workController = new AbortController();
  private running: Promise<void> | null = null;
  private fullScan: FullScanRun | null = null;
  private fullScanStartedAt = 0;
  private nextPollAt = 0;
  private initialDone = false;
  /** Failures since the last step that succeeded, and the kind of the last (the schedule's recovery reads it). */
  private failures: FailureRun = NO_FAILURE;
  private lastTick: number;
  private lastError: string | null = null;
  private role: LoopHealth['role'] = 'starting';
  private readonly keeper: LeaseKeeper;
  private readonly clock: () => number;
  private paused: { checkedAt: number; since: number | null } = { checkedAt: -Infinity, since: null };
  /** A resync taken from Redis and not completed yet: kept to run again after a failure. */
  private resync: ResyncRequest | null = null;
  private nextHeartbeatAt = 0;
  private heartbeatInFlight = false;
  /** The epoch whose leadership was readied (transactional id taken, Redis restored from Kafka where needed). */
  private preparedEpoch = 0;

  constructor(private readonly deps: LoopDeps) {
    this.clock = deps.clock ?? Date.now;
    this.lastTick = this.clock();
    this.keeper = new LeaseKeeper(deps.lease, {
      periodMs: Math.max(200, deps.timing.leaseTtlMs / 3),
      logger: deps.logger,
      onLost: () => this.workController.abort(new Error('lease lost')),
    });
  }

  /** Starts the loop in the background. */
  start(): void {
    if (this.running) return;
    this.keeper.start();
    this.running = this.loop();
  }

  /** Stops polling, abandons the upstream request in flight, lets a publish/commit in flight finish. */
  async stop(): Promise<void> {
    this.stopController.abort();
    this.workController.abort();
    await this.running;
    await this.abandonFullScan();
    // The page in flight finishes (publish and commit) before the lease goes.
    await this.deps.passes.settle();
    await this.handBackResync();
    await this.keeper.release().catch((err: unknown) => this.deps.logger.warn({ err }, 'lease release failed'));
    this.deps.metrics.setLeadership('standby', 0);
  }

  /** Liveness: the loop has ticked recently (it ticks at least every poll interval and lease period). */
  health(): LoopHealth {
    const { pollIntervalMs, leaseTtlMs } = this.deps.timing;
    const age = (this.clock() - this.lastTick) / 1000;
    const limit = (Math.max(pollIntervalMs, leaseTtlMs) * 4 + 120_000) / 1000;
    return { ok: age < limit, role: this.role, lastTickAgeSeconds: age, lastError: this.lastError };
  }

  private get stopping(): boolean {
    return this.stopController.signal.aborted;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.lastTick = this.clock();
      let epoch = this.keeper.epoch();
      try {
        if (epoch === 0) epoch = await this.keeper.renewNow();
      } catch (err) {
        this.fail(err, 'lease');
        await this.pause(this.recover().ms);
        continue;
      }
      if (epoch === 0) {
        this.becomes('standby', 0);
        await this.abandonFullScan();
        await this.handBackResync();
        await this.deps.onStandby?.().catch((err: unknown) => this.deps.logger.warn({ err }, 'standby release failed'));
        await this.pause(standbyWaitMs(this.deps.timing));
        continue;
      }
      this.becomes('leader', epoch);
      if (this.workController.signal.aborted) this.workController = new AbortController();
      try {
        if (this.preparedEpoch !== epoch) {
          // Before any pass of a new leadership: fence the former leader at Kafka, bring Redis up to Kafka.
          if (!(await this.deps.passes.prepare(epoch, this.workController.signal))) {
            // Redis issued an epoch not above the changelog's (it lost its keys): take a newer one first.
            await this.keeper.lease.release();
            continue;
          }
          this.preparedEpoch = epoch;
        }
        const paused = await this.pausedNow();
        this.heartbeat(epoch, paused);
        if (paused) {
          // No upstream request while paused; the sweep resumes from its checkpoint on resume.
          await this.abandonFullScan();
          await this.pause(pausedWaitMs(this.deps.timing));
          continue;
        }
        const waitMs = await this.work(epoch, this.workController.signal);
        this.failures = NO_FAILURE;
        if (waitMs > 0) await this.pause(waitMs);
      } catch (err) {
        await this.abandonFullScan();
        if (this.stopping) break;
        if (this.keeper.epoch() === 0 && this.workController.signal.aborted) {
          // The lease went (handed over to balance the replicas, or taken): the pass was abandoned on purpose.
          this.deps.logger.info({ epoch }, 'pass abandoned: the lease is no longer held here');
          continue;
        }
        this.fail(err, 'pass');
        const next = this.recover();
        if (next.kind === 'restore') {
          // Redis lost the account's keys: take the account anew (a new lease) and restore before any pass.
          this.preparedEpoch = 0;
          await this.keeper.renewNow().catch(() => undefined);
        }
        await this.pause(next.ms);
      }
    }
  }

  /** Does the next piece of work; resolves how long to wait before the next one. */
  private async work(epoch: number, signal: AbortSignal): Promise<number> {
    const { passes, metrics, timing, logger } = this.deps;
    const now = this.clock();

    // The checkpoint is read only between full scans: while one runs, the loop already knows where it stands.
    if (!this.fullScan && (await passes.takeRestoreRequest())) {
      logger.warn({ epoch }, 'restore from the Kafka changelog requested by an operator');
      if (!(await passes.prepare(epoch, signal, true))) await this.keeper.lease.release();
      return 0;
    }
    if (!this.fullScan) {
      const ckpt = await passes.checkpoint();
      this.initialDone = ckpt.initialDone;
      const requested = ckpt.initialDone ? await passes.takeSweepRequest() : false;
      const reason = scanToOpen(
        { initialDone: ckpt.initialDone, scanInProgress: ckpt.sweep !== null, lastSweepAt: ckpt.lastSweepAt },
        requested,
        now,
        timing,
      );
      const due = reason === 'due';
      if (reason !== null) {
        this.fullScan = await passes.openFullScan(epoch, signal);
        this.fullScanStartedAt = now;
        logger.info({ kind: this.fullScan.type, requested, due }, 'sweep started');
      } else if ((this.resync ??= await passes.takeResync())) {
        this.fullScan = await passes.openResync(epoch, signal, this.resync);
        this.fullScanStartedAt = now;
        logger.info({ id: this.resync.id, scope: this.resync.scope.kind }, 'resync started');
      }
    }

    const step = nextStep(
      { fullScan: this.fullScan, initialDone: this.initialDone, nextPollAt: this.nextPollAt },
      now,
      timing,
    );
    if (step.kind === 'poll') {
      this.nextPollAt = step.nextPollAt;
      const t0 = this.clock();
      try {
        const summary = await passes.incremental(epoch, signal);
        metrics.passFinished('incremental', 'ok', (this.clock() - t0) / 1000);
        if (summary.events > 0) logger.info({ kind: 'incremental', ...summary }, 'poll committed');
      } catch (err) {
        metrics.passFinished('incremental', signal.aborted ? 'aborted' : 'error', (this.clock() - t0) / 1000);
        throw err;
      }
      return 0;
    }

    if (step.kind === 'scan-page' && this.fullScan) {
      const scan = this.fullScan;
      let more: boolean;
      try {
        more = await scan.step();
      } catch (err) {
        metrics.passFinished(scan.type, signal.aborted ? 'aborted' : 'error', this.fullScanSeconds());
        throw err;
      }
      if (!more) {
        this.fullScan = null;
        if (scan.type === 'resync') this.resync = null;
        metrics.passFinished(scan.type, 'ok', this.fullScanSeconds());
        logger.info({ kind: scan.type, ...scan.summary }, 'sweep completed');
        if (scan.type === 'initial') {
          this.initialDone = true;
          this.nextPollAt = 0;
        }
      }
      return 0;
    }
    // A deletion-detection step is not asked for yet (detection runs inside the sweep's last page).
    return step.kind === 'wait' ? step.ms : 0;
  }

  /** Whether an operator paused the bridge; read from Redis at most every PAUSE_CHECK_MS, not on every page. */
  private async pausedNow(): Promise<boolean> {
    const now = this.clock();
    if (pauseCheckDue(this.paused.checkedAt, now)) {
      const since = await this.deps.passes.pausedSince();
      if ((since !== null) !== (this.paused.since !== null)) {
        this.deps.logger.info({ paused: since !== null }, since !== null ? 'paused by an operator' : 'resumed');
      }
      this.paused = { checkedAt: now, since };
      this.deps.metrics.setPaused(since !== null);
    }
    return this.paused.since !== null;
  }

  /** Sends a heartbeat when one is due, in the background: a slow Kafka must not hold up the passes. */
  private heartbeat(epoch: number, paused: boolean): void {
    const now = this.clock();
    if (!heartbeatDue(this.nextHeartbeatAt, this.heartbeatInFlight, now, this.deps.timing)) return;
    this.nextHeartbeatAt = now + (this.deps.timing.heartbeatIntervalMs ?? 0);
    this.heartbeatInFlight = true;
    this.deps.passes
      .heartbeat(epoch, paused)
      .catch((err: unknown) => this.deps.logger.warn({ err }, 'heartbeat not sent'))
      .finally(() => (this.heartbeatInFlight = false));
  }

  /** A resync this replica took but will not finish goes back to Redis for whoever leads next. */
  private async handBackResync(): Promise<void> {
    const request = this.resync;
    if (!request) return;
    this.resync = null;
    await this.deps.passes
      .requeueResync(request)
      .catch((err: unknown) => this.deps.logger.error({ err, id: request.id }, 'a resync request was lost'));
  }

  private fullScanSeconds(): number {
    return (this.clock() - this.fullScanStartedAt) / 1000;
  }

  /** Drops the full scan in progress (it resumes from its checkpoint) and closes its page iterator. */
  private async abandonFullScan(): Promise<void> {
    const scan = this.fullScan;
    this.fullScan = null;
    await scan?.close().catch((err: unknown) => this.deps.logger.warn({ err }, 'closing the sweep failed'));
  }

  private becomes(role: 'leader' | 'standby', epoch: number): void {
    if (this.role !== role) this.deps.logger.info({ role, epoch }, role === 'leader' ? 'leading' : 'standing by');
    this.role = role;
    this.deps.metrics.setLeadership(role, epoch);
  }

  private fail(err: unknown, where: string): void {
    const kind = kindOf(err);
    const awaitingReplica = this.failures.kind === 'replication' && this.failures.count > 0;
    this.failures = failed(this.failures, kind);
    this.lastError = errorKind(err);
    if (kind === 'snapshot_lost') {
      this.deps.logger.warn({ where }, 'the account keys vanished from Redis; restoring from the Kafka changelog');
      return;
    }
    if (kind === 'replication') {
      // Expected for seconds after every Redis failover: one warning when it starts, not an error a second.
      if (!awaitingReplica) this.deps.logger.warn({ err, where }, 'waiting for a Redis replica to acknowledge');
      return;
    }
    const fenced = kind === 'fenced';
    this.deps.logger.error(
      { err, where, failures: this.failures.count, fenced },
      fenced ? 'another replica took over; commit refused' : 'pass failed; nothing committed past the last page',
    );
  }

  /** What the schedule says to do after the failures so far. */
  private recover(): ReturnType<typeof recovery> {
    return recovery(this.failures, this.deps.timing, (this.deps.random ?? Math.random)());
  }

  private async pause(ms: number): Promise<void> {
    try {
      const signal = this.stopController.signal;
      await (this.deps.sleep ?? realSleep)(ms, signal);
    } catch {
      // Stop requested: the loop condition ends the loop.
    }
  }
}
