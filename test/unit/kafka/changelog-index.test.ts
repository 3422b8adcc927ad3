import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChangelogIndex, changelogName, keyPrefixOf } from '../../../src/kafka/changelog-index.js';

// The changelog index's logic, without Kafka: which reads establish or extend what it knows, and that a full
// restore it lets start late never skips a record of its account (the property test models the topic).

const LOG = changelogName(['k1:9092', 'k2:9092'], 'reviews.changelog');

describe('ChangelogIndex', () => {
  it('names a changelog by its brokers and topic, and a key by its prefix up to the first colon', () => {
    expect(LOG).toBe('k1:9092,k2:9092|reviews.changelog');
    expect(changelogName(['k3:9092'], 'reviews.changelog')).not.toBe(LOG);
    expect(keyPrefixOf('acme:e:12')).toBe('acme:');
    expect(keyPrefixOf('acme:restore-marker')).toBe('acme:');
    expect(keyPrefixOf('restore-marker')).toBeNull();
  });

  it('knows nothing until a read from the beginning', () => {
    const index = new ChangelogIndex();
    expect(index.startFor(LOG, 'c:')).toBeNull();
    // A tail read proves nothing about what lies before it.
    index.learn(LOG, { 0: 5, 1: 0 }, { 0: 9, 1: 4 }, new Set(['a:']));
    expect(index.startFor(LOG, 'c:')).toBeNull();
    // Missing offsets and zeros are the beginning.
    index.learn(LOG, { 1: 0 }, { 0: 9, 1: 4 }, new Set(['a:', 'b:']));
    expect(index.startFor(LOG, 'c:')).toEqual({ 0: 9, 1: 4 });
  });

  it('gives an absent prefix the learnt ends, and a present one (or the empty prefix) nothing', () => {
    const index = new ChangelogIndex();
    index.learn(LOG, {}, { 0: 9, 1: 4 }, new Set(['a:', 'b:']));
    expect(index.startFor(LOG, 'c:')).toEqual({ 0: 9, 1: 4 });
    expect(index.startFor(LOG, 'a:')).toBeNull();
    expect(index.startFor(LOG, 'b:')).toBeNull();
    expect(index.startFor(LOG, '')).toBeNull();
    // Another changelog is another index.
    expect(index.startFor(changelogName(['k1:9092', 'k2:9092'], 'other'), 'c:')).toBeNull();
  });

  it('ignores a read that starts beyond what it knows, in any partition', () => {
    const index = new ChangelogIndex();
    index.learn(LOG, {}, { 0: 9, 1: 4 }, new Set(['a:']));
    index.learn(LOG, { 0: 9, 1: 6 }, { 0: 12, 1: 8 }, new Set(['b:']));
    // A partition the index never saw counts as known up to 0.
    index.learn(LOG, { 0: 9, 1: 4, 2: 3 }, { 0: 12, 1: 8, 2: 5 }, new Set(['b:']));
    expect(index.startFor(LOG, 'b:')).toEqual({ 0: 9, 1: 4 });
    // From within what it knows: extended.
    index.learn(LOG, { 0: 3, 1: 4, 2: 0 }, { 0: 12, 1: 8, 2: 5 }, new Set(['b:']));
    expect(index.startFor(LOG, 'b:')).toBeNull();
    expect(index.startFor(LOG, 'c:')).toEqual({ 0: 12, 1: 8, 2: 5 });
  });

  it('merges two reads that started from the same offsets, whichever ends first', () => {
    const index = new ChangelogIndex();
    index.learn(LOG, {}, { 0: 10, 1: 10 }, new Set(['a:']));
    const e = index.startFor(LOG, 'c:')!;
    // Both started at E; the second's markers are further in partition 0, the first's in partition 1.
    index.learn(LOG, e, { 0: 12, 1: 15 }, new Set(['b:']));
    index.learn(LOG, e, { 0: 14, 1: 13 }, new Set(['d:']));
    expect(index.startFor(LOG, 'c:')).toEqual({ 0: 14, 1: 15 });
    for (const prefix of ['a:', 'b:', 'd:']) expect(index.startFor(LOG, prefix)).toBeNull();
  });

  it('never lets a full restore start past a record of its account, whatever reads happen in whatever order', () => {
    const PREFIXES = ['a:', 'b:', 'c:', 'd:'];
    const PARTITIONS = 2;
    type Op =
      | { kind: 'append'; partition: number; prefix: number }
      | { kind: 'compact'; partition: number; at: number }
      | { kind: 'read'; from: 'beginning' | 'index' | 'tail'; prefix: number; tail: number[] }
      | { kind: 'finish'; which: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        arbitrary: fc.record({ kind: fc.constant('append' as const), partition: fc.nat(1), prefix: fc.nat(3) }),
        weight: 5,
      },
      {
        arbitrary: fc.record({ kind: fc.constant('compact' as const), partition: fc.nat(1), at: fc.nat(40) }),
        weight: 1,
      },
      {
        arbitrary: fc.record({
          kind: fc.constant('read' as const),
          from: fc.constantFrom('beginning' as const, 'index' as const, 'tail' as const),
          prefix: fc.nat(3),
          // A tail read's offsets (Redis's last commit's) may lie anywhere, beyond what the index knows too.
          tail: fc.array(fc.nat(40), { minLength: PARTITIONS, maxLength: PARTITIONS }),
        }),
        weight: 2,
      },
      { arbitrary: fc.record({ kind: fc.constant('finish' as const), which: fc.nat(20) }), weight: 2 },
    );
    let restartedLate = 0;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        // The topic: per partition, the prefix of each offset's record (null: an end marker, or compacted away).
        const log: Array<Array<string | null>> = Array.from({ length: PARTITIONS }, () => []);
        const index = new ChangelogIndex();
        const pending: Array<{ from: Record<number, number>; ends: Record<number, number>; seen: Set<string> }> = [];
        for (const o of ops) {
          if (o.kind === 'append') log[o.partition]!.push(PREFIXES[o.prefix]!);
          else if (o.kind === 'compact') {
            if (o.at < log[o.partition]!.length) log[o.partition]![o.at] = null;
          } else if (o.kind === 'read') {
            let from: Record<number, number> = {};
            if (o.from === 'index') from = index.startFor(LOG, PREFIXES[o.prefix]!) ?? {};
            else if (o.from === 'tail') o.tail.forEach((offset, p) => (from[p] = Math.min(offset, log[p]!.length)));
            // The read writes its markers, then scans [from, marker) of every partition: what it sees is fixed now
            // (nothing lands below a marker later); when it reports to the index is up to the other operations.
            const ends: Record<number, number> = {};
            const seen = new Set<string>();
            for (let p = 0; p < PARTITIONS; p++) {
              ends[p] = log[p]!.length;
              log[p]!.push(null);
              for (let offset = from[p] ?? 0; offset < ends[p]!; offset++) {
                const prefix = log[p]![offset];
                if (prefix) seen.add(prefix);
              }
            }
            pending.push({ from, ends, seen });
          } else if (pending.length > 0) {
            const [read] = pending.splice(o.which % pending.length, 1);
            index.learn(LOG, read!.from, read!.ends, read!.seen);
          }
          for (const prefix of PREFIXES) {
            const start = index.startFor(LOG, prefix);
            if (!start) continue;
            restartedLate++;
            for (let p = 0; p < PARTITIONS; p++) {
              const first = log[p]!.indexOf(prefix);
              if (first >= 0) expect(start[p] ?? 0).toBeLessThanOrEqual(first);
            }
          }
        }
      }),
      { numRuns: 500 },
    );
    // Not vacuous: the index did let full restores start late.
    expect(restartedLate).toBeGreaterThan(0);
  });
});
