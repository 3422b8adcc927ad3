import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffReview } from '../../../src/core/diff.js';
import type { ReviewEvent } from '../../../src/core/events.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { startSimulator, type Simulator } from '../../../src/simulator/index.js';
import type { Review } from '../../../src/core/review.js';
import type { ReadMessage } from '../../helpers/kafka.js';
import { Oracle, violations, type Verdict } from '../../helpers/oracle.js';

// The oracle judged on streams whose faults are known: a perfect stream (the bridge's own diff applied after every
// history step, no Kafka) must pass, and each corruption a broken bridge could cause must be caught by name.
// Without this, a green fault suite could mean a blind oracle.

const topics = { created: 't.created', statusChanged: 't.status', updated: 't.updated', deadLetter: 't.dlq' };
const SOURCE = 'urn:reviews-bridge:oracle-self-test';
let sim: Simulator;
let oracle: Oracle;
let perfect: ReadMessage[];

function toMessages(events: ReviewEvent[]): ReadMessage[] {
  const offsets = new Map<string, number>();
  return events.map((e) => {
    const topic =
      e.type === 'review.created'
        ? topics.created
        : e.type === 'review.status_changed'
          ? topics.statusChanged
          : topics.updated;
    const partition = Number(e.subject) % 3;
    const offset = offsets.get(`${topic}:${partition}`) ?? 0;
    offsets.set(`${topic}:${partition}`, offset + 1);
    return {
      topic,
      partition,
      offset: String(offset),
      key: e.subject,
      value: JSON.stringify(e),
      headers: { 'content-type': 'application/cloudevents+json' },
      timestamp: 0,
    };
  });
}

beforeAll(async () => {
  sim = await startSimulator({ reviewCount: 30, seed: 3, rateLimit: null });
  oracle = new Oracle(sim.control, 3);
  const snapshot = new Map<number, SnapshotEntry>();
  const events: ReviewEvent[] = [];
  let clock = 1;
  const observe = (detection: 'initial' | 'incremental') => {
    for (let id = 1; id <= sim.control.reviewCount(); id++) {
      const review = sim.control.get(id) as Review;
      const r = diffReview({
        previous: snapshot.get(id) ?? null,
        review,
        detection,
        source: SOURCE,
        fetchedAt: clock++,
        suppressCreated: false,
      });
      if (r.next) snapshot.set(id, r.next);
      events.push(...r.events);
    }
  };
  observe('initial');
  await oracle.runHistory({ steps: 80, pauseMs: [0, 0], onStep: () => observe('incremental') });
  perfect = toMessages(events);
});
afterAll(async () => {
  await sim.close();
});

const judge = (messages: ReadMessage[]): Promise<Verdict> => oracle.verify(messages, topics, SOURCE);
const parse = (m: ReadMessage) => JSON.parse(m.value) as ReviewEvent;
const withValue = (m: ReadMessage, event: unknown): ReadMessage => ({ ...m, value: JSON.stringify(event) });

describe('the fault-suite oracle', () => {
  it('passes a perfect stream, counting changes collapsed within one step', async () => {
    const v = await judge(perfect);
    expect(violations(v)).toEqual([]);
    expect(v.truth.statusChanges).toBeGreaterThan(30);
    expect(v.statusChangesDelivered + v.collapsed).toBe(v.truth.statusChanges);
    expect(v.collapsed).toBeGreaterThan(0); // statusTwice and createAndStatus steps
    expect(v.duplicates.extraDeliveries).toBe(0);
  });

  it('accepts identical re-deliveries of an id as duplicates', async () => {
    const v = await judge([...perfect, ...perfect.slice(0, 5)]);
    expect(violations(v)).toEqual([]);
    expect(v.duplicates.extraDeliveries).toBe(5);
  });

  it('catches a lost final status change', async () => {
    const lastStatus = [...perfect].reverse().find((m) => m.topic === topics.statusChanged)!;
    const subject = lastStatus.key;
    // Drop the review's last event(s) from the status change on: the final state is then not shown.
    const seq = parse(lastStatus).sequence;
    const v = await judge(perfect.filter((m) => !(m.key === subject && parse(m).sequence >= seq)));
    expect(v.lost.status.map((f) => f.review)).toContain(subject);
  });

  it('catches a missing created event and a sequence gap', async () => {
    const created = perfect.find((m) => m.topic === topics.created)!;
    const v1 = await judge(perfect.filter((m) => m !== created));
    expect(v1.lost.created.map((f) => f.review)).toEqual([created.key]);
    const middle = perfect.find((m) => m.topic === topics.statusChanged && parse(m).sequence === 2)!;
    const hasLater = perfect.some((m) => m.key === middle.key && parse(m).sequence > 2);
    if (hasLater) {
      const v2 = await judge(perfect.filter((m) => m !== middle));
      expect(v2.gaps.map((f) => f.review)).toContain(middle.key);
    }
  });

  it('catches an invented state', async () => {
    const i = perfect.findIndex((m) => m.topic === topics.statusChanged);
    const e = parse(perfect[i]!);
    const forged = { ...e, data: { ...e.data, review: { ...e.data.review, headline: 'never written' } } };
    const v = await judge(perfect.map((m, j) => (j === i ? withValue(m, forged) : m)));
    expect(v.invented.map((f) => f.review)).toContain(e.subject);
  });

  it('catches a re-delivered id whose payload differs, and tells detection drift apart', async () => {
    const m = perfect.find((x) => x.topic === topics.updated)!;
    const e = parse(m);
    const v = await judge([...perfect, withValue(m, { ...e, time: new Date(0).toISOString() })]);
    expect(v.duplicates.differentPayload).toHaveLength(1);
    expect(v.duplicates.differentPayload[0]!.detail).toContain('differs in time');
    const drift = await judge([...perfect, withValue(m, { ...e, data: { ...e.data, detection: 'sweep' } })]);
    expect(drift.duplicates.detectionDrift).toHaveLength(1);
    expect(violations(drift)).toHaveLength(1);
    expect(violations(drift, { tolerateDetectionDrift: true })).toEqual([]);
  });

  it('catches the same change published under two ids', async () => {
    const m = perfect.find((x) => x.topic === topics.statusChanged)!;
    const e = parse(m);
    const copy = { ...e, id: '00000000-0000-5000-8000-000000000000', sequence: e.sequence + 100 };
    const v = await judge([...perfect, withValue(m, copy)]);
    expect(v.duplicates.sameChangeDifferentIds.length).toBeGreaterThan(0);
  });

  it('catches events out of order in a partition and a broken status chain', async () => {
    // Two status events of one review, swapped in their partition.
    const byReview = new Map<string, number[]>();
    perfect.forEach((m, i) => {
      if (m.topic === topics.statusChanged) byReview.set(m.key!, [...(byReview.get(m.key!) ?? []), i]);
    });
    const [a, b] = [...byReview.values()].find((list) => list.length >= 2)!;
    const swapped = [...perfect];
    const ma = swapped[a!]!;
    const mb = swapped[b!]!;
    swapped[a!] = { ...mb, offset: ma.offset };
    swapped[b!] = { ...ma, offset: mb.offset };
    const v = await judge(swapped);
    expect(v.order.length).toBeGreaterThan(0);
  });

  it('catches schema and envelope violations', async () => {
    const i = perfect.findIndex((m) => m.topic === topics.created);
    const e = parse(perfect[i]!) as unknown as Record<string, unknown>;
    const { specversion: _drop, ...broken } = e;
    const v = await judge(perfect.map((m, j) => (j === i ? { ...withValue(m, broken), key: 'wrong' } : m)));
    expect(v.schema).toHaveLength(1);
    expect(v.envelope.some((f) => f.detail.includes('not the subject'))).toBe(true);
  });
});
