import { EMPTY_CHECKPOINT } from '../../../src/core/checkpoint.js';
import { describe, expect, it } from 'vitest';
import { errorKind } from '../../../src/ops/logger.js';
import { BridgeLoop } from '../../../src/bridge/loop.js';
import type { LongPassRun, PassRunner } from '../../../src/bridge/passes/index.js';
import type { PassSummary } from '../../../src/bridge/pipeline.js';
import type { Checkpoint } from '../../../src/redis/snapshot-store.js';
import { UpstreamError } from '../../../src/upstream/errors.js';
import {
  ConfigError,
  CommitOutcomeUnknownError,
  FencedError,
  ReplicationError,
  SnapshotLostError,
} from '../../../src/core/errors.js';
import { newResyncRequest, type ResyncRequest } from '../../../src/core/resync-request.js';
import { FakeLease, silentLogger, testMetrics, FakeTime } from '../../helpers/fakes.js';
import { until } from '../../helpers/wait.js';

// The loop on fakes: what it runs, in which order, and what it does on failure and stop. Short real intervals keep
// these fast; the decisions under test depend on order, not on timing.

const summary = (): PassSummary => ({ pages: 0, reviews: 0, events: 0, deadLetters: 0 });

class ScriptedPasses implements PassRunner {
  readonly calls: string[] = [];
  ckpt: Checkpoint = { ...EMPTY_CHECKPOINT, watermark: 1, initialDone: true, lastSweepAt: 0 };
  sweepRequested = false;
  scanPages = 3;
  failScanAt: number | null = null;
  failPoll = false;
  /** Errors the next polls throw, one each (then polls succeed). */
  pollErrors: unknown[] = [];
  closed = 0;
  /** The fake time of the last close (with `time`). */
  closedAt = 0;
  settled = 0;

  async checkpoint(): Promise<Checkpoint> {
    return { ...this.ckpt };
  }

  prepared: number[] = [];
  /** The prepares that restore from the changelog's beginning. */
  preparedInFull: number[] = [];
  /** Whether an initial load's first page has set a watermark (polls then run alongside it). */
  loadPollable = false;
  restoreRequested = false;

  async prepare(epoch: number, _signal?: AbortSignal, force = false): Promise<boolean> {
    this.prepared.push(epoch);
    if (force) this.preparedInFull.push(epoch);
    return true;
  }

  async takeRestoreRequest(): Promise<boolean> {
    const r = this.restoreRequested;
    this.restoreRequested = false;
    return r;
  }

  async takeSweepRequest(): Promise<boolean> {
    const r = this.sweepRequested;
    this.sweepRequested = false;
    return r;
  }

  /** Fake time the passes spend (with `time`): per page of a long pass, per poll. */
  stepCostMs = 0;
  pollCostMs = 0;
  time: { now: number } | null = null;
  readonly pollTimes: number[] = [];

  async incremental(): Promise<PassSummary> {
    if (this.time) {
      this.pollTimes.push(this.time.now);
      this.time.now += this.pollCostMs;
    }
    await new Promise((r) => setImmediate(r));
    this.calls.push('poll');
    if (this.failPoll) throw new UpstreamError('server', 'upstream answered 500 with secret=hunter2');
    const scripted = this.pollErrors.shift();
    if (scripted !== undefined) throw scripted;
    return summary();
  }

  async openFullScan(): Promise<LongPassRun> {
    const type = this.ckpt.initialDone ? 'sweep' : 'initial';
    this.calls.push(`open ${type}`);
    // Like the real store, an open scan is in the checkpoint until it completes, so a retry resumes it.
    this.ckpt = { ...this.ckpt, sweep: { kind: type, cursor: null, startedAt: 0, seen: 0 } };
    return this.scripted(type, 'step', this.scanPages, () => {
      this.ckpt = { ...this.ckpt, initialDone: true, lastSweepAt: Date.now(), sweep: null };
    });
  }

  /** A long pass of `pages` pages that logs each step as `<label> <page>` and fails once at `failScanAt`. */
  private scripted(type: LongPassRun['type'], label: string, pages: number, onDone: () => void): LongPassRun {
    let page = 0;
    return {
      type,
      summary: summary(),
      pollable: type !== 'initial' || this.loadPollable,
      step: async () => {
        // A real page involves I/O; yielding here keeps the test's timers running.
        await new Promise((r) => setImmediate(r));
        if (this.time) this.time.now += this.stepCostMs;
        page += 1;
        if (page === this.failScanAt) {
          this.failScanAt = null;
          this.calls.push(`${label} ${page} fails`);
          throw new Error(`${type} page failed`);
        }
        if (page > pages) {
          this.calls.push(`${type} done`);
          onDone();
          return false;
        }
        this.calls.push(`${label} ${page}`);
        return true;
      },
      close: async () => {
        this.closed += 1;
        if (this.time) this.closedAt = this.time.now;
      },
    };
  }

  async settle(): Promise<void> {
    this.settled += 1;
  }

  pausedAt: number | null = null;
  resyncs: ResyncRequest[] = [];
  resyncPages = 2;
  requeued: ResyncRequest[] = [];

  async takeResync(): Promise<ResyncRequest | null> {
    return this.resyncs.shift() ?? null;
  }

  async requeueResync(request: ResyncRequest): Promise<void> {
    this.requeued.push(request);
  }

  async openResync(_epoch: number, _signal: AbortSignal, request: ResyncRequest): Promise<LongPassRun> {
    this.calls.push(`open resync ${request.id}`);
    return this.scripted('resync', 'resync', this.resyncPages, () => undefined);
  }

  heartbeats: { epoch: number; paused: boolean }[] = [];

  async pausedSince(): Promise<number | null> {
    return this.pausedAt;
  }

  async heartbeat(epoch: number, paused: boolean): Promise<void> {
    this.heartbeats.push({ epoch, paused });
  }
}

function loopOn(
  passes: ScriptedPasses,
  lease = new FakeLease(),
  pollIntervalMs = 10_000,
  heartbeatIntervalMs?: number,
  time?: FakeTime,
) {
  const metrics = testMetrics();
  const loop = new BridgeLoop({
    passes,
    lease,
    metrics,
    logger: silentLogger,
    clock: time?.clock,
    sleep: time?.sleep,
    timing: {
      pollIntervalMs,
      heartbeatIntervalMs,
      sweepIntervalMs: 0,
      leaseTtlMs: 600,
      maxBackoffMs: 20,
    },
  });
  return { loop, lease, metrics };
}

/** A clock that only moves when the loop sleeps or a fake pass does work. */

describe('BridgeLoop', () => {
  it('runs the initial load to its end before the first poll, then polls', async () => {
    const passes = new ScriptedPasses();
    passes.ckpt = { ...passes.ckpt, initialDone: false, watermark: null, lastSweepAt: null };
    const { loop } = loopOn(passes);
    loop.start();
    await until(() => passes.calls.includes('poll'));
    await loop.stop();
    expect(passes.calls.slice(0, 6)).toEqual(['open initial', 'step 1', 'step 2', 'step 3', 'initial done', 'poll']);
  });

  // The cadence on a fake clock: pages of a long pass take 150 ms, a poll 50 ms, the interval is 1 s. Whatever runs,
  // each poll starts within one page of its due time, and the long pass goes on in between.
  for (const phase of ['idle', 'sweep', 'resync', 'initial load'] as const) {
    it(`keeps the poll interval while ${phase === 'idle' ? 'nothing else' : `a ${phase}`} runs (fake clock)`, async () => {
      const time = new FakeTime();
      const passes = new ScriptedPasses();
      passes.scanPages = 1_000_000;
      passes.resyncPages = 1_000_000;
      passes.stepCostMs = 150;
      passes.pollCostMs = 50;
      passes.time = time;
      if (phase === 'sweep') passes.sweepRequested = true;
      if (phase === 'resync') passes.resyncs.push(newResyncRequest({ kind: 'all' }, 0));
      if (phase === 'initial load') {
        passes.ckpt = { ...passes.ckpt, initialDone: false, lastSweepAt: null };
        passes.loadPollable = true;
      }
      const { loop } = loopOn(passes, new FakeLease(), 1_000, undefined, time);
      loop.start();
      await until(() => passes.pollTimes.length >= 12);
      await loop.stop();
      const gaps = passes.pollTimes.slice(1).map((t, i) => t - passes.pollTimes[i]!);
      for (const gap of gaps) {
        expect(gap).toBeGreaterThanOrEqual(1_000);
        expect(gap).toBeLessThanOrEqual(1_000 + 150);
      }
      const steps = passes.calls.filter((c) => c.startsWith('step') || c.startsWith('resync ')).length;
      if (phase === 'idle') expect(steps).toBe(0);
      else expect(steps).toBeGreaterThan(40);
    });
  }

  it('advances a sweep a page between polls that take longer than their interval (fake clock)', async () => {
    // Polls of 1.5 s every 1 s are due again as soon as they end: first-come, the sweep never got a page.
    const time = new FakeTime();
    const passes = new ScriptedPasses();
    passes.sweepRequested = true;
    passes.scanPages = 1_000_000;
    passes.stepCostMs = 150;
    passes.pollCostMs = 1_500;
    passes.time = time;
    const { loop } = loopOn(passes, new FakeLease(), 1_000, undefined, time);
    loop.start();
    await until(() => passes.pollTimes.length >= 12);
    await loop.stop();
    const afterFirstPoll = passes.calls.slice(passes.calls.indexOf('poll'));
    // Poll and page alternate: each poll waits one page at most.
    expect(afterFirstPoll.slice(0, 8)).toEqual([
      'poll',
      'step 1',
      'poll',
      'step 2',
      'poll',
      'step 3',
      'poll',
      'step 4',
    ]);
    const gaps = passes.pollTimes.slice(1).map((t, i) => t - passes.pollTimes[i]!);
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(1_500 + 150);
  });

  it('lets a due poll cut in between the pages of a sweep', async () => {
    const passes = new ScriptedPasses();
    passes.sweepRequested = true;
    passes.scanPages = 50;
    const { loop } = loopOn(passes, new FakeLease(), 1);
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 3);
    await loop.stop();
    const first = passes.calls.indexOf('open sweep');
    // After the sweep opened, polls are interleaved with its steps rather than waiting for its end.
    const afterOpen = passes.calls.slice(first);
    expect(afterOpen.indexOf('poll')).toBeLessThan(
      afterOpen.indexOf('sweep done') === -1 ? Infinity : afterOpen.indexOf('sweep done'),
    );
    expect(afterOpen.filter((c) => c.startsWith('step')).length).toBeGreaterThan(0);
  });

  it('counts a failed sweep page as a failed sweep, closes its iterator and resumes it', async () => {
    const passes = new ScriptedPasses();
    passes.sweepRequested = true;
    passes.failScanAt = 2;
    const { loop, metrics } = loopOn(passes);
    loop.start();
    await until(() => passes.calls.includes('sweep done'));
    await loop.stop();
    expect(passes.closed).toBeGreaterThanOrEqual(1);
    expect(passes.calls.filter((c) => c === 'open sweep')).toHaveLength(2);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/reviews_bridge_passes_total\{[^}]*pass="sweep"[^}]*outcome="error"[^}]*\} 1/);
    expect(text).toMatch(/reviews_bridge_passes_total\{[^}]*pass="incremental"[^}]*outcome="error"[^}]*\} 0/);
  });

  it('reports the kind of the last failure in health, never its message', async () => {
    const passes = new ScriptedPasses();
    passes.failPoll = true;
    const { loop } = loopOn(passes);
    loop.start();
    await until(() => loop.health().lastError !== null);
    await loop.stop();
    expect(loop.health().lastError).toBe('upstream:server');
    expect(JSON.stringify(loop.health())).not.toContain('hunter2');
  });

  it('stands by without running a pass while another replica leads, and leads once the lease is free', async () => {
    const passes = new ScriptedPasses();
    const lease = new FakeLease();
    lease.leading = false;
    const time = new FakeTime();
    const { loop } = loopOn(passes, lease, 10_000, undefined, time);
    loop.start();
    await until(() => loop.health().role === 'standby');
    // Three standby periods on the fake clock: the loop looked at the lease three more times and ran nothing.
    const sleeps = time.sleeps;
    await until(() => time.sleeps >= sleeps + 3);
    expect(passes.calls).toEqual([]);
    lease.leading = true;
    await until(() => passes.calls.includes('poll'));
    expect(loop.health().role).toBe('leader');
    await loop.stop();
  });

  it("waits between the lease keeper's renewals on leaseSleep, not on real time (a simulated clock drives them)", async () => {
    const passes = new ScriptedPasses();
    const lease = new FakeLease();
    const keeperWaits: number[] = [];
    const loop = new BridgeLoop({
      passes,
      lease,
      metrics: testMetrics(),
      logger: silentLogger,
      // A lease period of 200 s: on real time the keeper would renew once in this test, on leaseSleep at every wait.
      timing: { pollIntervalMs: 10_000, sweepIntervalMs: 0, leaseTtlMs: 600_000 },
      leaseSleep: async (ms) => {
        keeperWaits.push(ms);
        await new Promise((r) => setImmediate(r));
      },
    });
    loop.start();
    await until(() => keeperWaits.length >= 3);
    await loop.stop();
    expect(keeperWaits.slice(0, 3)).toEqual([200_000, 200_000, 200_000]);
    expect(lease.renewals).toBeGreaterThanOrEqual(3);
  });

  it('on stop lets the page in flight finish, closes the sweep, then releases the lease', async () => {
    const passes = new ScriptedPasses();
    passes.sweepRequested = true;
    passes.scanPages = 1_000_000;
    const { loop, lease } = loopOn(passes);
    loop.start();
    await until(() => passes.calls.includes('step 2'));
    await loop.stop();
    expect(passes.settled).toBe(1);
    expect(passes.closed).toBe(1);
    expect(lease.released).toBe(1);
  });
});

describe('BridgeLoop resync', () => {
  const request: ResyncRequest = { id: 'r1', requestedAt: 0, scope: { kind: 'all' } };

  it('runs a requested resync between polls and runs it again after a failed page', async () => {
    const passes = new ScriptedPasses();
    passes.resyncs.push(request);
    passes.failScanAt = 2;
    const { loop } = loopOn(passes);
    loop.start();
    await until(() => passes.calls.includes('resync done'));
    await loop.stop();
    expect(passes.calls.filter((c) => c === 'open resync r1')).toHaveLength(2);
    expect(passes.requeued).toEqual([]);
  });

  it('hands a resync it has not finished back when it stops leading', async () => {
    const passes = new ScriptedPasses();
    passes.resyncs.push(request);
    passes.resyncPages = 1_000_000;
    const lease = new FakeLease();
    const { loop } = loopOn(passes, lease);
    loop.start();
    await until(() => passes.calls.includes('resync 3'));
    lease.leading = false;
    await until(() => passes.requeued.length === 1);
    await loop.stop();
    expect(passes.requeued).toEqual([request]);
  });
});

describe('BridgeLoop pause and heartbeat', () => {
  it('makes no pass while paused (within a second of the flag) and goes on after resume', async () => {
    const passes = new ScriptedPasses();
    passes.sweepRequested = true;
    passes.scanPages = 1_000_000;
    const time = new FakeTime();
    // Each page takes 50 fake ms, so the fake clock moves while the sweep runs.
    passes.time = time;
    passes.stepCostMs = 50;
    const { loop, metrics } = loopOn(passes, new FakeLease(), 20, undefined, time);
    loop.start();
    await until(() => passes.calls.includes('step 3'));
    const pausedAt = time.now;
    passes.pausedAt = pausedAt;
    // The flag is read at most once a (fake) second: the sweep is closed once the loop has seen it.
    await until(() => passes.closed === 1);
    expect(passes.closedAt - pausedAt).toBeLessThanOrEqual(1_000 + 50);
    const atPause = passes.calls.length;
    // Two more fake seconds of paused looks: not one pass step.
    const since = time.now;
    await until(() => time.now >= since + 2_000);
    expect(passes.calls.length).toBe(atPause);
    expect(passes.closed).toBe(1);
    expect(await metrics.registry.metrics()).toMatch(/^reviews_bridge_paused\{[^}]*\} 1$/m);
    passes.pausedAt = null;
    await until(() => passes.calls.length > atPause + 2, 3_000);
    await loop.stop();
    // The sweep was reopened (it resumes from its checkpoint) after the pause.
    expect(passes.calls.filter((c) => c === 'open sweep').length).toBe(2);
  });

  it('publishes heartbeats on their interval while leading, paused or not', async () => {
    const passes = new ScriptedPasses();
    const lease = new FakeLease();
    lease.epoch = 4;
    const { loop } = loopOn(passes, lease, 20, 50);
    loop.start();
    await until(() => passes.heartbeats.length >= 3);
    passes.pausedAt = Date.now();
    await until(() => passes.heartbeats.some((h) => h.paused), 3_000);
    await loop.stop();
    expect(passes.heartbeats[0]).toEqual({ epoch: 4, paused: false });
  });
});

describe('errorKind', () => {
  it('names the class or the upstream kind, not the text', () => {
    expect(errorKind(new UpstreamError('auth', 'token refused for client secret s3cr3t'))).toBe('upstream:auth');
    expect(errorKind(new RangeError('value 1125899906842624 out of range'))).toBe('RangeError');
    expect(errorKind('a string')).toBe('string');
  });
});

describe('BridgeLoop recovery, by error kind (the schedule decides; no adapter class is involved)', () => {
  /**
   * A loop whose polls fail with `errors` first, on a fake clock, with the real backoff. The poll interval is 1 ms so
   * that each retry finds a poll due: a step that succeeds (a wait included) ends a run of failures.
   */
  function failing(errors: unknown[]) {
    const passes = new ScriptedPasses();
    passes.pollErrors = [...errors];
    const time = new FakeTime();
    const lease = new FakeLease();
    const loop = new BridgeLoop({
      passes,
      lease,
      metrics: testMetrics(),
      logger: silentLogger,
      clock: time.clock,
      sleep: time.sleep,
      random: () => 0,
      timing: { pollIntervalMs: 1, sweepIntervalMs: 0, leaseTtlMs: 600_000 },
    });
    return { passes, time, loop, lease };
  }
  const waits = (time: FakeTime, n: number) => time.slept.slice(0, n);

  it('backs a failing pass off 0.5 s, 1 s, 2 s, 4 s (equal jitter drawn at 0), then polls on its interval again', async () => {
    const { passes, time, loop } = failing([1, 2, 3, 4].map(() => new Error('boom')));
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 6);
    await loop.stop();
    expect(waits(time, 5)).toEqual([500, 1_000, 2_000, 4_000, 1]);
    // The passes after the failures worked: /healthz no longer shows a failure that is over (issue 50).
    expect(loop.health().lastError).toBeNull();
  });

  it('retries a write no replica acknowledged at a short flat pace, however often it fails', async () => {
    const { passes, time, loop } = failing([1, 2, 3, 4, 5, 6].map(() => new ReplicationError(1, 0, 100)));
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 7);
    await loop.stop();
    expect(waits(time, 6)).toEqual([125, 250, 500, 500, 500, 500]);
    // The passes after the failures worked: /healthz no longer shows a failure that is over (issue 50).
    expect(loop.health().lastError).toBeNull();
  });

  it('after lost keys, takes the lease anew and prepares the leadership again before the next pass', async () => {
    const { passes, time, loop } = failing([new SnapshotLostError('LOST: the account keys are gone')]);
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 2);
    await loop.stop();
    expect(passes.prepared).toHaveLength(2);
    // Every key gone with the epoch: the restore decides its kind itself (the checkpoint is gone too, or not).
    expect(passes.preparedInFull).toEqual([]);
    expect(time.slept[0]).toBe(100);
  });

  it('after some keys were lost and others not, restores from the changelog’s beginning, once', async () => {
    const lost = new SnapshotLostError('LOST-PART: snapshot bucket 3 of the account vanished from Redis', true);
    const { passes, loop } = failing([lost]);
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 2);
    await loop.stop();
    expect(passes.prepared).toHaveLength(2);
    expect(passes.preparedInFull).toHaveLength(1);
    expect(passes.preparedInFull[0]).toBe(passes.prepared[1]);
  });

  it('after a commit of unknown outcome, backs off and prepares the leadership again before the next pass', async () => {
    const { passes, time, loop } = failing([new CommitOutcomeUnknownError('no answer to EndTxn')]);
    loop.start();
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 2);
    await loop.stop();
    expect(passes.prepared).toHaveLength(2);
    expect(time.slept[0]).toBe(500);
    // The passes after the failures worked: /healthz no longer shows a failure that is over (issue 50).
    expect(loop.health().lastError).toBeNull();
  });

  it('after a fenced commit gives the lease up (Kafka alone may have fenced it) and prepares anew when it leads again', async () => {
    // Kafka fenced the producer (another one took the transactional id) while Redis still says this replica leads:
    // keeping the lease would fail every commit for ever, with no other replica allowed to take over.
    const { passes, time, loop, lease } = failing([new FencedError('the Kafka transactional id was taken')]);
    loop.start();
    await until(() => lease.released === 1);
    expect(passes.calls.filter((c) => c === 'poll')).toHaveLength(1);
    lease.leading = true;
    lease.epoch = 2;
    await until(() => passes.calls.filter((c) => c === 'poll').length >= 2);
    await loop.stop();
    expect(passes.prepared).toEqual([1, 2]);
    expect(time.slept[0]).toBe(500);
  });

  it('gives a refused leadership up, says why in health and a metric, and checks again after the backoff', async () => {
    // A refusal (another installation's state or topics) before the leadership acted on Kafka: kept, the lease
    // would keep every other replica out while /readyz said ready (issue 46, item 6).
    class RefusingPasses extends ScriptedPasses {
      refusing = true;
      override async prepare(epoch: number, signal?: AbortSignal, force = false): Promise<boolean> {
        if (this.refusing) throw new ConfigError('BRIDGE_DEPLOYMENT_ID', 'deployment d1 already runs account a');
        return super.prepare(epoch, signal, force);
      }
    }
    const passes = new RefusingPasses();
    const time = new FakeTime();
    const { loop, lease, metrics } = loopOn(passes, new FakeLease(), 10_000, undefined, time);
    const refusedGauge = async () =>
      (await metrics.registry.getSingleMetric('reviews_bridge_leadership_refused')!.get()).values.map((v) => ({
        setting: v.labels.setting,
        value: v.value,
      }));
    loop.start();
    await until(() => lease.released === 1);
    const refused = loop.health().refused;
    expect(refused?.setting).toBe('BRIDGE_DEPLOYMENT_ID');
    expect(refused?.reason).toContain('deployment d1 already runs account a');
    expect(loop.health().role).toBe('standby');
    expect(await refusedGauge()).toEqual([{ setting: 'BRIDGE_DEPLOYMENT_ID', value: 1 }]);
    expect(passes.calls).toEqual([]);
    // Checked again once the lease is free again: still refused, the lease given up once more, no pass ran.
    lease.leading = true;
    await until(() => lease.released === 2);
    expect(passes.calls).toEqual([]);
    expect(loop.health().refused?.since).toBe(refused?.since);
    // The cause removed: the next check readies the leadership, the refusal is gone, passes run.
    passes.refusing = false;
    lease.leading = true;
    await until(() => passes.calls.includes('poll'));
    expect(loop.health().refused).toBeNull();
    expect(loop.health().role).toBe('leader');
    expect(await refusedGauge()).toEqual([]);
    await loop.stop();
  });

  it('keeps its liveness through a long restore that reads on, and loses it when the restore stops going forward', async () => {
    // A restore longer than the liveness window failed /healthz, the probe restarted the pod, and the restore began
    // again (issue 46, item 6): liveness follows the restore's progress, not the loop's turns.
    class RestoringPasses extends ScriptedPasses {
      health: boolean[] = [];
      constructor(
        private readonly clock: FakeTime,
        private readonly progress: boolean,
        private readonly read: () => boolean,
      ) {
        super();
      }
      override async prepare(epoch: number, signal?: AbortSignal, force = false, alive?: () => void) {
        // Ten minutes of restore, a batch every 30 s (the liveness window is 160 s here).
        for (let i = 0; i < 20; i++) {
          this.clock.now += 30_000;
          if (this.progress) alive?.();
          this.health.push(this.read());
        }
        return super.prepare(epoch, signal, force);
      }
    }
    for (const progress of [true, false]) {
      const time = new FakeTime();
      const ref: { loop?: BridgeLoop } = {};
      const passes = new RestoringPasses(time, progress, () => ref.loop!.health().ok);
      const { loop } = loopOn(passes, new FakeLease(), 10_000, undefined, time);
      ref.loop = loop;
      loop.start();
      await until(() => passes.prepared.length === 1);
      await loop.stop();
      if (progress) expect(passes.health.every((ok) => ok)).toBe(true);
      else expect(passes.health.at(-1)).toBe(false);
    }
  });
});
