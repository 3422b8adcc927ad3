import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { connectGate } from '../../../src/app/account.js';
import { LazyPasses } from '../../../src/app/leadership.js';
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
