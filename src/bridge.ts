import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Lease } from './lease.js';
import type { BridgeMetrics } from './metrics.js';
import type { Poller, SweepRun } from './poller.js';
import { FencedError, type SnapshotStore } from './snapshot/store.js';

// The long-running loop of one replica: lead or stand by, run the initial load, then incremental polls on their
// interval with the reconciliation sweep advancing a page at a time in between (so the sweep always yields the
// upstream's rate budget to polls). Any failure abandons the pass without committing it and retries with backoff.

/** Timing of the loop. */
export interface BridgeTiming {
  pollIntervalMs: number;
  /** 0 disables scheduled sweeps (on-demand ones still run). */
  sweepIntervalMs: number;
  leaseTtlMs: number;
  /** Upper bound of the backoff after a failed pass. */
  maxBackoffMs?: number;
}

/** What the loop drives. */
export interface BridgeDeps {
  poller: Poller;
  store: SnapshotStore;
  lease: Lease;
  metrics: BridgeMetrics;
  logger: Logger;
  timing: BridgeTiming;
  clock?: () => number;
}

/** Liveness as the ops server reports it. */
export interface BridgeHealth {
  ok: boolean;
  role: 'leader' | 'standby' | 'starting';
  lastTickAgeSeconds: number;
  lastError: string | null;
}

/** One replica's poll loop. */
export class Bridge {
  private readonly stopController = new AbortController();
  private workController = new AbortController();
  private running: Promise<void> | null = null;
  private sweep: SweepRun | null = null;
  private sweepStartedAt = 0;
  private nextPollAt = 0;
  private initialDone = false;
  private failures = 0;
  private lastTick: number;
  private lastError: string | null = null;
  private role: BridgeHealth['role'] = 'starting';
  private renewTimer: NodeJS.Timeout | null = null;
  private readonly clock: () => number;

  constructor(private readonly deps: BridgeDeps) {
    this.clock = deps.clock ?? Date.now;
    this.lastTick = this.clock();
  }

  /** Starts the loop in the background. */
  start(): void {
    if (this.running) return;
    this.renewTimer = setInterval(() => void this.renewLease(), Math.max(200, this.deps.timing.leaseTtlMs / 3));
    this.running = this.loop().finally(() => {
      if (this.renewTimer) clearInterval(this.renewTimer);
    });
  }

  /** Stops polling, abandons the upstream request in flight, lets a publish/commit in flight finish. */
  async stop(): Promise<void> {
    this.stopController.abort();
    this.workController.abort();
    await this.running;
    // The page in flight finishes (publish and commit) before the lease goes.
    await this.deps.poller.drain().catch((err: unknown) => this.deps.logger.warn({ err }, 'page in flight failed'));
    await this.deps.lease.release().catch((err: unknown) => this.deps.logger.warn({ err }, 'lease release failed'));
    this.deps.metrics.setLeadership('standby', 0);
  }

  /** Liveness: the loop has ticked recently (it ticks at least every poll interval and lease period). */
  health(): BridgeHealth {
    const { pollIntervalMs, leaseTtlMs } = this.deps.timing;
    const age = (this.clock() - this.lastTick) / 1000;
    const limit = (Math.max(pollIntervalMs, leaseTtlMs) * 4 + 120_000) / 1000;
    return { ok: age < limit, role: this.role, lastTickAgeSeconds: age, lastError: this.lastError };
  }

  private get stopping(): boolean {
    return this.stopController.signal.aborted;
  }

  private async renewLease(): Promise<void> {
    const before = this.deps.lease.current();
    try {
      const epoch = await this.deps.lease.renew();
      if (before > 0 && epoch !== before) {
        this.deps.logger.warn({ before, epoch }, 'lease lost; abandoning the pass in flight');
        this.workController.abort();
      }
    } catch (err) {
      if (before > 0 && this.deps.lease.current() === 0) {
        this.deps.logger.warn({ err }, 'lease could not be renewed in time; abandoning the pass in flight');
        this.workController.abort();
      }
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.lastTick = this.clock();
      let epoch = this.deps.lease.current();
      try {
        if (epoch === 0) epoch = await this.deps.lease.renew();
      } catch (err) {
        this.fail(err, 'lease');
        await this.pause(this.backoffMs());
        continue;
      }
      if (epoch === 0) {
        this.becomes('standby', 0);
        this.sweep = null;
        await this.pause(this.deps.timing.leaseTtlMs / 3);
        continue;
      }
      this.becomes('leader', epoch);
      if (this.workController.signal.aborted) this.workController = new AbortController();
      try {
        const waitMs = await this.work(epoch, this.workController.signal);
        this.failures = 0;
        if (waitMs > 0) await this.pause(waitMs);
      } catch (err) {
        this.sweep = null;
        if (this.stopping) break;
        this.fail(err, 'pass');
        await this.pause(this.backoffMs());
      }
    }
  }

  /** Does the next piece of work; resolves how long to wait before the next one. */
  private async work(epoch: number, signal: AbortSignal): Promise<number> {
    const { poller, store, metrics, timing, logger } = this.deps;
    const now = this.clock();

    // The checkpoint is read only between sweeps: while one runs, the loop already knows where it stands.
    if (!this.sweep) {
      const ckpt = await poller.checkpoint();
      this.initialDone = ckpt.initialDone;
      const requested = ckpt.initialDone ? await store.takeSweepRequest() : false;
      const due =
        timing.sweepIntervalMs > 0 && ckpt.lastSweepAt !== null && now - ckpt.lastSweepAt >= timing.sweepIntervalMs;
      if (!ckpt.initialDone || ckpt.sweep !== null || requested || due) {
        this.sweep = await poller.openSweep(epoch, signal);
        this.sweepStartedAt = now;
        logger.info({ kind: this.sweep.kind, requested, due }, 'sweep started');
      }
    }

    // Incremental polls need the watermark the initial load leaves; after that they come first.
    if (this.initialDone && now >= this.nextPollAt) {
      this.nextPollAt = now + timing.pollIntervalMs;
      const t0 = this.clock();
      try {
        const summary = await poller.incremental(epoch, signal);
        metrics.passFinished('incremental', 'ok', (this.clock() - t0) / 1000);
        if (summary.events > 0) logger.info({ pass: 'incremental', ...summary }, 'poll committed');
      } catch (err) {
        metrics.passFinished('incremental', signal.aborted ? 'aborted' : 'error', (this.clock() - t0) / 1000);
        throw err;
      }
      return 0;
    }

    if (this.sweep) {
      const sweep = this.sweep;
      let more: boolean;
      try {
        more = await sweep.step();
      } catch (err) {
        metrics.passFinished(
          sweep.kind,
          signal.aborted ? 'aborted' : 'error',
          (this.clock() - this.sweepStartedAt) / 1000,
        );
        throw err;
      }
      if (!more) {
        this.sweep = null;
        metrics.passFinished(sweep.kind, 'ok', (this.clock() - this.sweepStartedAt) / 1000);
        logger.info({ kind: sweep.kind, ...sweep.summary }, 'sweep completed');
        if (sweep.kind === 'initial') {
          this.initialDone = true;
          this.nextPollAt = 0;
        }
      }
      return 0;
    }
    return Math.max(0, Math.min(this.nextPollAt - this.clock(), timing.leaseTtlMs / 3));
  }

  private becomes(role: 'leader' | 'standby', epoch: number): void {
    if (this.role !== role) this.deps.logger.info({ role, epoch }, role === 'leader' ? 'leading' : 'standing by');
    this.role = role;
    this.deps.metrics.setLeadership(role, epoch);
  }

  private fail(err: unknown, where: string): void {
    this.failures += 1;
    const fenced = err instanceof FencedError;
    this.lastError = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.deps.logger.error(
      { err, where, failures: this.failures, fenced },
      fenced ? 'another replica took over; commit refused' : 'pass failed; nothing committed past the last page',
    );
  }

  private backoffMs(): number {
    const cap = this.deps.timing.maxBackoffMs ?? 30_000;
    const exp = Math.min(cap, 500 * 2 ** Math.min(this.failures, 10));
    return exp / 2 + Math.random() * (exp / 2);
  }

  private async pause(ms: number): Promise<void> {
    try {
      await sleep(ms, undefined, { signal: this.stopController.signal });
    } catch {
      // Stop requested: the loop condition ends the loop.
    }
  }
}
