import { afterEach, describe, expect, it } from 'vitest';
import { startExampleConsumer, type ExampleConsumer } from '../../examples/consumer.js';
import { parseReviewEvent, type RejectedTransition } from '../../src/consumer/kit.js';
import { createFieldPolicy, DEFAULT_FIELD_POLICY_SPEC } from '../../src/core/field-policy.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { eventually, startTestBridge, testEnv, type TestBridge } from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { schemaErrors } from '../helpers/schemas.js';
import { kafkaBrokers, uniqueName } from '../helpers/services.js';

// The consumer side of the feed end to end: the bridge against the simulator, a real Kafka and Redis. The state
// topic read from the beginning must equal the upstream, and the example consumer (examples/consumer.ts, a real
// consumer group) started after the initial load must end with the upstream's view, a removed review included.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const policy = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, null);

/** The upstream's current reviews, by id, as the bridge publishes them (under the default field policy). */
function upstream(sim: Simulator): Map<number, Record<string, unknown>> {
  const out = new Map<number, Record<string, unknown>>();
  for (let id = 1; id <= sim.control.reviewCount(); id++) {
    const review = sim.control.get(id);
    if (review) out.set(id, policy.applyToRecord(review));
  }
  return out;
}

/** The state topic read from the beginning: the last row of every key (a tombstone removes it). */
async function stateTable(b: TestBridge): Promise<Map<number, Record<string, unknown>>> {
  const rows = await readAll([b.topics.state], { idleMs: 500, timeoutMs: 30_000 });
  const table = new Map<number, Record<string, unknown>>();
  for (const m of rows) {
    const parsed = parseReviewEvent({ key: m.key, value: m.value === '' ? null : m.value, headers: m.headers });
    if (parsed.kind === 'tombstone') table.delete(parsed.reviewId);
    else if (parsed.kind === 'state') {
      expect(schemaErrors(parsed.state, 'review.state')).toEqual([]);
      table.set(parsed.reviewId, parsed.state.review);
    } else throw new Error(`unexpected ${parsed.kind} in the state topic`);
  }
  return table;
}

async function settled(b: TestBridge, after: number): Promise<void> {
  await eventually(
    async () => {
      const c = await b.store.checkpoint();
      return c.initialDone && (c.lastSweepAt ?? 0) >= after && (c.lastIncrementalAt ?? 0) > Date.now() - 2_000
        ? true
        : undefined;
    },
    60_000,
    'a sweep and a recent poll',
  );
}

describe('consumer kit end to end', () => {
  it('the state topic equals the upstream, and the example consumer converges on the upstream view', async () => {
    const sim = await startSimulator({ reviewCount: 300, seed: 21, rateLimit: null });
    cleanups.push(() => sim.close());
    const b = await startTestBridge(testEnv(sim.url));
    cleanups.push(() => b.stop());
    await eventually(async () => ((await b.store.checkpoint()).initialDone ? true : undefined), 60_000, 'initial load');

    // Changes before the consumer starts: statuses (some to REJECTED), an edit only a sweep sees, a new review, and
    // a status flip-flop (3: away and back between two polls) that only moves updated_date.
    const before3 = sim.control.get(3)!;
    sim.control.setStatus(3, { client: before3.client_publication_status === 'REJECTED' ? 'PENDING' : 'REJECTED' });
    sim.control.setStatus(3, { client: before3.client_publication_status as string });
    const a = notRejected(sim, 'pwr_publication_status', [10, 11]);
    sim.control.setStatus(a, { pwr: 'REJECTED' });
    const b2 = notRejected(sim, 'client_publication_status', [10, 11, a]);
    sim.control.setStatus(b2, { client: 'REJECTED' });
    sim.control.edit(10, { comments: 'edited before' });
    sim.control.createReview({ headline: 'new before' });
    const sweepAsked = Date.now();
    await b.store.requestSweep();
    await settled(b, sweepAsked);

    // Known gap: a change that only moves updated_date (statuses and content as before) produces no event, and the
    // state rows are derived from events, so review 3's row keeps its old updated_date (see README, For consumers).
    const expected = (): Map<number, Record<string, unknown>> => {
      const current = upstream(sim);
      current.set(3, { ...current.get(3)!, updated_date: before3.updated_date });
      return current;
    };
    expect(sim.control.get(3)!.updated_date).not.toBe(before3.updated_date);
    const state = await stateTable(b);
    expect(state).toEqual(expected());

    // The example consumer joins late: bootstrap from the state topic, then follow the change topics.
    const rejected: RejectedTransition[] = [];
    const consumer: ExampleConsumer = await startExampleConsumer({
      brokers: kafkaBrokers(),
      groupId: uniqueName('example-consumer'),
      topics: b.topics,
      onRejected: (t) => rejected.push(t),
      onForeign: (e) => {
        throw e;
      },
    });
    cleanups.push(() => consumer.stop());
    expect(consumer.bootstrapped).toBeGreaterThanOrEqual(301);
    expect(consumer.feed.live()).toEqual(expected());

    // Changes after it started: it sees them, and reacts to the transitions to REJECTED exactly once each.
    const c = notRejected(sim, 'client_publication_status', [10, 11, a, b2]);
    sim.control.setStatus(c, { client: 'REJECTED' });
    const d = notRejected(sim, 'pwr_publication_status', [10, 11, a, b2, c]);
    sim.control.setStatus(d, { pwr: 'REJECTED' });
    sim.control.edit(11, { headline: 'edited after' });
    sim.control.createReview({ headline: 'new after' });
    // A review removed upstream: the next complete sweep reports it, and the consumer's view drops it.
    sim.control.removeReview(20);
    const second = Date.now();
    await b.store.requestSweep();
    await settled(b, second);
    const final = expected();
    await eventually(
      async () => (equal(consumer.feed.live(), final) ? true : undefined),
      30_000,
      'consumer view = upstream',
    );
    expect(consumer.feed.live()).toEqual(final);
    expect(final.has(20)).toBe(false);
    expect(consumer.feed.reviews.get(20)).toMatchObject({ deleted: true, review: null });
    expect(await stateTable(b)).toEqual(final);
    // Exactly once each; the order across reviews is not defined (different partitions).
    expect(rejected.map((r) => [r.reviewId, r.field]).sort()).toEqual(
      [
        [c, 'client_publication_status'],
        [d, 'pwr_publication_status'],
      ].sort(),
    );
  });
});

/** A review (not in `taken`) whose field is not REJECTED yet, so that rejecting it is a real transition. */
function notRejected(sim: Simulator, field: 'client_publication_status' | 'pwr_publication_status', taken: number[]) {
  for (let id = 4; ; id++) if (!taken.includes(id) && sim.control.get(id)![field] !== 'REJECTED') return id;
}

function equal(a: Map<number, unknown>, b: Map<number, unknown>): boolean {
  try {
    expect(a).toEqual(b);
    return true;
  } catch {
    return false;
  }
}
