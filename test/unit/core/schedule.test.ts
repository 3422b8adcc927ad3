import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ErrorKind } from '../../../src/core/errors.js';
import {
  NO_FAILURE,
  PAUSE_CHECK_MS,
  failed,
  heartbeatDue,
  nextStep,
  pauseCheckDue,
  pausedWaitMs,
  recovery,
  scanToOpen,
  standbyWaitMs,
  sweepDue,
  type FailureRun,
  type ScheduleTiming,
  type StepState,
} from '../../../src/core/schedule.js';

// The loop's decisions on a fake clock: plain numbers for time, no timers, no loop. Table tests pin each rule;
// the properties drive the decisions through simulated runs (pages and polls of random cost) and check that polls
// are never starved, that a long pass always advances, and that backoff grows, caps and resets.

const timing: ScheduleTiming = { pollIntervalMs: 1_000, sweepIntervalMs: 60_000, leaseTtlMs: 15_000 };
const sweep = { type: 'sweep' as const, pollable: true };
const load = { type: 'initial' as const, pollable: false };

describe('nextStep', () => {
  const cases: Array<[string, StepState, number, ReturnType<typeof nextStep>]> = [
    ['a due poll', { longPass: null, initialDone: true, nextPollAt: 0 }, 5, { kind: 'poll', nextPollAt: 1_005 }],
    [
      'a due poll before a sweep page',
      { longPass: sweep, initialDone: true, nextPollAt: 5 },
      5,
      { kind: 'poll', nextPollAt: 1_005 },
    ],
    [
      'a sweep page while no poll is due',
      { longPass: sweep, initialDone: true, nextPollAt: 6 },
      5,
      { kind: 'scan-page' },
    ],
    [
      'a load page: no poll before the load set a watermark',
      { longPass: load, initialDone: false, nextPollAt: 0 },
      5,
      { kind: 'scan-page' },
    ],
    [
      'a poll beside a load that set its watermark',
      { longPass: { ...load, pollable: true }, initialDone: false, nextPollAt: 0 },
      5,
      { kind: 'poll', nextPollAt: 1_005 },
    ],
    [
      'a resync page',
      { longPass: { type: 'resync', pollable: true }, initialDone: true, nextPollAt: 900 },
      5,
      { kind: 'scan-page' },
    ],
    [
      'a deletion step before a sweep page',
      { longPass: sweep, initialDone: true, nextPollAt: 900, deletionStepPending: true },
      5,
      { kind: 'deletion-step' },
    ],
    [
      'a due poll before a deletion step',
      { longPass: null, initialDone: true, nextPollAt: 5, deletionStepPending: true },
      5,
      { kind: 'poll', nextPollAt: 1_005 },
    ],
    // Polls longer than their interval (1 s): the last one ended at 2.9 s, the next is due at once.
    [
      'a sweep page ahead of a due poll once it waited a whole interval, through the last poll',
      { longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 2_000, polledAt: 2_900 },
      3_000,
      { kind: 'scan-page' },
    ],
    [
      'a due poll first while the sweep advanced within the interval',
      { longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 2_001, polledAt: 2_900 },
      3_000,
      { kind: 'poll', nextPollAt: 4_000 },
    ],
    [
      'a starved sweep page too after a trailing page went ahead, before the poll',
      {
        ...{ longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 0, polledAt: 2_900 },
        ...{ trailingOpen: true, trailingStepAt: 2_950 },
      },
      3_000,
      { kind: 'scan-page' },
    ],
    [
      'a due poll once the trailing read and the sweep each took a step since the last poll, however long',
      {
        ...{ longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 2_000, polledAt: 500 },
        ...{ trailingOpen: true, trailingStepAt: 1_600 },
      },
      3_000,
      { kind: 'poll', nextPollAt: 4_000 },
    ],
    [
      'a due poll after a trailing step that found no read to open (it waits from that step)',
      {
        ...{ longPass: null, initialDone: true, nextPollAt: 3_000, polledAt: 2_900 },
        ...{ trailingDueAt: 1_000, trailingStepAt: 2_500 },
      },
      3_000,
      { kind: 'poll', nextPollAt: 4_000 },
    ],
    [
      'the sweep ahead of a trailing read that waited less',
      {
        ...{ longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 500, polledAt: 2_900 },
        ...{ trailingOpen: true, trailingStepAt: 1_000 },
      },
      3_000,
      { kind: 'scan-page' },
    ],
    [
      'a trailing read ahead of a sweep that waited less',
      {
        ...{ longPass: sweep, initialDone: true, nextPollAt: 3_000, longPassStepAt: 1_500, polledAt: 2_900 },
        ...{ trailingDueAt: 1_000, trailingStepAt: 0 },
      },
      3_000,
      { kind: 'trailing-page' },
    ],
    [
      'a due poll before a trailing read due for less than an interval',
      {
        ...{ longPass: null, initialDone: true, nextPollAt: 3_000, polledAt: 2_900 },
        ...{ trailingDueAt: 2_500, trailingStepAt: 0 },
      },
      3_000,
      { kind: 'poll', nextPollAt: 4_000 },
    ],
    [
      'a wait until the next poll',
      { longPass: null, initialDone: true, nextPollAt: 800 },
      300,
      { kind: 'wait', ms: 500 },
    ],
    [
      'a wait of at most a lease period',
      { longPass: null, initialDone: true, nextPollAt: 60_000 },
      0,
      { kind: 'wait', ms: 5_000 },
    ],
  ];
  it.each(cases)('%s', (_, state, now, step) => {
    expect(nextStep(state, now, timing)).toEqual(step);
  });
});

describe('scanToOpen', () => {
  const ckpt = { initialDone: true, scanInProgress: false, lastSweepAt: 0 };
  const cases: Array<[string, Parameters<typeof scanToOpen>[0], boolean, number, ScheduleTiming, string | null]> = [
    [
      'the initial load until it is done',
      { ...ckpt, initialDone: false, lastSweepAt: null },
      false,
      0,
      timing,
      'initial',
    ],
    ['a scan the checkpoint has under way', { ...ckpt, scanInProgress: true }, false, 1, timing, 'resume'],
    ['an operator request', ckpt, true, 1, timing, 'requested'],
    ['a request even with scheduled sweeps off', ckpt, true, 1, { ...timing, sweepIntervalMs: 0 }, 'requested'],
    ['a sweep whose interval elapsed', ckpt, false, 60_000, timing, 'due'],
    ['nothing before the interval', ckpt, false, 59_999, timing, null],
    ['nothing when scheduled sweeps are off', ckpt, false, 10 ** 9, { ...timing, sweepIntervalMs: 0 }, null],
    ['nothing without a last sweep (the load sets it)', { ...ckpt, lastSweepAt: null }, false, 10 ** 9, timing, null],
  ];
  it.each(cases)('opens %s', (_, c, requested, now, t, reason) => {
    expect(scanToOpen(c, requested, now, t)).toBe(reason);
  });

  it('agrees with sweepDue whenever nothing else opens a scan', () => {
    fc.assert(
      fc.property(fc.nat(10 ** 7), fc.option(fc.nat(10 ** 7)), fc.nat(10 ** 6), (now, last, interval) => {
        const t = { ...timing, sweepIntervalMs: interval };
        const reason = scanToOpen({ initialDone: true, scanInProgress: false, lastSweepAt: last }, false, now, t);
        expect(reason === 'due').toBe(sweepDue(last, now, t));
      }),
    );
  });
});

describe('pause, standby and heartbeat', () => {
  it('reads the pause flag once a second, and a paused leader looks again within that', () => {
    expect(pauseCheckDue(-Infinity, 0)).toBe(true);
    expect(pauseCheckDue(1_000, 1_999)).toBe(false);
    expect(pauseCheckDue(1_000, 1_000 + PAUSE_CHECK_MS)).toBe(true);
    expect(pausedWaitMs(timing)).toBe(1_000);
    expect(pausedWaitMs({ ...timing, pollIntervalMs: 200 })).toBe(200);
  });

  it('a standby tries the lease three times per ttl', () => {
    expect(standbyWaitMs(timing)).toBe(5_000);
  });

  it('sends a heartbeat when due, one at a time, and none when they are off', () => {
    const on = { ...timing, heartbeatIntervalMs: 30_000 };
    expect(heartbeatDue(0, false, 0, on)).toBe(true);
    expect(heartbeatDue(30_000, false, 29_999, on)).toBe(false);
    expect(heartbeatDue(30_000, true, 30_000, on)).toBe(false);
    expect(heartbeatDue(0, false, 10 ** 9, timing)).toBe(false);
    expect(heartbeatDue(0, false, 10 ** 9, { ...timing, heartbeatIntervalMs: 0 })).toBe(false);
  });
});

/** Runs a leader's decisions on a fake clock: a long pass of `pages` pages and polls, each of the given costs. */
function simulate(opts: {
  interval: number;
  pages: number;
  pageCosts: number[];
  pollCosts: number[];
  scan: StepState['longPass'];
  steps: number;
  /** Trailing reads of `pages` pages due every `periodMs` (absent: none). */
  trailing?: { periodMs: number; pages: number };
}): {
  polls: Array<{ due: number; start: number; prevEnd: number }>;
  pagesDone: number;
  /** Pages of trailing reads read. */
  trailingPages: number;
  waitsWhileBusy: number;
  /** The longest time from a page's end to the next page's start. */
  longestPageGap: number;
} {
  const t = { ...timing, pollIntervalMs: opts.interval };
  // As the leader does (src/bridge/loop/leader-work.ts): the long pass's last step (or its opening) is tracked.
  const state: StepState = { longPass: opts.scan, initialDone: true, nextPollAt: 0, longPassStepAt: 0 };
  if (opts.trailing) state.trailingDueAt = 0;
  let trailingLeft = 0;
  let trailingPages = 0;
  let now = 0;
  let left = opts.pages;
  let pagesDone = 0;
  let waitsWhileBusy = 0;
  let longestPageGap = 0;
  let prevEnd = 0;
  let i = 0;
  const polls: Array<{ due: number; start: number; prevEnd: number }> = [];
  for (let n = 0; n < opts.steps; n++) {
    const step = nextStep(state, now, t);
    const cost = (costs: number[]) => costs[i++ % costs.length]!;
    if (step.kind === 'poll') {
      polls.push({ due: state.nextPollAt, start: now, prevEnd });
      state.nextPollAt = step.nextPollAt;
      now += cost(opts.pollCosts);
      prevEnd = state.polledAt = now;
    } else if (step.kind === 'scan-page') {
      longestPageGap = Math.max(longestPageGap, now - state.longPassStepAt!);
      now += cost(opts.pageCosts);
      state.longPassStepAt = now;
      pagesDone += 1;
      left -= 1;
      if (left === 0) state.longPass = null;
    } else if (step.kind === 'trailing-page') {
      if (!state.trailingOpen) {
        state.trailingOpen = true;
        trailingLeft = opts.trailing!.pages;
      }
      now += cost(opts.pageCosts);
      state.trailingStepAt = now;
      trailingPages += 1;
      trailingLeft -= 1;
      if (trailingLeft === 0) {
        state.trailingOpen = false;
        state.trailingDueAt = now + opts.trailing!.periodMs;
      }
    } else if (step.kind === 'wait') {
      if (state.longPass) waitsWhileBusy += 1;
      expect(step.ms).toBeGreaterThanOrEqual(0);
      expect(step.ms).toBeLessThanOrEqual(t.leaseTtlMs / 3);
      // A wait never sleeps past the next poll's due time.
      expect(now + step.ms).toBeLessThanOrEqual(Math.max(now, state.nextPollAt));
      now += step.ms;
    }
  }
  return { polls, pagesDone, trailingPages, waitsWhileBusy, longestPageGap };
}

describe('simulated runs', () => {
  const costs = fc.array(fc.integer({ min: 0, max: 3_000 }), { minLength: 1, maxLength: 20 });

  it('never starves polls: each starts within one page of its due time (or the end of the poll before)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 5_000 }),
        fc.integer({ min: 1, max: 200 }),
        costs,
        costs,
        fc.constantFrom<StepState['longPass']>(sweep, { type: 'resync', pollable: true }, null),
        (interval, pages, pageCosts, pollCosts, scan) => {
          const maxPage = Math.max(...pageCosts);
          const { polls } = simulate({ interval, pages, pageCosts, pollCosts, scan, steps: 400 });
          expect(polls.length).toBeGreaterThan(0);
          for (const p of polls) expect(p.start).toBeLessThanOrEqual(Math.max(p.due, p.prevEnd) + maxPage);
          // And no poll starts before it is due.
          for (const p of polls) expect(p.start).toBeGreaterThanOrEqual(p.due);
        },
      ),
    );
  });

  it('always advances a long pass: no wait while a scan is open, and every page is read', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 5_000 }),
        fc.integer({ min: 1, max: 100 }),
        costs,
        costs,
        (interval, pages, pageCosts, pollCosts) => {
          // Polls cheaper than the interval leave room for pages: at most one poll per page then.
          const cheapPolls = pollCosts.map((c) => c % interval);
          const run = simulate({
            interval,
            pages,
            pageCosts,
            pollCosts: cheapPolls,
            scan: sweep,
            steps: pages * 2 + 2,
          });
          expect(run.waitsWhileBusy).toBe(0);
          expect(run.pagesDone).toBe(pages);
        },
      ),
    );
  });

  it('advances a long pass while polls take longer than their interval: a page an interval and a poll at most', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 5_000 }),
        fc.integer({ min: 1, max: 100 }),
        costs,
        fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 20 }),
        (interval, pages, pageCosts, overruns) => {
          // Every poll overruns its interval (a burst of changes, a lookback over the whole listing): each one ends
          // after the next is due. First-come, the long pass never got a page.
          const slowPolls = overruns.map((o) => interval + o);
          const run = simulate({ interval, pages, pageCosts, pollCosts: slowPolls, scan: sweep, steps: pages * 2 + 2 });
          expect(run.pagesDone).toBe(pages);
          expect(run.longestPageGap).toBeLessThanOrEqual(interval + Math.max(...slowPolls));
          // The polls lose one page at most (the "never starves polls" property keeps holding with them).
          expect(run.polls.length).toBeGreaterThanOrEqual(pages);
        },
      ),
    );
  });

  it('with a trailing read always due too: both advance, and a poll waits at most a page of each', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 5_000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 50 }),
        costs,
        fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 20 }),
        (interval, pages, trailingPages, pageCosts, overruns) => {
          const slowPolls = overruns.map((o) => interval + o);
          const run = simulate({
            ...{ interval, pages, pageCosts, pollCosts: slowPolls, scan: sweep, steps: pages * 3 + 3 },
            trailing: { periodMs: 0, pages: trailingPages },
          });
          expect(run.pagesDone).toBe(pages);
          expect(run.trailingPages).toBeGreaterThanOrEqual(pages);
          const maxPage = Math.max(...pageCosts);
          for (const p of run.polls) expect(p.start).toBeLessThanOrEqual(Math.max(p.due, p.prevEnd) + 2 * maxPage);
        },
      ),
    );
  });

  it('polls on the interval when idle: starts exactly at their due times', () => {
    const { polls } = simulate({ interval: 1_000, pages: 0, pageCosts: [0], pollCosts: [120], scan: null, steps: 50 });
    expect(polls.map((p) => p.start)).toEqual(polls.map((_, i) => i * 1_000));
  });
});

describe('recovery after failures', () => {
  const kinds: Array<ErrorKind | 'other'> = ['other', 'server', 'network', 'fenced', 'throttled', 'auth'];
  const runOf = (kind: ErrorKind | 'other', count: number): FailureRun => {
    let run = NO_FAILURE;
    for (let i = 0; i < count; i++) run = failed(run, kind);
    return run;
  };

  it('backs off 1 s doubling to 30 s (equal jitter), for any kind outside the special ones', () => {
    const table: Array<[number, number, number]> = [
      [1, 500, 1_000],
      [2, 1_000, 2_000],
      [3, 2_000, 4_000],
      [5, 8_000, 16_000],
      [6, 15_000, 30_000],
      [40, 15_000, 30_000],
    ];
    for (const kind of kinds) {
      for (const [count, low, high] of table) {
        expect(recovery(runOf(kind, count), timing, 0)).toEqual({ kind: 'retry', ms: low });
        expect(recovery(runOf(kind, count), timing, 0.999_999).ms).toBe(high - 1);
      }
    }
  });

  it('grows with the failures, stays under the cap, and resets after a success', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...kinds),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        fc.integer({ min: 1_000, max: 120_000 }),
        (kind, count, random, maxBackoffMs) => {
          const t = { ...timing, maxBackoffMs };
          const now = recovery(runOf(kind, count), t, random).ms;
          const next = recovery(failed(runOf(kind, count), kind), t, random).ms;
          expect(next).toBeGreaterThanOrEqual(now);
          expect(next).toBeLessThan(maxBackoffMs);
          // A success resets the run: the next failure backs off like the first.
          expect(failed(NO_FAILURE, kind)).toEqual({ count: 1, kind });
          expect(recovery(failed(NO_FAILURE, kind), t, random).ms).toBeLessThan(1_000);
        },
      ),
    );
  });

  it('retries a write no replica acknowledged at a short flat pace, however long it lasts', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000 }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        (count, random) => {
          const r = recovery(runOf('replication', count), timing, random);
          expect(r.kind).toBe('retry');
          expect(r.ms).toBeGreaterThanOrEqual(125);
          expect(r.ms).toBeLessThan(1_000);
        },
      ),
    );
  });

  it('restores after lost keys, at once, whatever came before', () => {
    expect(recovery(failed(runOf('server', 7), 'snapshot_lost'), timing, 0.5)).toEqual({ kind: 'restore', ms: 100 });
  });

  it('readies the leadership again after a commit of unknown outcome, on the same backoff as other failures', () => {
    // The commit may have landed: the next pass must start from the changelog, but a Kafka that keeps timing out
    // must not be asked for a new producer session every 100 ms.
    for (const count of [1, 2, 5, 20]) {
      const unknown = recovery(runOf('commit_unknown', count), timing, 0.5);
      const other = recovery(runOf('server', count), timing, 0.5);
      expect(unknown).toEqual({ kind: 'restore', ms: other.ms });
    }
  });
});
