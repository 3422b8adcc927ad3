import type { Logger } from 'pino';
import type { BridgeMetrics } from '../../ops/metrics.js';
import { nextStep, scanToOpen, type ScheduleTiming } from '../../core/schedule.js';
import type { ResyncRequest } from '../../core/resync-request.js';
import type { LongPassRun, PassRunner, TrailingRun } from '../passes/index.js';

// A leader's work, a step at a time: the schedule (src/core/schedule.ts) says whether the next step is a poll, a
// page of the long pass (a full scan or a resync, opened here when one is due or asked for) or a wait; this class
// carries the step out and keeps where the long pass stands between steps, and which leadership it readied.

/** What the leader's work needs. */
export interface LeaderWorkDeps {
  passes: PassRunner;
  metrics: Pick<BridgeMetrics, 'passFinished'>;
  logger: Logger;
  timing: ScheduleTiming;
  clock: () => number;
  /** Gives the lease up so that the account is taken anew under a newer epoch (a restore may ask it). */
  releaseLease: () => Promise<void>;
  /** Tells the loop's liveness that a long readying (a restore, a wait for a start slot) goes forward. */
  alive?: () => void;
}

/** The steps of a leader, and the long pass they advance. */
export class LeaderWork {
  private longPass: LongPassRun | null = null;
  /** The trailing reads under way, by tier (src/core/trailing.ts), a page per step in turn of their shares. */
  private readonly trailing = new Map<number, TrailingRun>();
  private longPassStartedAt = 0;
  /** When the long pass last advanced (a step ended, or it opened): the schedule keeps it from starving. */
  private longPassStepAt = 0;
  /** When a trailing read's last page ended (0: none yet). */
  private trailingStepAt = 0;
  /** When the last poll ended (null: none yet). */
  private polledAt: number | null = null;
  private nextPollAt = 0;
  private initialDone = false;
  /** A resync taken from Redis and not completed yet: kept to run again after a failure. */
  private resync: ResyncRequest | null = null;
  /** The epoch whose leadership was readied (transactional id taken, Redis restored from Kafka where needed). */
  private preparedEpoch = 0;
  /** The next readying restores Redis from the changelog's beginning (some of the account's keys were lost). */
  private restoreInFull = false;

  constructor(private readonly deps: LeaderWorkDeps) {}

  /**
   * Readies the leadership of `epoch` before its first pass: fences the former leader at Kafka and brings Redis up
   * to Kafka. Resolves false when the lease was given up to be taken anew under a newer epoch first.
   */
  async prepared(epoch: number, signal: AbortSignal): Promise<boolean> {
    if (this.preparedEpoch === epoch) return true;
    const full = this.restoreInFull;
    const ready = await this.deps.passes.prepare(epoch, signal, full, this.deps.alive);
    // Restored in full either way: a new lease asked for after it needs only the tail.
    this.restoreInFull = false;
    if (!ready) {
      // Redis issued an epoch not above the changelog's (it lost its keys): take a newer one first.
      await this.deps.releaseLease();
      return false;
    }
    this.preparedEpoch = epoch;
    return true;
  }

  /**
   * Redis lost keys, or a Kafka commit's outcome is unknown: the leadership is readied (restored) again first;
   * `full`: from the changelog's beginning (some keys were lost, and a tail since the checkpoint would not bring
   * them back).
   */
  unprepare(full = false): void {
    this.preparedEpoch = 0;
    if (full) this.restoreInFull = true;
  }

  /** Does the next piece of work; resolves how long to wait before the next one. */
  async step(epoch: number, signal: AbortSignal): Promise<number> {
    const { passes, timing, logger } = this.deps;
    const now = this.deps.clock();
    // A checkpoint change recorded while paused and not applied before the resume goes first.
    if (!this.longPass && (await this.applyCheckpointChange(epoch))) return 0;
    // The checkpoint is read only between full scans: while one runs, the loop already knows where it stands.
    if (!this.longPass && (await passes.takeRestoreRequest())) {
      logger.warn({ epoch }, 'restore from the Kafka changelog requested by an operator');
      if (!(await passes.prepare(epoch, signal, true, this.deps.alive))) await this.deps.releaseLease();
      return 0;
    }
    if (!this.longPass) await this.openLongPass(epoch, signal, now);
    const state = {
      longPass: this.longPass,
      initialDone: this.initialDone,
      nextPollAt: this.nextPollAt,
      trailingOpen: this.trailing.size > 0,
      trailingDueAt: passes.trailingDueAt?.(this.openTiers()) ?? null,
      longPassStepAt: this.longPassStepAt,
      trailingStepAt: this.trailingStepAt,
      ...(this.polledAt === null ? {} : { polledAt: this.polledAt }),
    };
    const step = nextStep(state, now, timing);
    if (step.kind === 'poll') {
      this.nextPollAt = step.nextPollAt;
      await this.poll(epoch, signal);
      this.polledAt = this.deps.clock();
      return 0;
    }
    if (step.kind === 'trailing-page') {
      await this.trailingPage(epoch, signal);
      this.trailingStepAt = this.deps.clock();
      return 0;
    }
    if (step.kind === 'scan-page' && this.longPass) {
      await this.scanPage(this.longPass, signal);
      this.longPassStepAt = this.deps.clock();
      return 0;
    }
    // A deletion-detection step is not asked for yet (detection runs inside the sweep's last page).
    return step.kind === 'wait' ? step.ms : 0;
  }

  /**
   * Applies an operator's pending checkpoint change (recorded only while the account was paused), between passes;
   * resolves whether there was one.
   */
  async applyCheckpointChange(epoch: number): Promise<boolean> {
    const change = await this.deps.passes.applyCheckpointChange?.(epoch);
    if (!change) return false;
    const { watermark, by, requestedAt } = change;
    this.deps.logger.info(
      { epoch, watermark: new Date(watermark).toISOString(), by, requestedAt: new Date(requestedAt).toISOString() },
      'checkpoint changed by an operator: polls re-read from the new watermark',
    );
    return true;
  }

  /** Stands down (another replica leads): the long pass is dropped and a resync goes back for the next leader. */
  async standDown(): Promise<void> {
    await this.abandon();
    await this.handBackResync();
  }

  /** Drops the full scan in progress (it resumes from its checkpoint) and closes its page iterator. */
  async abandon(): Promise<void> {
    const trailing = [...this.trailing.values()];
    this.trailing.clear();
    for (const read of trailing) {
      await read.close().catch((err: unknown) => this.deps.logger.warn({ err }, 'closing a trailing read failed'));
    }
    const scan = this.longPass;
    this.longPass = null;
    await scan?.close().catch((err: unknown) => this.deps.logger.warn({ err }, 'closing the sweep failed'));
  }

  /** A resync this replica took but will not finish goes back to Redis for whoever leads next. */
  async handBackResync(): Promise<void> {
    const request = this.resync;
    if (!request) return;
    this.resync = null;
    await this.deps.passes
      .requeueResync(request)
      .catch((err: unknown) => this.deps.logger.error({ err, id: request.id }, 'a resync request was lost'));
  }

  /** Opens the full scan the checkpoint makes due (or an operator asked for), else a pending resync, if any. */
  private async openLongPass(epoch: number, signal: AbortSignal, now: number): Promise<void> {
    const { passes, timing, logger } = this.deps;
    const ckpt = await passes.checkpoint();
    this.initialDone = ckpt.initialDone;
    const requested = ckpt.initialDone ? await passes.takeSweepRequest() : false;
    const reason = scanToOpen(
      { initialDone: ckpt.initialDone, scanInProgress: ckpt.sweep !== null, lastSweepAt: ckpt.lastSweepAt },
      requested,
      now,
      timing,
    );
    if (reason !== null) {
      this.longPass = await passes.openFullScan(epoch, signal);
      this.longPassStartedAt = this.longPassStepAt = now;
      logger.info({ kind: this.longPass.type, requested, due: reason === 'due' }, 'sweep started');
    } else if ((this.resync ??= await passes.takeResync())) {
      this.longPass = await passes.openResync(epoch, signal, this.resync);
      this.longPassStartedAt = this.longPassStepAt = now;
      logger.info({ id: this.resync.id, scope: this.resync.scope.kind }, 'resync started');
    }
  }

  private async poll(epoch: number, signal: AbortSignal): Promise<void> {
    const { passes, metrics, logger, clock } = this.deps;
    const t0 = clock();
    try {
      const summary = await passes.incremental(epoch, signal);
      metrics.passFinished('incremental', 'ok', (clock() - t0) / 1000);
      if (summary.events > 0) logger.info({ kind: 'incremental', ...summary }, 'poll committed');
    } catch (err) {
      metrics.passFinished('incremental', signal.aborted ? 'aborted' : 'error', (clock() - t0) / 1000);
      throw err;
    }
  }

  /**
   * Steps a page of the trailing read whose turn it is (each tier's share of the budget), opening it when due; a
   * failure drops it (it runs again when due).
   */
  private async trailingPage(epoch: number, signal: AbortSignal): Promise<void> {
    const { passes } = this.deps;
    const open = this.openTiers();
    const turn = passes.trailingTurn?.(open);
    if (turn === null) return;
    // Without turns (a runner of one read at a time): the open read, else the one due.
    const tier = turn ?? [...open][0];
    let read = tier === undefined ? undefined : this.trailing.get(tier);
    if (!read) {
      read = (await passes.openTrailing?.(epoch, signal, tier, open)) ?? undefined;
      if (!read) return;
      this.trailing.set(read.tier, read);
    }
    try {
      if (!(await read.step())) this.trailing.delete(read.tier);
    } catch (err) {
      this.trailing.delete(read.tier);
      await read.close().catch(() => undefined);
      throw err;
    }
  }

  /** The tiers with a trailing read open. */
  private openTiers(): ReadonlySet<number> {
    return new Set(this.trailing.keys());
  }

  private async scanPage(scan: LongPassRun, signal: AbortSignal): Promise<void> {
    const { metrics, logger } = this.deps;
    let more: boolean;
    try {
      more = await scan.step();
    } catch (err) {
      metrics.passFinished(scan.type, signal.aborted ? 'aborted' : 'error', this.longPassSeconds());
      throw err;
    }
    if (more) return;
    this.longPass = null;
    if (scan.type === 'resync') this.resync = null;
    metrics.passFinished(scan.type, 'ok', this.longPassSeconds());
    logger.info({ kind: scan.type, ...scan.summary }, 'sweep completed');
    if (scan.type === 'initial') {
      this.initialDone = true;
      this.nextPollAt = 0;
    }
  }

  private longPassSeconds(): number {
    return (this.deps.clock() - this.longPassStartedAt) / 1000;
  }
}
