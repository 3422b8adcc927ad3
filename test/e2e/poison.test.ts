import { afterEach, describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../src/core/events.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { eventually, pollsCommitted, startTestBridge, testEnv, type TestBridge } from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';

// Issue 9: records that are valid JSON with absurd content (a 3 MB text, updated_date 2^50, created_date 1e16, a
// field nested 3,000 levels deep, __proto__/constructor keys) appear in a running upstream. Each must cost only
// itself: polls keep committing, other reviews' changes are delivered, each bad record is dead-lettered once.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(): Promise<{ sim: Simulator; b: TestBridge }> {
  const sim = await startSimulator({ rateLimit: null, reviewCount: 100, seed: 21 });
  cleanups.push(() => sim.close());
  const b = await startTestBridge(testEnv(sim.url));
  cleanups.push(() => b.stop());
  await eventually(async () => ((await b.store.checkpoint()).initialDone ? true : undefined), 60_000, 'initial load');
  return { sim, b };
}

describe('poisoned records (issue 9)', () => {
  it('are dead-lettered once each with their kind while polls go on and other changes are delivered', async () => {
    const { sim, b } = await start();
    const poisoned = sim.control.addPoisonReviews();
    const client5 = sim.control.get(5)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    sim.control.setStatus(5, { client: client5 });

    const changed = await readAll([b.topics.statusChanged], { untilCount: 1, timeoutMs: 20_000 });
    expect(changed.map((m) => (JSON.parse(m.value) as ReviewEvent).subject)).toEqual(['5']);

    // The poisoned records stay in the overlap window (5 s) for many polls: every later poll commits, and a change
    // made now is still delivered.
    const now = Date.now();
    await pollsCommitted(b, 1, now);
    const pwr6 = sim.control.get(6)!.pwr_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    sim.control.setStatus(6, { pwr: pwr6 });
    const later = await readAll([b.topics.statusChanged], { untilCount: 2, timeoutMs: 20_000 });
    expect(later.map((m) => m.key).sort()).toEqual(['5', '6']);
    // Polls still commit, poll after poll, while the bad records stay in the window.
    await pollsCommitted(b, 3);

    const dead = await readAll([b.topics.deadLetter], { untilCount: 5, idleMs: 1_000, timeoutMs: 20_000 });
    const byKey = new Map(dead.map((m) => [m.key, JSON.parse(m.value) as Record<string, unknown>]));
    expect(dead).toHaveLength(5);
    expect(poisoned.map((p) => [p.kind, byKey.get(String(p.id))?.reason])).toEqual([
      ['huge-text', 'string_too_long'],
      ['far-future-updated', 'date_out_of_range'],
      ['far-created', 'date_out_of_range'],
      ['deep-nesting', 'too_deep'],
      ['proto-keys', 'forbidden_key'],
    ]);
    // Neither the 3 MB text nor the deep field travel to Kafka; the small ones carry their record.
    expect(byKey.get(String(poisoned[0]!.id))).toMatchObject({ record: null, record_omitted: { reason: 'too_large' } });
    expect(byKey.get(String(poisoned[3]!.id))).toMatchObject({ record: null, record_omitted: { reason: 'too_deep' } });
    expect(byKey.get(String(poisoned[1]!.id))!.record).toMatchObject({ updated_date: 2 ** 50 });
    // No event of a poisoned review, and the watermark never passed now.
    const created = await readAll([b.topics.created], { idleMs: 500, timeoutMs: 10_000 });
    const poisonedIds = new Set(poisoned.map((p) => String(p.id)));
    expect(created.filter((m) => poisonedIds.has(m.key ?? ''))).toEqual([]);
    expect((await b.store.checkpoint()).watermark ?? 0).toBeLessThanOrEqual(Date.now());
  });
});
