import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  confirmationSince,
  inferUnreadable,
  SweepListing,
  type UnreadableMemory,
} from '../../../src/core/deletion-inference.js';

// The inference that lets deletion detection go on while records whose id cannot be read stay listed, in any
// listing order: which reviews a record may stand for (held), and which sweeps leave deletions undecided.

const none: UnreadableMemory | null = null;

describe('inferUnreadable', () => {
  it('holds nothing without unreadable records, whatever it remembered', () => {
    const i = inferUnreadable([], { digests: ['a'], candidates: { a: [3] } }, [3, 4]);
    expect([...i.held]).toEqual([]);
    expect(i).toMatchObject({ memory: { digests: [], candidates: {} }, fresh: 0, undecided: 0, reason: null });
  });

  it('a new record may stand for every review the sweep did not list; while it persists, for those only', () => {
    const first = inferUnreadable(['b'], { digests: [], candidates: {} }, [7, 3]);
    expect([...first.held].sort()).toEqual([3, 7]);
    expect(first).toMatchObject({ fresh: 1, undecided: 1, reason: 'new_unreadable' });
    expect(first.memory).toEqual({ digests: ['b'], candidates: { b: [3, 7] } });
    // Review 7 is listed again (so the record is not 7), review 9 went missing: 9 is deleted, 3 is held.
    const second = inferUnreadable(['b'], first.memory, [3, 9]);
    expect([...second.held]).toEqual([3]);
    expect(second).toMatchObject({ fresh: 0, undecided: 0, reason: null, memory: { candidates: { b: [3] } } });
  });

  it('a record whose bytes change is a new one', () => {
    const i = inferUnreadable(['c'], { digests: ['b'], candidates: { b: [3] } }, [3, 9]);
    expect([...i.held].sort()).toEqual([3, 9]);
    expect(i.memory.candidates).toEqual({ c: [3, 9] });
  });

  it('counts repeats: one more copy of a body is new', () => {
    const i = inferUnreadable(['x', 'x'], { digests: ['x'], candidates: { x: [] } }, [4]);
    expect(i).toMatchObject({ fresh: 1, memory: { digests: ['x', 'x'], candidates: { x: [4] } } });
    expect(i.undecided).toBe(0);
  });

  it('says when more reviews are held than the records could stand for, persisting or new', () => {
    const i = inferUnreadable(['b'], { digests: ['b'], candidates: { b: [3, 5] } }, [3, 5]);
    expect(i).toMatchObject({ undecided: 1, reason: 'ambiguous_unreadable' });
  });

  it('an unknown memory (null, or digests without candidates: an older checkpoint) makes every record new', () => {
    for (const previous of [none, { digests: ['b'], candidates: null }]) {
      const i = inferUnreadable(['b'], previous, [2]);
      expect(i).toMatchObject({ fresh: 1, memory: { candidates: { b: [2] } } });
    }
  });

  it('beyond the candidate cap holds everything not listed and forgets the candidates', () => {
    const i = inferUnreadable(['b'], null, [1, 2, 3], 2);
    expect([...i.held].sort()).toEqual([1, 2, 3]);
    expect(i).toMatchObject({ reason: 'too_many_candidates', memory: { digests: ['b'], candidates: null } });
  });

  it('the listing counts its unreadable records and says when there are too many to remember', () => {
    const listing = new SweepListing(2);
    for (const d of ['a', 'b', 'c', 'd']) listing.unreadableRecord(d);
    listing.listed(5);
    expect(listing.tooMany).toBe(true);
    expect(listing.unreadableCount).toBe(4);
    expect(listing.digests.length).toBe(3);
    expect(listing.seen.has(5)).toBe(true);
  });
});

// The model: an upstream of reviews, each listed readable or as an unreadable body of its own (a body identifies
// its review; a review that breaks again gets a new body), plus unreadable junk that stands for no review (a small
// alphabet, so that identical bodies and repeats happen); reviews deleted, created, coming back after their
// deletion; sweeps that list everything (complete) or stop part way (their reviews still enter the snapshot), each
// in ascending, descending or shuffled order. The bridge: the snapshot of ids and the memory the checkpoint keeps.
const MAX_ID = 6;
const idArb = fc.integer({ min: 1, max: MAX_ID });
const stepArb = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('delete' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('add' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('break' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('fix' as const), id: idArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('junk' as const), body: fc.constantFrom('j1', 'j2'), add: fc.boolean() }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('sweep' as const),
      order: fc.constantFrom('ascending', 'descending', 'shuffled'),
      seed: fc.integer(),
      // Complete (null), or stopping after this many records.
      stopAfter: fc.oneof(
        { weight: 3, arbitrary: fc.constant(null) },
        { weight: 1, arbitrary: fc.nat({ max: MAX_ID }) },
      ),
    }),
  },
);

type Listed = { id: number } | { body: string };

/** The records of the listing in the given order (a seeded shuffle for 'shuffled'). */
function ordered(records: Listed[], order: string, seed: number): Listed[] {
  const key = (r: Listed) => ('id' in r ? r.id : Number(r.body.split('#')[0]) || 0);
  const sorted = [...records].sort((a, b) => key(a) - key(b));
  if (order === 'ascending') return sorted;
  if (order === 'descending') return sorted.reverse();
  let s = seed >>> 0;
  for (let i = sorted.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [sorted[i], sorted[j]] = [sorted[j]!, sorted[i]!];
  }
  return sorted;
}

describe('a newest-first listing and its second read (issue 48)', () => {
  it('tells a listing sorted newest first from one by id or oldest first', () => {
    const of = (stamps: number[]) => {
      const listing = new SweepListing();
      stamps.forEach((at, i) => listing.listed(i + 1, at));
      return listing.newestFirst;
    };
    expect([of([9, 7, 7, 3]), of([3, 7, 9]), of([7, 9, 3]), of([])]).toEqual([true, false, false, false]);
    // Records without a readable date do not break the order.
    const listing = new SweepListing();
    listing.listed(1, 9);
    listing.listed(2);
    listing.listed(3, 4);
    expect(listing.newestFirst).toBe(true);
  });

  it('tells a listing no review that still exists can pass (by id, oldest first) from one that may hide one', () => {
    const stable = (rows: Array<[number, number]>) => {
      const listing = new SweepListing();
      for (const [id, at] of rows) listing.listed(id, at);
      return listing.stable;
    };
    const byIdUp: Array<[number, number]> = [
      [1, 9],
      [2, 3],
      [5, 7],
    ];
    const byIdDown: Array<[number, number]> = [
      [5, 3],
      [2, 9],
      [1, 7],
    ];
    const oldestFirst: Array<[number, number]> = [
      [5, 3],
      [1, 7],
      [2, 7],
      [4, 9],
    ];
    const newestFirst: Array<[number, number]> = [
      [5, 9],
      [1, 7],
      [4, 3],
    ];
    const neither: Array<[number, number]> = [
      [5, 7],
      [1, 9],
      [4, 3],
    ];
    // Newest first and by id at once (stamps following ids): it may be newest first, so it may hide a review.
    const both: Array<[number, number]> = [
      [5, 9],
      [4, 7],
      [1, 3],
    ];
    expect([byIdUp, byIdDown, oldestFirst, newestFirst, neither, both].map(stable)).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it('reads again from the oldest candidate: every candidate still listed, whatever it became, is in that read', () => {
    expect(confirmationSince([])).toBeNull();
    expect(confirmationSince([{ updatedDate: 500 }, { updatedDate: 120 }, { updatedDate: 300 }])).toBe(120);
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.nat(50), updatedDate: fc.nat(1_000), moved: fc.nat(1_000) }), { minLength: 1 }),
        (candidates) => {
          const since = confirmationSince(candidates)!;
          // A review's updated_date only grows: whatever it moved to, a read from `since` lists it.
          for (const c of candidates) expect(c.updatedDate + c.moved).toBeGreaterThanOrEqual(since);
        },
      ),
    );
  });
});

describe('deletion inference over sweeps in any listing order (property)', () => {
  it('never deletes a listed review; deletes every review gone for two complete sweeps without a new record', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 50 }), (steps) => {
        // Upstream: id -> null (readable) or the body it is listed with; junk bodies, repeats kept.
        const upstream = new Map<number, string | null>();
        for (let id = 1; id <= 4; id++) upstream.set(id, null);
        const junk: string[] = [];
        let bodies = 0;
        const snapshot = new Set<number>();
        let memory: UnreadableMemory | null = null;
        let previousBodies: string[] | null = null;
        // Per review last listed readable by a complete sweep: complete sweeps in a row it was gone in since, none
        // with a new record (null: no obligation).
        const goneStreak = new Map<number, number | null>();
        let loaded = false;
        // The rule restated with times instead of sets: a review not listed readable is held exactly when a listed
        // digest was new (or listed more often) in a complete sweep since the review's first complete sweep
        // without a readable listing (`since`, while the snapshot holds it).
        let sweepNo = 0;
        const since = new Map<number, number>();
        const rise = new Map<string, number>();
        let previousCounts = new Map<string, number>();
        for (const step of [{ op: 'sweep', order: 'ascending', seed: 0, stopAfter: null } as const, ...steps]) {
          if (step.op === 'delete') upstream.delete(step.id);
          else if (step.op === 'add') {
            if (!upstream.has(step.id)) upstream.set(step.id, null); // created, or back after its deletion
          } else if (step.op === 'break') {
            if (upstream.has(step.id)) upstream.set(step.id, `${step.id}#${++bodies}`);
          } else if (step.op === 'fix') {
            if (upstream.has(step.id)) upstream.set(step.id, null);
          } else if (step.op === 'junk') {
            const at = junk.indexOf(step.body);
            if (step.add) junk.push(step.body);
            else if (at >= 0) junk.splice(at, 1);
          } else {
            const all: Listed[] = [...upstream].map(([id, body]) => (body === null ? { id } : { body }));
            for (const body of junk) all.push({ body });
            let records = ordered(all, step.order, step.seed);
            const complete = step.stopAfter === null || step.stopAfter >= records.length || !loaded;
            if (!complete) records = records.slice(0, step.stopAfter ?? 0);
            const listing = new SweepListing();
            for (const r of records) {
              if ('id' in r) listing.listed(r.id);
              else listing.unreadableRecord(r.body);
            }
            if (complete) {
              const unlisted = [...snapshot].filter((id) => !listing.seen.has(id));
              const inference = inferUnreadable(listing.digests, memory, unlisted);
              memory = inference.memory;
              sweepNo++;
              const counts = new Map<string, number>();
              for (const d of listing.digests) counts.set(d, (counts.get(d) ?? 0) + 1);
              for (const d of rise.keys()) if (!counts.has(d)) rise.delete(d);
              for (const [d, n] of counts) if (n > (previousCounts.get(d) ?? 0)) rise.set(d, sweepNo);
              previousCounts = counts;
              for (const id of snapshot) {
                if (listing.seen.has(id)) since.delete(id);
                else if (!since.has(id)) since.set(id, sweepNo);
              }
              for (const id of unlisted) {
                const expected = [...rise.values()].some((at) => at >= since.get(id)!);
                expect(inference.held.has(id), `review ${id} held as the rule says`).toBe(expected);
              }
              // What the model calls a new record: a body listed more often than by the previous complete sweep.
              const sorted = [...listing.digests].sort();
              const newRecord =
                previousBodies === null ||
                sorted.some(
                  (b) => sorted.filter((x) => x === b).length > previousBodies!.filter((x) => x === b).length,
                );
              previousBodies = sorted;
              if (loaded) expect(inference.fresh > 0, 'new records as the model counts them').toBe(newRecord);
              for (const id of unlisted) {
                if (inference.held.has(id)) continue;
                expect(upstream.has(id), `review ${id} deleted while listed`).toBe(false);
                snapshot.delete(id);
                since.delete(id);
              }
              for (const id of new Set([...snapshot, ...goneStreak.keys(), ...upstream.keys()])) {
                if (upstream.has(id)) {
                  // Listed readable: an obligation starts. Listed unreadable: none (docs/bad-input.md: no rule can).
                  goneStreak.set(id, upstream.get(id) === null ? 0 : null);
                  continue;
                }
                const streak = goneStreak.get(id);
                if (streak === undefined || streak === null) continue;
                const next = newRecord ? null : streak + 1;
                goneStreak.set(id, next);
                if (next !== null && next >= 2) {
                  expect(snapshot.has(id), `review ${id} gone for 2 sweeps, still not deleted`).toBe(false);
                }
              }
              loaded = true;
            }
            for (const r of records) {
              if (!('id' in r) || snapshot.has(r.id)) continue;
              snapshot.add(r.id);
              since.delete(r.id);
            }
          }
        }
      }),
      { numRuns: 5000 },
    );
  });
});
