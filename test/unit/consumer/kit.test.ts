import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FeedView,
  ForeignMessageError,
  parseReviewEvent,
  reduceReview,
  traceparentOf,
  type ParsedRecord,
  type ReviewRecord,
  type ReviewView,
} from '../../../src/consumer/kit.js';
import { deletedEvents } from '../../../src/core/deletion.js';
import { diffReview } from '../../../src/core/diff.js';
import { heartbeatEvent, stateOf, type ReviewEvent } from '../../../src/core/events.js';
import { stateMessages } from '../../../src/kafka/publisher.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import type { Review } from '../../../src/core/review.js';

const SOURCE = 'urn:reviews-bridge:unit';
const STATUSES = ['PENDING', 'APPROVED', 'REJECTED'] as const;

/** A step of a review's upstream history: new statuses and/or a new headline. */
interface Step {
  client: (typeof STATUSES)[number];
  pwr: (typeof STATUSES)[number];
  headline: string;
}

/** The events the bridge publishes for a review going through these states (and maybe deleted at the end). */
function history(id: number, steps: Step[], deleted: boolean): { events: ReviewEvent[]; all: ParsedRecord[] } {
  let entry: SnapshotEntry | null = null;
  const events: ReviewEvent[] = [];
  steps.forEach((step, i) => {
    const review: Review = {
      id,
      updated_date: 1_000 + i * 10,
      client_publication_status: step.client,
      pwr_publication_status: step.pwr,
      headline: step.headline,
    };
    const r = diffReview({
      previous: entry,
      review,
      detection: 'incremental',
      source: SOURCE,
      fetchedAt: 1 + i,
      suppressCreated: false,
    });
    events.push(...r.events);
    if (r.next) entry = r.next;
  });
  const all: ParsedRecord[] = events.map((e) =>
    parseReviewEvent({ key: e.subject, value: JSON.stringify(e), headers: {} }),
  );
  // The state rows the publisher writes with each batch (one batch per step here: every event's own row).
  for (const m of events.flatMap((e) => stateMessages([e]))) all.push(parseReviewEvent(m as never));
  if (deleted && entry) {
    const [del] = deletedEvents(SOURCE, [[id, entry]], 99_999);
    all.push(parseReviewEvent({ key: String(id), value: JSON.stringify(del), headers: {} }));
  }
  return { events, all };
}

function fold(records: ParsedRecord[]): { view: ReviewView | undefined; rejected: number } {
  let view: ReviewView | undefined;
  let rejected = 0;
  for (const r of records) {
    const result = reduceReview(view, r as ReviewRecord);
    view = result.view;
    rejected += result.effects.length;
  }
  return { view, rejected };
}

const step = fc.record({
  client: fc.constantFrom(...STATUSES),
  pwr: fc.constantFrom(...STATUSES),
  headline: fc.constantFrom('a', 'b', 'c'),
});

describe('parseReviewEvent with account-prefixed keys (accounts sharing topics)', () => {
  it('reads `<account>:<review id>` keys on events and state rows, and still checks the id against the record', () => {
    const event = diffReview({
      previous: null,
      review: { id: 42, updated_date: 5, client_publication_status: 'PENDING', pwr_publication_status: 'APPROVED' },
      detection: 'initial',
      source: SOURCE,
      fetchedAt: 1,
      suppressCreated: false,
    }).events[0]!;
    const value = JSON.stringify(event);
    expect(parseReviewEvent({ key: 'brand-a:42', value, headers: {} }).kind).toBe('created');
    expect(() => parseReviewEvent({ key: 'brand-a:43', value, headers: {} })).toThrow(/key differs from its subject/);
    const [row] = stateMessages([event]);
    const state = parseReviewEvent({ ...row!, key: 'brand-a:42' } as never);
    expect(state).toMatchObject({ kind: 'state', reviewId: 42 });
    expect(() => parseReviewEvent({ ...row!, key: 'brand-a:43' } as never)).toThrow(/differs from its review_id/);
    expect(() => parseReviewEvent({ ...row!, key: 'a:b:42' } as never)).toThrow(/without a review id key/);
  });
});

describe('parseReviewEvent', () => {
  const created = diffReview({
    previous: null,
    review: {
      id: 4,
      updated_date: 5,
      client_publication_status: 'PENDING',
      pwr_publication_status: 'APPROVED',
      email: 'x@example.com',
    },
    detection: 'initial',
    source: SOURCE,
    fetchedAt: 1,
    suppressCreated: false,
  }).events[0]!;

  it('returns a typed union for every record kind of the bridge', () => {
    const parsed = parseReviewEvent({
      key: Buffer.from('4'),
      value: Buffer.from(JSON.stringify(created)),
      headers: {},
    });
    expect(parsed.kind).toBe('created');
    if (parsed.kind === 'created') expect(parsed.event.data.review.id).toBe(4);
    const beat = heartbeatEvent({
      source: SOURCE,
      account: 'a',
      watermark: null,
      lastCompletePoll: null,
      leaseEpoch: 1,
      paused: false,
      now: 1,
    });
    expect(parseReviewEvent({ key: 'a', value: JSON.stringify(beat) })).toEqual({ kind: 'heartbeat', event: beat });
    const [row] = stateMessages([created]);
    expect(parseReviewEvent(row as never)).toEqual({ kind: 'state', reviewId: 4, state: stateOf(created) });
    expect(
      parseReviewEvent({ key: '4', value: null, headers: { 'reviews-bridge-record': Buffer.from('review.state') } }),
    ).toEqual({
      kind: 'tombstone',
      reviewId: 4,
    });
  });

  it.each([
    [{ key: '4', value: 'not json' }, 'value is not JSON'],
    [{ key: '4', value: '[1]' }, 'not a JSON object'],
    [{ key: '4', value: '{"hello":1}' }, 'specversion'],
    [{ key: '4', value: '{"specversion":"1.0","type":"order.placed"}' }, 'unknown event type "order.placed"'],
    [{ key: '4', value: null }, 'null value outside the state topic'],
    [{ key: '5', value: 'CREATED' }, 'key differs from its subject'],
    [{ key: '4', value: 'BROKEN' }, 'invalid review.created (data.review.updated_date: invalid_type)'],
    [{ key: 'x', value: null, headers: { 'reviews-bridge-record': 'review.state' } }, 'without a review id key'],
  ])('refuses %j with a clear error', (message, fragment) => {
    const value =
      message.value === 'CREATED'
        ? JSON.stringify(created)
        : message.value === 'BROKEN'
          ? JSON.stringify({
              ...created,
              data: { ...created.data, review: { ...created.data.review, updated_date: 'soon' } },
            })
          : message.value;
    const run = () => parseReviewEvent({ ...message, value });
    expect(run).toThrow(ForeignMessageError);
    expect(run).toThrow(fragment);
  });

  it('never echoes record values in its errors', () => {
    const bad = {
      ...created,
      data: { ...created.data, review: { ...created.data.review, pwr_publication_status: ['x@example.com'] } },
    };
    expect(() => parseReviewEvent({ key: '4', value: JSON.stringify(bad) })).toThrow(/^(?!.*example\.com).*$/s);
  });
});

describe('reduceReview', () => {
  it('any permutation with duplicates of a review records yields the in-order view (property)', () => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 40 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (steps, deleted, order, dups) => {
          const { all } = history(7, steps, deleted);
          const inOrder = fold(all.filter((r) => r.kind !== 'state')).view;
          // Shuffle by the random keys, then append random duplicates.
          const shuffled = all
            .map((r, i) => ({ r, k: order[i] ?? i }))
            .sort((a, b) => a.k - b.k)
            .map((x) => x.r);
          for (const d of dups) shuffled.push(all[d % all.length]!);
          expect(fold(shuffled).view).toEqual(inOrder);
          // Bootstrapping from the last state row then reading everything again also converges.
          const rows = all.filter((r) => r.kind === 'state');
          expect(fold([rows.at(-1)!, ...shuffled]).view).toEqual(inOrder);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reports each transition to REJECTED once in order, and never for duplicates', () => {
    const steps: Step[] = [
      { client: 'PENDING', pwr: 'PENDING', headline: 'a' },
      { client: 'REJECTED', pwr: 'PENDING', headline: 'a' },
      { client: 'REJECTED', pwr: 'PENDING', headline: 'b' },
      { client: 'APPROVED', pwr: 'REJECTED', headline: 'b' },
    ];
    const { all } = history(3, steps, false);
    const changes = all.filter((r) => r.kind !== 'state');
    expect(fold(changes).rejected).toBe(2);
    expect(fold([...changes, ...changes]).rejected).toBe(2);
    // A review first seen already rejected (bootstrap from its state row) is not a transition.
    expect(fold([all.filter((r) => r.kind === 'state')[1]!]).rejected).toBe(0);
  });

  it('a newer record wins over a tombstone, a tombstone deletes what is known', () => {
    const { all } = history(9, [{ client: 'APPROVED', pwr: 'APPROVED', headline: 'a' }], false);
    const view = fold(all).view!;
    const dead = reduceReview(view, { kind: 'tombstone', reviewId: 9 });
    expect(dead.view).toMatchObject({ deleted: true, review: null, sequence: 1 });
    expect(reduceReview(dead.view, all[0] as ReviewRecord).outcome).toBe('stale');
  });
});

describe('FeedView', () => {
  it('keeps live reviews and the newest heartbeat', () => {
    const feed = new FeedView();
    for (const r of history(1, [{ client: 'APPROVED', pwr: 'APPROVED', headline: 'a' }], false).all) feed.apply(r);
    for (const r of history(2, [{ client: 'APPROVED', pwr: 'APPROVED', headline: 'a' }], true).all) feed.apply(r);
    expect([...feed.live().keys()]).toEqual([1]);
    const beat = (now: number) =>
      parseReviewEvent({
        value: JSON.stringify(
          heartbeatEvent({
            source: SOURCE,
            account: 'a',
            watermark: 1,
            lastCompletePoll: 1,
            leaseEpoch: 1,
            paused: false,
            now,
          }),
        ),
      });
    feed.apply(beat(20));
    feed.apply(beat(10));
    expect(feed.lastHeartbeat?.time).toBe(new Date(20).toISOString());
  });
});

describe('traceparentOf', () => {
  const created = diffReview({
    previous: null,
    review: { id: 8, updated_date: 5, client_publication_status: 'PENDING', pwr_publication_status: 'APPROVED' },
    detection: 'incremental',
    source: SOURCE,
    fetchedAt: 1,
    suppressCreated: false,
  }).events[0]!;
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('reads the Kafka header, else the envelope attribute, else null; parsing keeps the attribute', () => {
    const stamped = { ...created, traceparent: tp };
    const withBoth = { key: '8', value: JSON.stringify(stamped), headers: { traceparent: Buffer.from(tp) } };
    const parsed = parseReviewEvent(withBoth);
    expect(parsed.kind === 'created' && parsed.event.traceparent).toBe(tp);
    expect(traceparentOf(withBoth, parsed)).toBe(tp);
    const envelopeOnly = { key: '8', value: JSON.stringify(stamped), headers: {} };
    expect(traceparentOf(envelopeOnly, parseReviewEvent(envelopeOnly))).toBe(tp);
    const none = { key: '8', value: JSON.stringify(created), headers: {} };
    expect(traceparentOf(none, parseReviewEvent(none))).toBeNull();
    // A malformed header is ignored, not trusted.
    expect(traceparentOf({ ...none, headers: { traceparent: 'nonsense' } }, parseReviewEvent(none))).toBeNull();
  });

  it('refuses an event whose traceparent attribute is malformed', () => {
    const bad = { key: '8', value: JSON.stringify({ ...created, traceparent: 'x' }), headers: {} };
    expect(() => parseReviewEvent(bad)).toThrow(ForeignMessageError);
  });
});
