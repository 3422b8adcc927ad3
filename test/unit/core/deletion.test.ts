import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deletedEvents, deletionVerdict, missingFromSweep, SeenIds } from '../../../src/core/deletion.js';
import { diffReview } from '../../../src/core/diff.js';
import { ReviewDeletedEventSchema } from '../../../src/core/events.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { sampleEntry } from '../../helpers/entries.js';

const entry = sampleEntry;

describe('deletionVerdict', () => {
  it('deletes up to the fraction, refuses above it, and does nothing without missing reviews', () => {
    expect(deletionVerdict(0, 1000, 0.01)).toEqual({ action: 'none' });
    expect(deletionVerdict(10, 1000, 0.01)).toEqual({ action: 'delete', missing: 10 });
    expect(deletionVerdict(11, 1000, 0.01)).toEqual({
      action: 'refuse',
      missing: 11,
      known: 1000,
      fraction: 0.011,
      maxFraction: 0.01,
    });
    expect(deletionVerdict(500, 1000, 0.01).action).toBe('refuse');
    // An empty snapshot with "missing" reviews is nonsense: refuse rather than divide by zero.
    expect(deletionVerdict(1, 0, 0.5).action).toBe('refuse');
    // Even when everything may go (found by the property below with the seed -1680599729).
    expect(deletionVerdict(1, 0, 1).action).toBe('refuse');
    expect(deletionVerdict(1000, 1000, 1).action).toBe('delete');
  });

  it('never deletes more than maxFraction of the known reviews (property)', () => {
    fc.assert(
      fc.property(fc.nat(10_000), fc.nat(10_000), fc.double({ min: 0, max: 1, noNaN: true }), (m, k, f) => {
        const v = deletionVerdict(m, k, f);
        if (v.action === 'delete') expect(m).toBeLessThanOrEqual(f * k);
        if (m === 0) expect(v.action).toBe('none');
      }),
    );
  });
});

describe('missingFromSweep', () => {
  it('names exactly the unseen entries written before the sweep started (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.nat(100_000), { maxLength: 60 }),
        fc.func(fc.boolean()),
        fc.func(fc.boolean()),
        (ids, seenFn, lateFn) => {
          const start = 50_000;
          const entries: [number, SnapshotEntry][] = ids.map((id) => [
            id,
            entry(id, lateFn(id) ? start + 1 : start - 1),
          ]);
          const missing = missingFromSweep(entries, (id) => seenFn(id), start);
          expect(missing.map(([id]) => id)).toEqual(ids.filter((id) => !seenFn(id) && !lateFn(id)));
        },
      ),
    );
  });

  it('never deletes a review created after the sweep started', () => {
    expect(missingFromSweep([[7, entry(7, 100)]], () => false, 100)).toEqual([]);
    expect(missingFromSweep([[7, entry(7, 99)]], () => false, 100)).toHaveLength(1);
  });

  it('never deletes a review a poll read after the sweep started, even when only its updated_date moved', () => {
    // Issue 48 (seeds 48509, 48545, 48608, 48736 with newest-first): listed newest first, a review whose
    // updated_date moves while the sweep pages jumps ahead of the sweep's cursor, so the sweep never lists it; a
    // poll reads it, with nothing but the date changed. That read must keep it from this sweep's deletions.
    const review = {
      id: 7,
      updated_date: 1_000,
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'PENDING',
      headline: 'h',
    };
    const base = { detection: 'incremental', source: 'urn:t', suppressCreated: false } as const;
    const known = diffReview({ ...base, previous: null, review, fetchedAt: 50 }).next!;
    const sweepStartedAt = 100;
    const moved = { ...review, updated_date: 1_500 };
    const polled = diffReview({ ...base, previous: known, review: moved, fetchedAt: 140 });
    expect(polled.events).toEqual([]);
    expect(polled.next).toMatchObject({ updatedDate: 1_500, observedAt: 140 });
    // Scanned after the poll: not a candidate. Scanned before it: the re-check sees the entry written again.
    expect(missingFromSweep([[7, polled.next!]], () => false, sweepStartedAt)).toEqual([]);
    expect(polled.next!.observedAt).not.toBe(known.observedAt);
    // A read that moved nothing writes nothing (the entry stays as scanned).
    expect(diffReview({ ...base, previous: polled.next!, review: moved, fetchedAt: 150 }).next).toBeNull();
  });
});

describe('deletedEvents', () => {
  it('continues each review sequence with deterministic ids that differ from its change events', () => {
    const source = 'urn:reviews-bridge:t';
    const review = {
      id: 5,
      updated_date: 10,
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'PENDING',
    };
    const created = diffReview({
      previous: null,
      review,
      detection: 'initial',
      source,
      fetchedAt: 1,
      suppressCreated: false,
    });
    const missing: [number, SnapshotEntry][] = [
      [9, entry(9, 1, 4)],
      [5, created.next!],
    ];
    const events = deletedEvents(source, missing, 2_000);
    expect(events.map((e) => [e.subject, e.sequence])).toEqual([
      ['5', 2],
      ['9', 5],
    ]);
    for (const e of events) expect(ReviewDeletedEventSchema.parse(e)).toEqual(e);
    expect(events[0]!.data.previous).toEqual({
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'PENDING',
      updated_date: 10,
      sequence: 1,
    });
    expect(deletedEvents(source, missing, 9_999).map((e) => e.id)).toEqual(events.map((e) => e.id));
    expect(events[0]!.id).not.toBe(created.events[0]!.id);
  });
});

describe('SeenIds', () => {
  it('answers like a Set of the ids added (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(5_000_000), { maxLength: 200 }),
        fc.array(fc.nat(5_000_000), { maxLength: 50 }),
        (added, probes) => {
          const seen = new SeenIds();
          for (const id of added) seen.add(id);
          const reference = new Set(added);
          expect(seen.size).toBe(reference.size);
          for (const id of [...added, ...probes]) expect(seen.has(id)).toBe(reference.has(id));
        },
      ),
    );
  });

  it('ignores what is not an id', () => {
    const seen = new SeenIds();
    seen.add(-1);
    seen.add(1.5);
    seen.add(Number.NaN);
    expect(seen.size).toBe(0);
    expect(seen.has(-1)).toBe(false);
  });
});
