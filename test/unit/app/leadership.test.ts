import { pino } from 'pino';
import { until } from '../../helpers/wait.js';
import { describe, expect, it } from 'vitest';
import { connectGate } from '../../../src/app/account.js';
import { LazyPasses, StartSlots } from '../../../src/app/leadership.js';
import type { PassRunner } from '../../../src/bridge/passes/index.js';

const logger = pino({ level: 'silent' });

/** A PassRunner whose calls are recorded; only the methods these tests use answer. */
function fakePasses(log: string[], name: string): PassRunner {
  const record = (what: string) => log.push(`${name}.${what}`);
  return {
    prepare: async () => (record('prepare'), true),
    settle: async () => void record('settle'),
    pausedSince: async () => (record('pausedSince'), null),
  } as unknown as PassRunner;
}

describe('LazyPasses: what only a leader needs exists only while it leads', () => {
  it('builds and connects on first use, settles then closes on release, and builds anew for the next leadership', async () => {
    const log: string[] = [];
    let built = 0;
    const lazy = new LazyPasses(() => {
      const name = `p${++built}`;
      return {
        passes: fakePasses(log, name),
        connect: async () => void log.push(`${name}.connect`),
        close: async () => void log.push(`${name}.close`),
      };
    }, logger);
    // Standing by: nothing built, settle is a no-op.
    await lazy.settle();
    await lazy.release();
    expect(built).toBe(0);
    expect(lazy.current()).toBeNull();

    expect(await lazy.prepare(1, new AbortController().signal)).toBe(true);
    await lazy.pausedSince();
    expect(built).toBe(1);
    expect(lazy.current()).not.toBeNull();
    await lazy.release();
    expect(lazy.current()).toBeNull();
    await lazy.prepare(2, new AbortController().signal);
    expect(log).toEqual([
      'p1.connect',
      'p1.prepare',
      'p1.pausedSince',
      'p1.settle',
      'p1.close',
      'p2.connect',
      'p2.prepare',
    ]);
  });

  it('closes what a failed connection opened, keeps nothing and tries again on the next call', async () => {
    const log: string[] = [];
    let attempt = 0;
    const lazy = new LazyPasses(() => {
      const n = ++attempt;
      return {
        passes: fakePasses(log, `p${n}`),
        connect: async () => {
          log.push(`p${n}.connect`);
          if (n === 1) throw new Error('broker down');
        },
        close: async () => void log.push(`p${n}.close`),
      };
    }, logger);
    await expect(lazy.prepare(1, new AbortController().signal)).rejects.toThrow('broker down');
    expect(lazy.current()).toBeNull();
    await lazy.prepare(1, new AbortController().signal);
    expect(log).toEqual(['p1.connect', 'p1.close', 'p2.connect', 'p2.prepare']);
  });

  it('connects once for calls made while the first connection is under way', async () => {
    let connects = 0;
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const lazy = new LazyPasses(
      () => ({
        passes: fakePasses([], 'p'),
        connect: async () => {
          connects += 1;
          await opened;
        },
        close: async () => undefined,
      }),
      logger,
    );
    const calls = [lazy.pausedSince(), lazy.pausedSince()];
    open();
    await Promise.all(calls);
    expect(connects).toBe(1);
  });
});

describe('connectGate: accounts sharing topics do not race to create them', () => {
  it('runs the first connection of a topic set alone, the others after it succeeded, other sets at once', async () => {
    const gate = connectGate();
    const order: string[] = [];
    let finishFirst!: () => void;
    const firstDone = new Promise<void>((resolve) => (finishFirst = resolve));
    const first = gate('shared', async () => {
      order.push('first:start');
      await firstDone;
      order.push('first:end');
    });
    const second = gate('shared', async () => void order.push('second'));
    const other = gate('other', async () => void order.push('other'));
    await other;
    expect(order).toEqual(['first:start', 'other']);
    finishFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['first:start', 'other', 'first:end', 'second']);
  });

  it('lets the next connection create the topics when the first one failed', async () => {
    const gate = connectGate();
    await expect(gate('t', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    const order: string[] = [];
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const creator = gate('t', async () => {
      order.push('creator');
      await done;
    });
    const follower = gate('t', async () => void order.push('follower'));
    await Promise.resolve();
    expect(order).toEqual(['creator']);
    finish();
    await Promise.all([creator, follower]);
    expect(order).toEqual(['creator', 'follower']);
  });
});

describe('StartSlots: a replica that wins many leases starts their leaderships a few at a time', () => {
  /** A piece of work that runs until finish() is called, recording when it started. */
  function held(started: string[], name: string) {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    return { work: async () => (started.push(name), done), finish: () => finish() };
  }

  it('runs at most `limit` at once, the others in the order they came, each as soon as a slot frees', async () => {
    const slots = new StartSlots(2);
    const started: string[] = [];
    const works = ['a', 'b', 'c', 'd'].map((n) => held(started, n));
    const runs = works.map((w) => slots.run(w.work));
    await Promise.resolve();
    expect(started).toEqual(['a', 'b']);
    expect(slots.load()).toEqual({ active: 2, waiting: 2 });
    works[1]!.finish();
    await runs[1];
    await Promise.resolve();
    expect(started).toEqual(['a', 'b', 'c']);
    expect(slots.load()).toEqual({ active: 2, waiting: 1 });
    works[0]!.finish();
    works[2]!.finish();
    works[3]!.finish();
    await Promise.all(runs);
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    expect(slots.load()).toEqual({ active: 0, waiting: 0 });
  });

  it('frees the slot of a failed start, and drops a waiter whose signal aborts (its lease went) without running it', async () => {
    const slots = new StartSlots(1);
    const started: string[] = [];
    await expect(slots.run(() => Promise.reject(new Error('kafka down')))).rejects.toThrow('kafka down');
    const first = held(started, 'first');
    const running = slots.run(first.work);
    const lost = new AbortController();
    const waiting = slots.run(async () => void started.push('never'), lost.signal);
    const next = slots.run(async () => void started.push('next'));
    lost.abort(new Error('lease lost'));
    await expect(waiting).rejects.toThrow('lease lost');
    expect(slots.load()).toEqual({ active: 1, waiting: 1 });
    first.finish();
    await Promise.all([running, next]);
    expect(started).toEqual(['first', 'next']);
    await expect(slots.run(async () => 1, lost.signal)).rejects.toThrow('lease lost');
    expect(slots.load()).toEqual({ active: 0, waiting: 0 });
  });

  it('tells a waiting leadership alive on a period until its turn, then no more (progress-based liveness)', async () => {
    // Waiting for the leaderships ahead (a long restore in the only slot) is no hang of this one: without this its
    // loop's liveness would fail, and the shipped probe would restart the pod, and the restore (issue 46, item 6).
    const slots = new StartSlots(1, 5);
    const first = held([], 'first');
    const running = slots.run(first.work);
    let beats = 0;
    const waiting = slots.run(
      async () => beats,
      undefined,
      () => (beats += 1),
    );
    await until(() => beats >= 3);
    first.finish();
    await running;
    const atTurn = await waiting;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(atTurn).toBeGreaterThanOrEqual(3);
    expect(beats).toBe(atTurn);
  });

  it('holds a leadership in its slot through connect and prepare', async () => {
    const slots = new StartSlots(1);
    const log: string[] = [];
    let finish!: () => void;
    const connected = new Promise<void>((resolve) => (finish = resolve));
    const lazy = (name: string, connect: () => Promise<void>) =>
      new LazyPasses(
        () => ({ passes: fakePasses(log, name), connect, close: async () => void log.push(`${name}.close`) }),
        logger,
        slots,
      );
    const a = lazy('a', async () => (log.push('a.connect'), connected));
    const b = lazy('b', async () => void log.push('b.connect'));
    const both = Promise.all([a.prepare(1, new AbortController().signal), b.prepare(1, new AbortController().signal)]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(log).toEqual(['a.connect']);
    finish();
    await both;
    expect(log).toEqual(['a.connect', 'a.prepare', 'b.connect', 'b.prepare']);
  });
});
