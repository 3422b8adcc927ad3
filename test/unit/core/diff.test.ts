import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { diffReview, type DiffInput } from '../../../src/core/diff.js';
import { EVENT_SCHEMAS, type ReviewEvent } from '../../../src/core/events.js';
import { fingerprint, type SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import type { Review } from '../../../src/core/review.js';

const SOURCE = 'urn:reviews-bridge:test';

function review(overrides: Partial<Review> = {}): Review {
  return {
    id: 42,
    updated_date: 1_700_000_000_000,
    client_publication_status: 'PENDING',
    pwr_publication_status: 'PENDING',
    headline: 'Great',
    rating: 5,
    comments: 'Works well',
    email: 'someone@example.com',
    helpful_votes: 0,
    ...overrides,
  };
}

function run(previous: SnapshotEntry | null, r: Review, extra: Partial<DiffInput> = {}) {
  return diffReview({
    previous,
    review: r,
    detection: 'incremental',
    source: SOURCE,
    fetchedAt: 1_800_000_000_000,
    suppressCreated: false,
    ...extra,
  });
}

function stored(r: Review, sequence = 1, observedAt = 1_700_000_000_000): SnapshotEntry {
  return {
    client: r.client_publication_status,
    pwr: r.pwr_publication_status,
    updatedDate: r.updated_date,
    sequence,
    observedAt,
    ...fingerprint(r),
  };
}

function validate(event: ReviewEvent): void {
  const parsed = EVENT_SCHEMAS[event.type].safeParse(event);
  expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
}

describe('diffReview', () => {
  it('a review without an entry that was reported deleted continues after its review.deleted', () => {
    const { events, next } = run(null, review(), { deletedSequence: 4 });
    expect(events.map((e) => [e.type, e.sequence])).toEqual([['review.created', 5]]);
    expect(next?.sequence).toBe(5);
    // Its event id differs from the first review.created's, which consumers already applied.
    expect(events[0]!.id).not.toBe(run(null, review()).events[0]!.id);
  });

  it('emits review.created with sequence 1 for an unknown review', () => {
    const { events, next } = run(null, review());
    expect(events.map((e) => e.type)).toEqual(['review.created']);
    expect(events[0]!.sequence).toBe(1);
    expect(events[0]!.subject).toBe('42');
    expect(events[0]!.data.previous).toBeNull();
    expect(next?.sequence).toBe(1);
    events.forEach(validate);
  });

  it('marks initial-load creations and can suppress them while still recording the review', () => {
    expect(run(null, review(), { detection: 'initial' }).events[0]!.data.detection).toBe('initial');
    const suppressed = run(null, review(), { detection: 'initial', suppressCreated: true });
    expect(suppressed.events).toEqual([]);
    expect(suppressed.next?.sequence).toBe(0);
  });

  it('emits status_changed with from and to of both fields', () => {
    const before = review();
    const after = review({ updated_date: before.updated_date + 1, client_publication_status: 'APPROVED' });
    const { events, next } = run(stored(before, 3), after);
    expect(events).toHaveLength(1);
    const e = events[0]!;
    expect(e.type).toBe('review.status_changed');
    expect(e.sequence).toBe(4);
    if (e.type !== 'review.status_changed') throw new Error('unreachable');
    expect(e.data.status).toEqual({
      client_publication_status: { from: 'PENDING', to: 'APPROVED' },
      pwr_publication_status: { from: 'PENDING', to: 'PENDING' },
    });
    expect(e.data.changed_fields).toEqual(['client_publication_status']);
    expect(e.data.previous.sequence).toBe(3);
    expect(next?.sequence).toBe(4);
    validate(e);
  });

  it('emits review.updated naming the edited fields, without moving updated_date', () => {
    const before = review();
    const after = review({ comments: 'Changed my mind', rating: 2 });
    const { events } = run(stored(before), after);
    expect(events.map((e) => e.type)).toEqual(['review.updated']);
    expect(events[0]!.data.changed_fields).toEqual(['rating', 'comments']);
    events.forEach(validate);
  });

  it('names unknown fields as (other)', () => {
    const before = review();
    const after = { ...review(), syndication: { partner: 'x' } } as Review;
    expect(run(stored(before), after).events[0]!.data.changed_fields).toEqual(['(other)']);
  });

  it('emits status first, then updated, when both change', () => {
    const before = review();
    const after = review({ updated_date: before.updated_date + 5, pwr_publication_status: 'REJECTED', headline: 'x' });
    const { events, next } = run(stored(before, 1), after);
    expect(events.map((e) => [e.type, e.sequence])).toEqual([
      ['review.status_changed', 2],
      ['review.updated', 3],
    ]);
    expect(next?.sequence).toBe(3);
    events.forEach(validate);
  });

  it('emits nothing for an unchanged review and writes nothing', () => {
    const r = review();
    expect(run(stored(r), r)).toEqual({ events: [], next: null });
  });

  it('emits nothing for a read older than the snapshot', () => {
    const newer = review({ updated_date: 2_000, client_publication_status: 'APPROVED' });
    const older = review({ updated_date: 1_000 });
    expect(run(stored(newer), older)).toEqual({ events: [], next: null });
  });

  it('ignores an edit seen on a page fetched before the page that stored the entry', () => {
    const current = review({ comments: 'new text' });
    const stale = review({ comments: 'old text' });
    expect(run(stored(current, 2, 5_000), stale, { fetchedAt: 4_000 }).events).toEqual([]);
    expect(run(stored(current, 2, 5_000), stale, { fetchedAt: 6_000 }).events).toHaveLength(1);
  });

  it('records a newer updated_date without an event when nothing else changed', () => {
    const r = review();
    const res = run(stored(r), { ...r, updated_date: r.updated_date + 10 });
    expect(res.events).toEqual([]);
    expect(res.next?.updatedDate).toBe(r.updated_date + 10);
  });

  it('derives the same event id for the same change and a different one for a different change', () => {
    const before = stored(review());
    const approved = review({ updated_date: 1_700_000_000_500, client_publication_status: 'APPROVED' });
    const rejected = review({ updated_date: 1_700_000_000_600, client_publication_status: 'REJECTED' });
    const a1 = run(before, approved).events[0]!;
    const a2 = run(before, approved, { fetchedAt: 1_900_000_000_000 }).events[0]!;
    const r1 = run(before, rejected).events[0]!;
    expect(a1.id).toBe(a2.id);
    expect(a1).toEqual(a2);
    expect(r1.sequence).toBe(a1.sequence);
    expect(r1.id).not.toBe(a1.id);
  });
});

// A history of one review: each step is a status change (moves updated_date) or an edit (does not).
type Step = { kind: 'status'; field: 'client' | 'pwr'; to: string } | { kind: 'edit' };
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('status' as const),
    field: fc.constantFrom('client' as const, 'pwr' as const),
    to: fc.constantFrom('PENDING', 'APPROVED', 'REJECTED', 'ON_HOLD'),
  }),
  fc.constant({ kind: 'edit' as const }),
);

function states(steps: Step[]): { review: Review; from: number }[] {
  let r = review({ updated_date: 1_000 });
  let t = 1_000;
  const out = [{ review: r, from: t }];
  steps.forEach((step, i) => {
    t += 10;
    if (step.kind === 'status') {
      const key = step.field === 'client' ? 'client_publication_status' : 'pwr_publication_status';
      r = { ...r, [key]: step.to, updated_date: t };
    } else {
      // Every edit yields new content, so each state of the history is recognisable by its digest.
      r = { ...r, helpful_votes: (r.helpful_votes ?? 0) + 1 + i };
    }
    out.push({ review: r, from: t });
  });
  return out;
}

describe('diffReview over random histories (property)', () => {
  it('replaying reads in any page order loses no final state and never goes backwards', () => {
    fc.assert(
      fc.property(
        fc.array(stepArb, { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat({ max: 10_000 }), { minLength: 1, maxLength: 20 }),
        fc.func(fc.integer()),
        (steps, readOffsets, order) => {
          const history = states(steps);
          const end = history.at(-1)!.from + 5;
          // A read fetched at time f sees the state current at f.
          const reads = readOffsets.map((o) => {
            const f = 1_000 + (o % (end - 1_000));
            const index = history.findLastIndex((s) => s.from <= f);
            return { f, index, review: history[index]!.review };
          });
          const shuffled = [...reads].sort((a, b) => order(a.f) - order(b.f) || a.f - b.f);
          // The final read (what a later poll or sweep sees) is processed last.
          shuffled.push({ f: end, index: history.length - 1, review: history.at(-1)!.review });

          let entry: SnapshotEntry | null = null;
          const emitted: { index: number; event: ReviewEvent }[] = [];
          for (const read of shuffled) {
            const res = diffReview({
              previous: entry,
              review: read.review,
              detection: 'sweep',
              source: SOURCE,
              fetchedAt: read.f,
              suppressCreated: false,
            });
            for (const event of res.events) emitted.push({ index: read.index, event });
            if (res.next) entry = res.next;
          }
          const last = history.at(-1)!.review;
          // The final state is never lost.
          expect(entry!.client).toBe(last.client_publication_status);
          expect(entry!.pwr).toBe(last.pwr_publication_status);
          expect(entry!.updatedDate).toBe(last.updated_date);
          expect(entry!.digest).toBe(fingerprint(last).digest);
          // Sequences are 1, 2, 3, ... with no gap, and events never go back in the history.
          expect(emitted.map((e) => e.event.sequence)).toEqual(emitted.map((_, i) => i + 1));
          for (let i = 1; i < emitted.length; i++) {
            expect(emitted[i]!.index).toBeGreaterThanOrEqual(emitted[i - 1]!.index);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
