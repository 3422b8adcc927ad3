import type { Logger } from 'pino';
import { sleep as realSleep } from '../core/clock.js';
import { ConfigError, kindOf } from '../core/errors.js';
import type { BridgeMetrics } from '../ops/metrics.js';
import { LeaseKeeper, type LeasePort } from './lease-keeper.js';
import type { PassRunner } from './passes/index.js';
import { pausedWaitMs, standbyWaitMs, type ScheduleTiming } from '../core/schedule.js';
import { SnapshotLostError } from '../core/errors.js';
import { FailureLog } from './loop/failures.js';
import { LeaderChores } from './loop/chores.js';
import { LeaderWork } from './loop/leader-work.js';

// The long-running loop of one replica: lead or stand by, run the initial load, then incremental polls on their
// interval with the reconciliation sweep advancing a page at a time in between (so the sweep yields the upstream's
// rate budget to polls, save a page an interval when polls run back to back). Any failure abandons the pass without committing it and retries with backoff.
// What to do next and when is decided by the pure functions of src/core/schedule.ts. This class keeps the
// leadership (lease, preparation, pause, recovery); the steps of a leader are src/bridge/loop/leader-work.ts, its
// pause flag and heartbeats src/bridge/loop/chores.ts, its failures src/bridge/loop/failures.ts.

/** Timing of the loop (the schedule's settings). */
export type LoopTiming = ScheduleTiming;

/** What the loop drives; every dependency is a small port so that unit tests run it on fakes. */
export interface LoopDeps {
  passes: PassRunner;
  lease: LeasePort;
  metrics: Pick<BridgeMetrics, 'passFinished' | 'setLeadership' | 'setPaused'> &
    Partial<Pick<BridgeMetrics, 'setLeadershipRefused'>>;
  logger: Logger;
  timing: LoopTiming;
  clock?: () => number;
  /** Waits `ms` or until `signal` aborts (rejects then); tests pass a fake that advances a fake clock. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * The lease keeper's waits between renewals (absent: real time); a simulated world passes its virtual clock's,
   * apart from `sleep` because unit tests' fake `sleep` advances their clock by every wait it is given.
   */
  leaseSleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** The backoff jitter's draw in [0, 1); tests pass a constant. */
  random?: () => number;
  /** Called while standing by, after the sweep and any resync went back: frees what only a leader needs. */
  onStandby?: () => Promise<void>;
  /**
   * Whether a failure is a dependency's the process has already reported (kafka unreachable, redis refusing
   * writes...): it is then logged at debug, the dependency's own line having said it once. Absent: never.
   */
  explainFailure?: (err: unknown) => Promise<boolean>;
  /** Told when the leadership is refused (its reason), and when a leadership is readied again (null). */
  onRefusal?: (refusal: Refusal | null) => Promise<void>;
}

/** Why this replica's leadership of the account is refused (a setting to change), since when. */
export interface Refusal {
  /** The setting the refusal names (BRIDGE_DEPLOYMENT_ID, KAFKA_TOPIC_CHANGELOG...). */
  setting: string;
  /** The refusal's one line. */
  reason: string;
  since: number;
}

/** Liveness as the ops server reports it. */
export interface LoopHealth {
  ok: boolean;
  role: 'leader' | 'standby' | 'starting';
  lastTickAgeSeconds: number;
  /** The kind of the last failure (an error class or upstream error kind), never its message. */
  lastError: string | null;
  /** Why the leadership is refused, while it is (the lease is given up meanwhile); null otherwise. */
  refused: Refusal | null;
}

/** One replica's poll loop. */
export class BridgeLoop {
  private readonly stopController = new AbortController();
  private workController = new AbortController();
  private running: Promise<void> | null = null;
  private lastTick: number;
  private role: LoopHealth['role'] = 'starting';
  private readonly keeper: LeaseKeeper;
  private readonly clock: () => number;
  private readonly failures: FailureLog;
  private readonly chores: LeaderChores;
  private readonly work: LeaderWork;
  private refusal: Refusal | null = null;

  constructor(private readonly deps: LoopDeps) {
    const clock = (this.clock = deps.clock ?? Date.now);
    this.lastTick = this.clock();
    this.keeper = new LeaseKeeper(deps.lease, {
      periodMs: Math.max(200, deps.timing.leaseTtlMs / 3),
      logger: deps.logger,
      onLost: () => this.workController.abort(new Error('lease lost')),
      sleep: deps.leaseSleep,
    });
    this.failures = new FailureLog(deps);
    this.chores = new LeaderChores({ ...deps, clock });
    this.work = new LeaderWork({
      ...deps,
      clock,
      releaseLease: () => this.keeper.lease.release(),
      // Progress-based liveness: a restore that reads on, or a wait for a start slot, is no hang.
      alive: () => void (this.lastTick = this.clock()),
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
    await this.work.abandon();
    // The page in flight finishes (publish and commit) before the lease goes.
    await this.deps.passes.settle();
    await this.work.handBackResync();
    await this.keeper.release().catch((err: unknown) => this.deps.logger.warn({ err }, 'lease release failed'));
    this.deps.metrics.setLeadership('standby', 0);
  }

  /** Liveness: the loop has ticked recently (it ticks at least every poll interval and lease period). */
  health(): LoopHealth {
    const { pollIntervalMs, leaseTtlMs } = this.deps.timing;
    const age = (this.clock() - this.lastTick) / 1000;
    const limit = (Math.max(pollIntervalMs, leaseTtlMs) * 4 + 120_000) / 1000;
    const { lastError } = this.failures;
    return { ok: age < limit, role: this.role, lastTickAgeSeconds: age, lastError, refused: this.refusal };
  }

  private get stopping(): boolean {
    return this.stopController.signal.aborted;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.lastTick = this.clock();
      // Renewals stop while a refusal stands aside (see refuse); the next turn takes the lease again to check anew.
      this.keeper.start();
      const epoch = await this.leaseEpoch();
      if (epoch === 0) await this.standBy();
      else if (epoch !== null) await this.lead(epoch);
    }
  }

  /** The epoch of the lease held here (0: another replica holds it); null when the lease could not be read. */
  private async leaseEpoch(): Promise<number | null> {
    const epoch = this.keeper.epoch();
    try {
      const held = epoch === 0 ? await this.keeper.renewNow() : epoch;
      this.failures.succeeded('lease');
      return held;
    } catch (err) {
      this.failures.fail(err, 'lease', await this.explained(err));
      await this.pause(this.failures.recover().ms);
      return null;
    }
  }

  private async standBy(): Promise<void> {
    this.becomes('standby', 0);
    await this.work.standDown();
    await this.deps.onStandby?.().catch((err: unknown) => this.deps.logger.warn({ err }, 'standby release failed'));
    await this.pause(standbyWaitMs(this.deps.timing));
  }

  /** One turn of a leader: readies the leadership once, then a step of work unless paused; recovers from a failure. */
  private async lead(epoch: number): Promise<void> {
    this.becomes('leader', epoch);
    if (this.workController.signal.aborted) this.workController = new AbortController();
    try {
      if (!(await this.work.prepared(epoch, this.workController.signal))) return;
      if (this.refusal) await this.refused(null);
      if (await this.chores.paused(epoch)) {
        // No upstream request while paused; the sweep resumes from its checkpoint on resume.
        await this.work.abandon();
        // An operator's checkpoint change, recorded while paused (KIP-875: offsets change while stopped).
        await this.work.applyCheckpointChange(epoch);
        return await this.pause(pausedWaitMs(this.deps.timing));
      }
      const waitMs = await this.work.step(epoch, this.workController.signal);
      this.failures.cleared();
      if (waitMs > 0) await this.pause(waitMs);
    } catch (err) {
      await this.recoverFrom(err, epoch);
    }
  }

  /** After a failed turn: the pass is abandoned; backs off, or takes the account anew to restore Redis. */
  private async recoverFrom(err: unknown, epoch: number): Promise<void> {
    await this.work.abandon();
    if (this.stopping) return;
    if (this.keeper.epoch() === 0 && this.workController.signal.aborted) {
      // The lease went (handed over to balance the replicas, or taken): the pass was abandoned on purpose.
      this.deps.logger.info({ epoch }, 'pass abandoned: the lease is no longer held here');
      return;
    }
    this.failures.fail(err, 'pass', await this.explained(err));
    const next = this.failures.recover();
    if (err instanceof ConfigError) {
      // Refused (another installation's state or topics, a changelog topic that does not fit): nothing was done
      // on Kafka. Kept, the lease would keep every other replica out and say nothing; given up, with the reason
      // in /readyz, `status` and a metric, it is checked again after the backoff.
      this.work.unprepare();
      await this.keeper.release().catch((e: unknown) => this.deps.logger.warn({ err: e }, 'lease release failed'));
      this.becomes('standby', 0);
      await this.refused({ setting: err.setting, reason: err.message, since: this.refusal?.since ?? this.clock() });
      return await this.pause(next.ms);
    }
    if (kindOf(err) === 'fenced' && this.keeper.epoch() !== 0) {
      // Kafka alone may have fenced this leader (another producer took the transactional id) while Redis still
      // says it leads: kept, the lease would fail every commit for ever and keep every other replica out. Given up,
      // the account is taken anew (here or elsewhere), and a new leadership takes the transactional id again.
      this.deps.logger.warn({ epoch }, 'commit fenced while holding the lease; giving the lease up');
      this.work.unprepare();
      await this.keeper.lease
        .release()
        .catch((e: unknown) => this.deps.logger.warn({ err: e }, 'lease release failed'));
    }
    if (next.kind === 'restore') {
      // Redis lost the account's keys, or a Kafka commit may have landed unseen: take the account anew (renew the
      // lease, or a new one) and bring Redis up to the changelog before any pass derives events again.
      this.work.unprepare(err instanceof SnapshotLostError && err.full);
      await this.keeper.renewNow().catch(() => undefined);
    }
    // A restore Redis evicted keys during: the next one waits longer each time while Redis keeps evicting.
    const evicting = err instanceof SnapshotLostError ? (err.evictingRetryMs ?? 0) : 0;
    await this.pause(Math.max(next.ms, evicting));
  }

  private async refused(refusal: Refusal | null): Promise<void> {
    this.refusal = refusal;
    this.deps.metrics.setLeadershipRefused?.(refusal?.setting ?? null);
    await this.deps
      .onRefusal?.(refusal)
      .catch((err: unknown) => this.deps.logger.warn({ err }, 'refusal not recorded'));
  }

  private async explained(err: unknown): Promise<boolean> {
    return (await this.deps.explainFailure?.(err).catch(() => false)) ?? false;
  }

  private becomes(role: 'leader' | 'standby', epoch: number): void {
    if (this.role !== role) {
      // While refused, each check takes the lease and gives it up: the refusal's own line says what matters.
      const log = this.refusal
        ? this.deps.logger.debug.bind(this.deps.logger)
        : this.deps.logger.info.bind(this.deps.logger);
      log({ role, epoch }, role === 'leader' ? 'leading' : 'standing by');
    }
    this.role = role;
    this.deps.metrics.setLeadership(role, epoch);
  }

  private async pause(ms: number): Promise<void> {
    try {
      await (this.deps.sleep ?? realSleep)(ms, this.stopController.signal);
    } catch {
      // Stop requested: the loop condition ends the loop.
    }
  }
}
