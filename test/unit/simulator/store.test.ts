import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BASE_EPOCH_MS } from '../../../src/simulator/data.js';
import { ReviewStore, StoreError, type StoreQuery } from '../../../src/simulator/store.js';

/** A clock the test moves by hand (starts well after the base epoch). */
function manualClock(start = BASE_EPOCH_MS + 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/** Every page of a query, following nextId. */
function drain(store: ReviewStore, query: Omit<StoreQuery, 'startId'>): number[] {
  const ids: number[] = [];
  let startId: number | null = 1;
  while (startId !== null) {
    const page = store.list({ ...query, startId });
    expect(page.records.length).toBeLessThanOrEqual(query.limit);
    ids.push(...page.records.map((r) => r.id as number));
    startId = page.nextId;
  }
  return ids;
}

/** The reference answer: every review, filtered by hand. */
function bruteForce(store: ReviewStore, minUpdated: number | null): number[] {
  const ids: number[] = [];
  for (let id = 1; id <= store.count(); id++) {
    const review = store.get(id);
    if (minUpdated === null || (review?.updated_date as number) >= minUpdated) ids.push(id);
  }
  return ids;
}

describe('ReviewStore', () => {
  it('stamps status changes strictly increasing per review even within one millisecond', () => {
    const clock = manualClock();
    const store = new ReviewStore(1, 10, clock.now);
    const a = store.setStatus(3, { client: 'APPROVED' }).updated_date as number;
    const b = store.setStatus(3, { client: 'REJECTED' }).updated_date as number;
    const c = store.setStatus(4, { pwr: 'REJECTED' }).updated_date as number;
    expect(a).toBe(clock.now());
    expect(b).toBe(a + 1);
    expect(c).toBeGreaterThanOrEqual(b);
  });

  it('never stamps behind an earlier stamp when the wall clock steps back', () => {
    const clock = manualClock();
    const store = new ReviewStore(1, 10, clock.now);
    const first = store.setStatus(1, { client: 'APPROVED' }).updated_date as number;
    clock.advance(-5000);
    const second = store.setStatus(2, { client: 'APPROVED' }).updated_date as number;
    expect(second).toBeGreaterThanOrEqual(first);
  });

  it("stamps a late change in the past, after the review's previous stamp, and lists it from an older bound", () => {
    const clock = manualClock();
    const store = new ReviewStore(1, 10, clock.now);
    const early = store.setStatus(2, { client: 'APPROVED' }).updated_date as number;
    clock.advance(60_000);
    const recent = store.setStatus(3, { client: 'APPROVED' }).updated_date as number;
    const late = store.setStatus(4, { client: 'REJECTED' }, 30_000).updated_date as number;
    expect(late).toBe(clock.now() - 30_000);
    // A poll that had covered up to `recent` from a bound before the late stamp finds it; one after it does not.
    expect(drain(store, { limit: 2, minUpdated: late })).toEqual([3, 4]);
    expect(drain(store, { limit: 2, minUpdated: late + 1 })).toEqual([3]);
    expect(drain(store, { limit: 2, minUpdated: early })).toEqual([2, 3, 4]);
    // Never at or before the review's own previous stamp, and later stamps keep following the clock.
    expect(store.setStatus(3, { client: 'REJECTED' }, 120_000).updated_date).toBe(recent + 1);
    expect(store.setStatus(5, { client: 'REJECTED' }).updated_date).toBe(clock.now());
    expect(() => store.setStatus(5, { client: 'APPROVED' }, NaN)).toThrow(StoreError);
  });

  it('stamps a change ahead of the clock (a fast writer) without moving the stamps of the changes after it', () => {
    const clock = manualClock();
    const store = new ReviewStore(1, 10, clock.now);
    clock.advance(60_000);
    const ahead = store.setStatus(2, { client: 'APPROVED' }, -240_000).updated_date as number;
    expect(ahead).toBe(clock.now() + 240_000);
    clock.advance(1_000);
    const next = store.setStatus(3, { client: 'APPROVED' }).updated_date as number;
    expect(next).toBe(clock.now());
    // A listing from just before the next change finds both, in stamp order of the log; one after the next only the
    // one ahead.
    expect(drain(store, { limit: 5, minUpdated: next })).toEqual([2, 3]);
    expect(drain(store, { limit: 5, minUpdated: next + 1 })).toEqual([2]);
  });

  it('keeps updated_date on edits and refuses managed fields', () => {
    const store = new ReviewStore(1, 10);
    const before = store.get(2);
    expect(store.edit(2, { headline: 'x' }).updated_date).toBe(before?.updated_date);
    expect(() => store.edit(2, { client_publication_status: 'APPROVED' })).toThrow(StoreError);
    expect(() => store.create({ id: 99 })).toThrow(StoreError);
    expect(() => store.edit(11, { headline: 'x' })).toThrow(/no review/);
  });

  it('hands out copies, so callers cannot change the store behind its back', () => {
    const store = new ReviewStore(1, 10);
    const copy = store.edit(2, { headline: 'kept' });
    copy.headline = 'mutated';
    (store.get(2) as Record<string, unknown>).headline = 'mutated too';
    expect(store.get(2)?.headline).toBe('kept');
  });

  it('keeps the log in stamp order when a late change lands after the latest stamp', () => {
    // Found by the model-based test below: a late change of a review stamped now is pushed past its own stamp, and
    // the next creation got the older stamp after it in the log.
    const clock = manualClock();
    const store = new ReviewStore(9, 0, clock.now);
    store.create();
    store.setStatus(1, { client: 'APPROVED' }, 0);
    store.create();
    const bound = clock.now() + 1;
    expect(drain(store, { limit: 1, minUpdated: bound })).toEqual(bruteForce(store, bound));
  });

  it('answers every query like a brute-force filter, whatever the changes (model-based)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('create' as const) }),
      fc.record({
        kind: fc.constant('status' as const),
        pick: fc.nat(),
        status: fc.constantFrom('APPROVED', 'REJECTED'),
      }),
      fc.record({ kind: fc.constant('edit' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 5 }) }),
      fc.record({
        kind: fc.constant('late' as const),
        pick: fc.nat(),
        status: fc.constantFrom('APPROVED', 'REJECTED'),
        lateBy: fc.integer({ min: 0, max: 20 }),
      }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.array(op, { maxLength: 40 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: -3, max: 60 }),
        (baseCount, ops, limit, boundOffset) => {
          const clock = manualClock();
          const start = clock.now();
          const store = new ReviewStore(9, baseCount, clock.now);
          for (const o of ops) {
            if (o.kind === 'create') store.create();
            else if (o.kind === 'tick') clock.advance(o.ms);
            else if (store.count() > 0) {
              const id = (o.pick % store.count()) + 1;
              if (o.kind === 'status') store.setStatus(id, { client: o.status });
              else if (o.kind === 'late') store.setStatus(id, { client: o.status }, o.lateBy);
              else store.edit(id, { rating: 1 });
            }
          }
          // Bounds after the epoch use the change log; a bound far in the past walks every id.
          for (const minUpdated of [null, start + boundOffset, 0, BASE_EPOCH_MS - 40 * 86_400_000]) {
            expect(drain(store, { limit, minUpdated })).toEqual(bruteForce(store, minUpdated));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lists everything newest first when so configured, and a removed review again once restored', () => {
    const store = new ReviewStore(7, 250, manualClock().now, 'descending');
    store.remove(249);
    store.remove(3);
    const ids: number[] = [];
    let page = store.list({ startId: 1, limit: 100, minUpdated: null, fromCursor: false });
    ids.push(...page.records.map((r) => r.id as number));
    while (page.nextId !== null) {
      page = store.list({ startId: page.nextId, limit: 100, minUpdated: null, fromCursor: true });
      ids.push(...page.records.map((r) => r.id as number));
    }
    const expected = Array.from({ length: 250 }, (_, i) => 250 - i).filter((id) => id !== 249 && id !== 3);
    expect(ids).toEqual(expected);
    store.restore(249);
    expect(store.get(249)?.id).toBe(249);
    expect(store.list({ startId: 1, limit: 2, minUpdated: null }).records.map((r) => r.id)).toEqual([250, 249]);
    expect(() => store.restore(249)).toThrow(StoreError);
  });

  it('removes reviews from every listing and from lookups, keeping ids dense for the rest (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 300 }), { maxLength: 120 }),
        fc.integer({ min: 1, max: 100 }),
        (removed, limit) => {
          const clock = manualClock();
          const store = new ReviewStore(2, 300, clock.now);
          store.setStatus(5, { client: 'REJECTED' });
          store.setStatus(250, { client: 'APPROVED' });
          for (const id of removed) store.remove(id);
          const gone = new Set(removed);
          const all = Array.from({ length: 300 }, (_, i) => i + 1).filter((id) => !gone.has(id));
          expect(drain(store, { limit, minUpdated: null })).toEqual(all);
          expect(drain(store, { limit, minUpdated: clock.now() })).toEqual([5, 250].filter((id) => !gone.has(id)));
          expect(drain(store, { limit, minUpdated: 0 })).toEqual(all);
          for (const id of removed) expect(store.get(id)).toBeNull();
          expect(store.count()).toBe(300);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('refuses to remove or change an unknown or removed review', () => {
    const store = new ReviewStore(1, 10);
    store.remove(3);
    expect(() => store.remove(3)).toThrow(StoreError);
    expect(() => store.remove(11)).toThrow(StoreError);
    expect(() => store.setStatus(3, { client: 'APPROVED' })).toThrow(StoreError);
  });
});
