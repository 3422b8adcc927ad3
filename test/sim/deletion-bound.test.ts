import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Review } from '../../src/core/review.js';
import { MAX_CONFIRMATION_READS } from '../../src/bridge/passes/sweep-deletions.js';
import { checkDeployment, DELETION_BOUND_MS, PAGE_MS, type Violation } from './checker.js';
import { VirtualClock } from './clock.js';
import { Deployment } from './deployment.js';
import { SimKafka } from './kafka.js';
import { SimRedisServer } from './redis.js';
import { SimUpstream, type ListingOrder } from './upstream.js';
import { World } from './world.js';

// The checker's deletion bound (property 9): a review gone upstream is reported deleted within DELETION_BOUND_MS of
// the listing no longer showing anything that may be it (its own record listed malformed, a record without a
// readable id), and not later.

const START = Date.UTC(2026, 10, 27);
const GONE = 30_000;

function world(dateHeaderOffsetMs = 0, order: ListingOrder = 'id-asc') {
  const clock = new VirtualClock(START);
  const w = new World(clock, fc.sample(fc.scheduler(), 1)[0]!, START);
  const kafka = new SimKafka(() => clock.now(), 60_000);
  const redis = new SimRedisServer(() => clock.now());
  const upstream = new SimUpstream(w, order, 5, 0, dateHeaderOffsetMs);
  const main = new Deployment('main', w, redis, kafka, upstream, { BRIDGE_ACCOUNT: 'acct' }, {}, () => 0.5);
  const topics = main.config.kafka.topics;
  const review: Review = {
    id: 5,
    updated_date: START - 60_000,
    client_publication_status: 'APPROVED',
    pwr_publication_status: 'PENDING',
    headline: 'review 5',
    helpful_votes: 0,
  };
  upstream.put(review, START);
  const at = (ms: number): void => {
    clock.at(START + ms, () => undefined);
    clock.fireNext();
  };
  let txn = 0;
  const publish = (topic: string, type: string, sequence: number, data?: unknown, subject = '5'): void => {
    const producer = `p${++txn}`;
    kafka.initProducer(producer);
    const value = JSON.stringify({ id: `e${txn}`, type, subject, sequence, data });
    kafka.send(producer, 1, [{ topic, message: { key: subject, value }, bytes: 0 }]);
    kafka.end(producer, true);
  };
  at(1_000);
  publish(topics.created, 'review.created', 1, { review });
  at(GONE);
  upstream.remove(5);
  return {
    upstream,
    // A review listed from a second before the deletion, and its review.created.
    listed(other: Review): void {
      upstream.put(other, START + GONE - 1_000);
      publish(topics.created, 'review.created', 1, { review: other }, String(other.id));
    },
    // Review 5 reported deleted `ms` after it went (never: null), then the schedule's end.
    reportedAfter(ms: number | null): Violation | null {
      if (ms !== null) {
        at(GONE + ms);
        publish(topics.deleted, 'review.deleted', 2);
      }
      at(GONE + Math.max(400_000, (ms ?? 0) + 100_000));
      const target = { name: 'main', config: main.config, kafka, upstream, redis, disturbed: [], start: START };
      return checkDeployment({ ...target, end: clock.now() }, { events: 0, reviews: 0 });
    },
  };
}

describe('the deletion bound', () => {
  it('is the sweep interval and two sweeps (100 s), from the deletion', () => {
    expect(DELETION_BOUND_MS).toBe(100_000);
    expect(world().reportedAfter(99_000)).toBeNull();
    expect(world().reportedAfter(101_000)?.detail).toMatch(/^review 5 deleted upstream at 30000 ms .* after its bound/);
    // Never reported, and due within the schedule (which ends 400 s after the deletion).
    expect(world().reportedAfter(null)?.detail).toBe(
      'review 5 is gone upstream and the feed has no review.deleted after seq 1 (due 130000 ms: 100000 ms once healthy)',
    );
  });

  it("counts from the end of the review's own record listed malformed, and of records without a readable id", () => {
    const w = world();
    // Listed broken from before the deletion until 20 s after it: its id is still listed.
    w.upstream.broken.set(5, [{ from: START + GONE - 1_000, to: START + GONE + 20_000 }]);
    // A record without a readable id listed before the deletion is due (120 s) holds it for one more sweep.
    w.upstream.malformedEver.push({
      id: 900_001,
      raw: '<not json>',
      from: START + GONE + 100_000,
      to: START + GONE + 120_000,
    });
    expect(w.reportedAfter(215_000)).toBeNull();
  });

  it('grows by the paging the listing asks of polls and sweeps, counted from the world', () => {
    // 40 records listed all along, each read by every poll (no date: like a record stamped ahead) and by every
    // sweep: a poll pages 8 pages of 5 (5.6 s at PAGE_MS), past its 2 s interval, so a sweep page costs a poll and
    // a trailing page more (7 s); the largest listing (41 records) is 9 pages, 63 s a sweep. The sweep in flight,
    // the interval, the next sweep and a poll: 63 + 60 + 63 + 7 = 193 s.
    expect(PAGE_MS).toBe(700);
    const paged = () => {
      const w = world();
      for (let i = 0; i < 40; i++) {
        w.upstream.malformedEver.push({ id: 900_001 + i, raw: { id: 900_001 + i }, from: START, to: START + 500_000 });
      }
      return w;
    };
    expect(paged().reportedAfter(192_000)).toBeNull();
    expect(paged().reportedAfter(194_000)?.detail).toMatch(/after its bound \(193000 ms once healthy/);
  });

  it('grows, listed newest first while polls overrun, by the confirmation reads and the widest trailing reads', () => {
    // The paging above, listed newest first: once its listing is read, the sweep's deletion reads it again up to
    // MAX_CONFIRMATION_READS times and waits for the rest of the widest trailing read and one more, each of the
    // largest listing at a page per poll (7 s): 63 + 60 + 63 + 6 * 63 + 7 = 571 s.
    expect(MAX_CONFIRMATION_READS).toBe(4);
    const newestFirst = () => {
      const w = world(0, 'updated-desc');
      for (let i = 0; i < 40; i++) {
        w.upstream.malformedEver.push({ id: 900_001 + i, raw: { id: 900_001 + i }, from: START, to: START + 900_000 });
      }
      return w;
    };
    expect(newestFirst().reportedAfter(570_000)).toBeNull();
    expect(newestFirst().reportedAfter(572_000)?.detail).toMatch(/after its bound \(571000 ms once healthy/);
  });

  it('does not grow with records polls need not read', () => {
    const w = world();
    // The same 40 records, stamped a minute before the world starts: sweeps read them, polls do not, and polls
    // fit their interval: the sweeps keep their pace. Polls do not because a record stamped since (one a second
    // before the deletion) moved the watermark past them: this world never learns the present (no initial load is
    // committed), and until it does a quiet spell leaves the watermark at the newest record stamped before it.
    w.listed({
      id: 2_000,
      updated_date: START + GONE - 1_000,
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'APPROVED',
      headline: 'review 2000',
      helpful_votes: 0,
    });
    for (let i = 0; i < 40; i++) {
      w.listed({
        id: 1_000 + i,
        updated_date: START - 60_000,
        client_publication_status: 'APPROVED',
        pwr_publication_status: 'APPROVED',
        headline: `review ${1_000 + i}`,
        helpful_votes: 0,
      });
    }
    expect(w.reportedAfter(101_000)?.detail).toMatch(/^review 5 deleted upstream at 30000 ms .* after its bound/);
  });

  it('grows while a Date header behind the data rules the present, and nothing is stamped before it', () => {
    // The world above with the header 30 minutes behind the data: no record is stamped at or before the present
    // the bridge has (the header's time, until three reviews are sampled after an initial load, and none is
    // committed here), so its watermark stays behind them all and every poll reads the 42 records: 9 pages of 5,
    // 6.3 s against a 2 s interval; a sweep page costs a poll and a trailing page more (7.7 s), the largest
    // listing is 9 pages (69.3 s a sweep): 69.3 + 60 + 69.3 + 7.7 = 206.3 s.
    const behind = () => {
      const w = world(-30 * 60_000);
      for (const id of [2_000, ...Array.from({ length: 40 }, (_, i) => 1_000 + i)]) {
        w.listed({
          id,
          updated_date: id === 2_000 ? START + GONE - 1_000 : START - 60_000,
          client_publication_status: 'APPROVED',
          pwr_publication_status: 'APPROVED',
          headline: `review ${id}`,
          helpful_votes: 0,
        });
      }
      return w;
    };
    // In time: the checks go on to the state topic, which this world does not write.
    expect(behind().reportedAfter(206_000)?.property).toBe('state topic equals the upstream');
    expect(behind().reportedAfter(207_000)?.detail).toMatch(/after its bound \(206300 ms once healthy/);
  });

  it('is not held by a record with a readable id', () => {
    const w = world();
    w.upstream.malformedEver.push({
      id: 900_001,
      raw: { id: 900_001, rating: 'x' },
      from: START + GONE + 50_000,
      to: START + GONE + 70_000,
    });
    expect(w.reportedAfter(101_000)?.property).toBe('every final state reached');
  });
});
