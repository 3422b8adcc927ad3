import { afterEach, describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../src/core/events.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { eventually, initialLoadDone, pollsCommitted, startTestBridge, testEnv } from '../helpers/bridge.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { schemaErrors } from '../helpers/schemas.js';

// The whole bridge against the simulator, a real Kafka and a real Redis; events read back by a real consumer
// and checked against the JSON Schemas with ajv.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function simulator(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const sim = await startSimulator({ rateLimit: null, ...options });
  cleanups.push(() => sim.close());
  return sim;
}

async function bridge(env: Record<string, string>, options: Parameters<typeof startTestBridge>[1] = {}) {
  const b = await startTestBridge(env, options);
  cleanups.push(() => b.stop());
  return b;
}

function events(messages: ReadMessage[]): ReviewEvent[] {
  return messages.map((m) => {
    const event = JSON.parse(m.value) as ReviewEvent;
    expect(schemaErrors(event), `${m.topic} ${m.value.slice(0, 200)}`).toEqual([]);
    expect(m.key).toBe(event.subject);
    expect(m.headers['content-type']).toBe('application/cloudevents+json');
    return event;
  });
}

describe('bridge end to end', () => {
  it('initial load: exactly N created events, each once, marked initial and schema-valid', async () => {
    const n = 450;
    const sim = await simulator({ reviewCount: n, seed: 7 });
    const b = await bridge(testEnv(sim.url));
    await initialLoadDone(b);
    const created = events(await readAll([b.topics.created], { untilCount: n, idleMs: 1_000, timeoutMs: 60_000 }));
    expect(created).toHaveLength(n);
    expect(new Set(created.map((e) => e.subject)).size).toBe(n);
    expect(new Set(created.map((e) => e.id)).size).toBe(n);
    expect(
      created.every((e) => e.type === 'review.created' && e.sequence === 1 && e.data.detection === 'initial'),
    ).toBe(true);
    expect(await b.store.size()).toBe(n);
  });

  it('status changes become status_changed events with from and to, within a poll interval or two', async () => {
    const sim = await simulator({ reviewCount: 120, seed: 8 });
    const b = await bridge(testEnv(sim.url));
    await initialLoadDone(b);
    const before5 = sim.control.get(5)!;
    sim.control.setStatus(5, { client: 'REJECTED' });
    sim.control.setStatus(9, { client: 'APPROVED', pwr: 'REJECTED' });
    const created = sim.control.createReview({ headline: 'fresh' });
    const changed = events(await readAll([b.topics.statusChanged], { untilCount: 2, timeoutMs: 10_000 }));
    const e5 = changed.find((e) => e.subject === '5');
    expect(e5?.type).toBe('review.status_changed');
    if (e5?.type !== 'review.status_changed') throw new Error('unreachable');
    expect(e5.data.status.client_publication_status).toEqual({
      from: before5.client_publication_status,
      to: 'REJECTED',
    });
    expect(e5.data.detection).toBe('incremental');
    expect(e5.sequence).toBe(2);
    const e9 = changed.find((e) => e.subject === '9');
    if (e9?.type !== 'review.status_changed') throw new Error('missing event of review 9');
    expect(e9.data.status.pwr_publication_status.to).toBe('REJECTED');
    const createdEvents = events(await readAll([b.topics.created], { untilCount: 121, timeoutMs: 10_000 }));
    const fresh = createdEvents.find((e) => e.subject === String(created.id));
    expect(fresh?.data.detection).toBe('incremental');
  });

  it('edits that do not move updated_date become updated events after a sweep', async () => {
    const sim = await simulator({ reviewCount: 150, seed: 9 });
    const b = await bridge(testEnv(sim.url));
    await initialLoadDone(b);
    const rating = Number(sim.control.get(17)!.rating ?? 0);
    sim.control.edit(17, { comments: 'edited text', rating: (rating % 5) + 1 });
    sim.control.edit(140, { helpful_votes: 999 });
    // Polls cannot see these edits; let two of them run to prove it, then ask for a sweep.
    await pollsCommitted(b, 2);
    expect(await readAll([b.topics.updated], { timeoutMs: 5_000 })).toHaveLength(0);
    await b.store.requestSweep();
    const updated = events(await readAll([b.topics.updated], { untilCount: 2, idleMs: 500, timeoutMs: 20_000 }));
    expect(updated.map((e) => e.subject).sort()).toEqual(['140', '17']);
    expect(updated.find((e) => e.subject === '17')!.data.changed_fields).toEqual(['rating', 'comments']);
    expect(updated.every((e) => e.data.detection === 'sweep' && e.sequence === 2)).toBe(true);
  });

  it('a failure between the Kafka commit and the Redis commit publishes nothing twice and loses nothing', async () => {
    const sim = await simulator({ reviewCount: 80, seed: 10 });
    let crashes = 0;
    const b = await bridge(testEnv(sim.url), {
      beforeCommit: (page) => {
        // Fail the Redis commit of the first page that carries review 33's status change (Kafka has it already).
        if (crashes === 0 && page.reviews.some((r) => r.id === 33 && r.client_publication_status === 'REJECTED')) {
          crashes++;
          throw new Error('injected crash between publish and commit');
        }
      },
    });
    await initialLoadDone(b);
    sim.control.setStatus(33, { client: 'REJECTED' });
    // The page Kafka committed is written to Redis from what Kafka holds before anything is read again: never
    // derived and published a second time (earlier versions re-published it, with the same id).
    await eventually(
      async () => ((await b.store.read([33])).get(33)?.sequence === 2 ? true : undefined),
      20_000,
      "review 33's status change in Redis",
    );
    await pollsCommitted(b, 2);
    expect(crashes).toBe(1);
    const changed = events(
      await readAll([b.topics.statusChanged], { untilCount: 1, idleMs: 1_000, timeoutMs: 20_000 }),
    );
    const of33 = changed.filter((e) => e.subject === '33');
    expect(of33).toHaveLength(1);
    expect(of33[0]!.sequence).toBe(2);
    const entry = (await b.store.read([33])).get(33);
    expect(entry?.client).toBe('REJECTED');
    expect(entry?.sequence).toBe(2);
  });

  it('a restart in the middle of the initial load resumes it without starting over', async () => {
    const n = 1_200;
    const sim = await simulator({ reviewCount: n, seed: 11 });
    let pages = 0;
    const b = await bridge(testEnv(sim.url, { UPSTREAM_RATE_LIMIT_RPS: '20' }), {
      beforeCommit: () => {
        pages++;
      },
    });
    await eventually(async () => (pages >= 4 ? true : undefined), 30_000, 'a few pages');
    await b.restart();
    await initialLoadDone(b);
    const created = events(await readAll([b.topics.created], { untilCount: n, idleMs: 1_000, timeoutMs: 60_000 }));
    expect(new Set(created.map((e) => e.subject)).size).toBe(n);
    // Re-processed pages (at most the one in flight and those after the last cursor commit) repeat their ids.
    const byId = new Map<string, ReviewEvent>();
    for (const e of created) {
      const seen = byId.get(e.id);
      if (seen) expect(e).toEqual(seen);
      byId.set(e.id, e);
    }
    expect(created.length).toBeLessThan(n + 500);
    expect(byId.size).toBe(n);
  });

  it('malformed records go to the dead-letter topic with a reason and the pass goes on', async () => {
    const sim = await simulator({ reviewCount: 300, seed: 12, faults: { malformedRate: 0.02 } });
    const b = await bridge(testEnv(sim.url));
    await initialLoadDone(b);
    const dead = await readAll([b.topics.deadLetter], { idleMs: 500, timeoutMs: 10_000 });
    expect(dead.length).toBeGreaterThan(0);
    const created = await readAll([b.topics.created], { idleMs: 500, timeoutMs: 10_000 });
    // Created events counted by review: on a replicated Redis a commit not confirmed in time re-publishes its page
    // (same ids); dead letters are remembered in Redis and not sent twice.
    expect(new Set(created.map((m) => m.key)).size + dead.length).toBe(300);
    for (const m of dead) {
      const body = JSON.parse(m.value) as { reason: string; record: unknown };
      expect(body.reason.length).toBeGreaterThan(0);
      expect(body.record).toBeTruthy();
      expect(String(m.headers['dlq-reason'])).toBe(body.reason);
      expect(String(m.headers['dlq-reason'])).not.toMatch(/@/);
    }
    // A sweep re-reads the same bad records: they are not dead-lettered a second time.
    const before = (await b.store.checkpoint()).lastSweepAt;
    await b.store.requestSweep();
    await eventually(
      async () => ((await b.store.checkpoint()).lastSweepAt !== before ? true : undefined),
      20_000,
      'sweep',
    );
    expect(await readAll([b.topics.deadLetter], { idleMs: 500, timeoutMs: 10_000 })).toHaveLength(dead.length);
  });
});
