import { afterEach, describe, expect, it } from 'vitest';
import type { ReviewDeletedEvent, ReviewHeartbeatEvent } from '../../src/core/events.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import {
  eventually,
  initialLoadDone,
  sweepNow,
  pausedHeartbeats,
  startTestBridge,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { schemaErrors } from '../helpers/schemas.js';

// What the feed gives its consumers besides change events, end to end against the simulator, a real Kafka and a
// real Redis: deletions found by complete sweeps (and refused for a broken listing), pause/resume, heartbeats.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(reviewCount: number, env: Record<string, string> = {}) {
  const sim: Simulator = await startSimulator({ rateLimit: null, reviewCount, seed: 21 });
  cleanups.push(() => sim.close());
  const b: TestBridge = await startTestBridge(testEnv(sim.url, env));
  cleanups.push(() => b.stop());
  await initialLoadDone(b);
  return { sim, b };
}

describe('feed for consumers', () => {
  it('a review removed upstream gets exactly one review.deleted and a tombstone after the next complete sweep', async () => {
    const { sim, b } = await setup(300);
    sim.control.removeReview(10);
    sim.control.removeReview(200);
    await sweepNow(b, 60_000);
    await sweepNow(b, 60_000);
    const deleted = await readAll([b.topics.deleted], { untilCount: 2, idleMs: 1_000, timeoutMs: 20_000 });
    const events = deleted.map((m) => JSON.parse(m.value) as ReviewDeletedEvent);
    for (const e of events) expect(schemaErrors(e)).toEqual([]);
    expect(events.map((e) => [e.subject, e.sequence]).sort()).toEqual([
      ['10', 2],
      ['200', 2],
    ]);
    const state = await readAll([b.topics.state], { untilCount: 302, timeoutMs: 20_000 });
    const lastByKey = new Map(state.map((m) => [m.key, m.value]));
    expect(lastByKey.get('10')).toBe('');
    expect(lastByKey.get('200')).toBe('');
    expect(lastByKey.size).toBe(300);
    expect([...(await b.store.read([10, 11, 200])).keys()]).toEqual([11]);
  });

  it('a listing that silently drops half the reviews deletes nothing and counts a refused deletion', async () => {
    const { sim, b } = await setup(200);
    sim.control.setFaults({ dropRate: 0.5 });
    await sweepNow(b, 60_000);
    const text = await b.app.metrics.registry.metrics();
    expect(text).toMatch(/^reviews_bridge_deletions_refused_total\{[^}]*\} 1$/m);
    expect(await b.store.size()).toBe(200);
    sim.control.setFaults({ dropRate: 0 });
    const deleted = await readAll([b.topics.deleted], { timeoutMs: 10_000 });
    expect(deleted).toEqual([]);
  });

  it('pause stops upstream traffic within a poll interval; resume goes on with nothing lost', async () => {
    const { sim, b } = await setup(100, { HEARTBEAT_INTERVAL_MS: '1000' });
    await b.store.pause();
    await eventually(
      async () =>
        /^reviews_bridge_paused\{[^}]*\} 1$/m.test(await b.app.metrics.registry.metrics()) ? true : undefined,
      10_000,
      'the leader to see the pause',
    );
    const before = sim.control.stats().requests;
    const to = sim.control.get(7)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    sim.control.setStatus(7, { client: to });
    // An absence (no request while paused) is shown over turns of the paused leader's loop: three heartbeats sent
    // after the status change above that say paused (one a second at most; the paused loop looks every 500 ms).
    await pausedHeartbeats(b, 3);
    expect(sim.control.stats().requests).toBe(before);
    expect(await b.app.metrics.registry.metrics()).toMatch(/^reviews_bridge_paused\{[^}]*\} 1$/m);
    await b.store.resume();
    const changed = await readAll([b.topics.statusChanged], { untilCount: 1, timeoutMs: 15_000 });
    expect(changed.map((m) => m.key)).toEqual(['7']);
    expect(sim.control.stats().requests).toBeGreaterThan(before);
  });

  it('publishes heartbeats with the watermark, the last complete poll and the lease epoch', async () => {
    const { b } = await setup(20, { HEARTBEAT_INTERVAL_MS: '1000' });
    const beats = await readAll([b.topics.heartbeat], { untilCount: 3, timeoutMs: 15_000 });
    const events = beats.map((m) => JSON.parse(m.value) as ReviewHeartbeatEvent);
    for (const e of events) expect(schemaErrors(e)).toEqual([]);
    const last = events.at(-1)!;
    expect(last.data.lease_epoch).toBeGreaterThan(0);
    expect(last.data.watermark).not.toBeNull();
    expect(last.data.last_complete_poll).not.toBeNull();
    expect(last.data.paused).toBe(false);
  });
});

describe('resync', () => {
  it('re-reads chosen reviews: a real difference is published with detection resync, every row is refreshed', async () => {
    const { sim, b } = await setup(150);
    // An edit that does not move updated_date: polls cannot see it, a resync of the review does.
    sim.control.edit(42, { comments: 'edited without a new updated_date' });
    const request = { id: 'resync-1', requestedAt: Date.now(), scope: { kind: 'ids' as const, ids: [42, 43] } };
    await b.store.requestResync(request);
    const done = await eventually(
      async () => {
        const p = await b.store.passProgress();
        return p?.requestId === request.id && p.finishedAt !== null ? p : undefined;
      },
      30_000,
      'the resync to finish',
    );
    expect(done).toMatchObject({ kind: 'resync', seen: 2, estimatedTotal: 2 });
    const updated = await readAll([b.topics.updated], { untilCount: 1, idleMs: 500, timeoutMs: 10_000 });
    const event = JSON.parse(updated[0]!.value) as { subject: string; data: { detection: string } };
    expect(updated).toHaveLength(1);
    expect(event).toMatchObject({ subject: '42', data: { detection: 'resync' } });
    const state = await readAll([b.topics.state], { untilCount: 152, timeoutMs: 10_000 });
    const rows = state.filter((m) => m.key === '43').map((m) => JSON.parse(m.value) as Record<string, unknown>);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({ review_id: 43, sequence: 1, event_id: null, event_type: null });
    for (const m of state) expect(schemaErrors(JSON.parse(m.value), 'review.state')).toEqual([]);
  });
});
