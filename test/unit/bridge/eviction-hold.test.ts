import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Passes, type MemoryProbe } from '../../../src/bridge/passes/index.js';
import { SnapshotLostError } from '../../../src/core/errors.js';
import { evictionBackoffMs, evictionMessage, SnapshotHold } from '../../../src/core/snapshot-hold.js';
import { FakeSink, FakeSnapshot, FakeSource, page, review, testMetrics } from '../../helpers/fakes.js';

// A restore that Redis evicted keys during does not hold: the leadership is not readied (no pass runs, nothing is
// published), the account's hold state says why once, and the next restore that holds resumes it.

const signal = new AbortController().signal;

function setup() {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const snapshot = new FakeSnapshot([]);
  const sink = new FakeSink([]);
  const metrics = testMetrics();
  const hold = new SnapshotHold();
  const figures = { evictedKeys: 0, usedMemory: 90 * 1024 * 1024, maxmemory: 100 * 1024 * 1024 };
  let lost: string | null = null;
  const memory: MemoryProbe = { stats: async () => ({ ...figures }), bytesPerEntry: async () => 1024 };
  const evicting: boolean[] = [];
  Object.assign(snapshot, { verifyHeld: async () => lost });
  const passes = new Passes(
    { snapshot, sink, metrics, logger, eventSource: 'urn:test', initialLoadMode: 'mark' },
    new FakeSource([]),
    {
      overlapMs: 1000,
      metrics,
      deleteMaxFraction: null,
      account: 'acme',
      eviction: { hold, memory, setEvicting: (on) => evicting.push(on) },
    },
  );
  return {
    passes,
    snapshot,
    sink,
    hold,
    figures,
    evicting,
    lines,
    loseAfterRestore: (what: string | null) => (lost = what),
    evictDuringRestore: (n: number) => {
      const stats = memory.stats;
      memory.stats = async () => {
        memory.stats = stats;
        const now = await stats();
        figures.evictedKeys += n;
        return now;
      };
    },
  };
}

describe('a restore Redis evicts keys during', () => {
  it('does not ready the leadership; says why once; the next restore that holds resumes', async () => {
    const s = setup();
    s.evictDuringRestore(12);
    const first = await s.passes.prepare(1, signal, true).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(SnapshotLostError);
    expect((first as SnapshotLostError).full).toBe(true);
    expect((first as SnapshotLostError).evictingRetryMs).toBe(evictionBackoffMs(1));
    expect(s.hold.state()).toMatchObject({ kind: 'evicting', evicted: 12, attempts: 1 });

    // Still evicting: a longer wait, no second error line.
    s.evictDuringRestore(3);
    const second = await s.passes.prepare(1, signal, true).catch((e: unknown) => e);
    expect((second as SnapshotLostError).evictingRetryMs).toBe(evictionBackoffMs(2));
    // A restore after which a key is missing does not hold either, even with no eviction counted.
    s.loseAfterRestore('snapshot bucket 3');
    const third = await s.passes.prepare(1, signal, true).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(SnapshotLostError);
    expect(s.hold.state()).toMatchObject({ kind: 'evicting', lost: 'snapshot bucket 3', attempts: 3 });
    const errors = s.lines.filter((l) => l.level === 50);
    expect(errors.map((l) => l.msg)).toEqual([
      expect.stringContaining('Redis maxmemory too small for the snapshot of account acme'),
    ]);

    // Memory raised: the restore holds, the leadership is readied, the passes publish again.
    s.loseAfterRestore(null);
    expect(await s.passes.prepare(1, signal, true)).toBe(true);
    expect(s.hold.state()).toEqual({ kind: 'held' });
    expect(s.evicting).toEqual([true, true, true, false]);
    expect(s.lines.filter((l) => l.msg.includes('publishing resumes'))).toHaveLength(1);
    const poll = s.passes.pipeline.open('incremental', 1);
    await poll.submit(page([review(9)]));
    await poll.commit({});
    expect(s.sink.events.map((e) => e.subject)).toEqual(['9']);
  });

  it('a key evicted under the restore itself (a batch or the finish says so) does not hold either', async () => {
    const s = setup();
    const seal = s.snapshot.seal.bind(s.snapshot);
    s.snapshot.seal = async () => {
      throw new SnapshotLostError(
        'LOST-PART: the bucket manifest of the account vanished from Redis during its restore',
        true,
      );
    };
    const err = await s.passes.prepare(1, signal, true).catch((e: unknown) => e);
    expect((err as SnapshotLostError).evictingRetryMs).toBe(evictionBackoffMs(1));
    expect(s.hold.state()).toMatchObject({
      kind: 'evicting',
      lost: 'the bucket manifest of the account vanished from Redis during its restore',
    });
    s.snapshot.seal = seal;
    expect(await s.passes.prepare(1, signal, true)).toBe(true);
    expect(s.hold.state()).toEqual({ kind: 'held' });
  });

  it('a restore with no eviction and nothing missing holds, and is not checked key by key after a tail', async () => {
    const s = setup();
    let checked = 0;
    Object.assign(s.snapshot, { verifyHeld: async () => ((checked += 1), null) });
    expect(await s.passes.prepare(1, signal, true)).toBe(true);
    expect(checked).toBe(1);
    s.snapshot.txn = 1;
    expect(await s.passes.prepare(2, signal)).toBe(true);
    expect(checked).toBe(1);
    expect(s.hold.state()).toEqual({ kind: 'held' });
  });
});

describe('the eviction message and backoff', () => {
  it('names the account, what Redis needs and has, in MiB (what it needs only when above maxmemory)', () => {
    const line = evictionMessage('acme', {
      evicted: 40,
      lost: null,
      needBytes: 150 * 1024 * 1024 + 1,
      maxmemory: 100 * 1024 * 1024,
    });
    expect(line).toContain(
      'Redis maxmemory too small for the snapshot of account acme (needs about 151 MiB, maxmemory is 100 MiB)',
    );
    expect(line).toContain('Redis evicted 40 keys while it was restored');
    const low = evictionMessage('acme', { evicted: 2, lost: null, needBytes: 10, maxmemory: 100 * 1024 * 1024 });
    expect(low).toContain('Redis maxmemory too small for the snapshot of account acme (maxmemory is 100 MiB)');
    expect(
      evictionMessage('acme', { evicted: null, lost: 'the bucket manifest', needBytes: null, maxmemory: null }),
    ).toContain('Redis cannot hold the snapshot of account acme: lost: the bucket manifest;');
  });

  it('waits 1 s doubling to 30 s between restores that do not hold', () => {
    expect([1, 2, 3, 5, 6, 7, 50].map(evictionBackoffMs)).toEqual([
      1_000, 2_000, 4_000, 16_000, 30_000, 30_000, 30_000,
    ]);
  });
});
