import { afterEach, describe, expect, it } from 'vitest';
import type { ReviewDeletedEvent } from '../../src/core/events.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import {
  capturedLogger,
  initialLoadDone,
  sweepNow,
  startTestBridge,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { runCli } from '../helpers/processes.js';

// Deletion detection with records whose id cannot be read in the listing (issue 23), end to end against the
// simulator, a real Kafka and a real Redis: a record that stays broken does not switch detection off; a record that
// turns unreadable defers one sweep, visibly (log, metric, status), and is never taken for a deleted review.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(options: Parameters<typeof startSimulator>[0]) {
  const sim: Simulator = await startSimulator({ rateLimit: null, seed: 23, ...options });
  cleanups.push(() => sim.close());
  const { logger, lines } = capturedLogger();
  const env = testEnv(sim.url);
  const b: TestBridge = await startTestBridge(env, {}, logger);
  cleanups.push(() => b.stop());
  await initialLoadDone(b);
  return { sim, b, env, lines };
}

const deferrals = (lines: Array<Record<string, unknown>>) =>
  lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('deletion detection deferred'));

describe('deletion detection with records whose id cannot be read', () => {
  it('a persistent id-less record does not stop deletions: each gets one review.deleted and a tombstone', async () => {
    // Review 50 is listed without its id from the start (the initial load sees it so), on every page read after.
    const { sim, b, lines } = await setup({ reviewCount: 300, faults: { idless: [50] } });
    sim.control.removeReview(10);
    sim.control.removeReview(200);
    await sweepNow(b, 60_000);
    await sweepNow(b, 60_000);
    const deleted = await readAll([b.topics.deleted], { untilCount: 2, idleMs: 1_000, timeoutMs: 20_000 });
    const events = deleted.map((m) => JSON.parse(m.value) as ReviewDeletedEvent);
    expect(events.map((e) => e.subject).sort()).toEqual(['10', '200']);
    const state = await readAll([b.topics.state], { untilCount: 301, timeoutMs: 20_000 });
    const lastByKey = new Map(state.map((m) => [m.key, m.value]));
    expect(lastByKey.get('10')).toBe('');
    expect(lastByKey.get('200')).toBe('');
    expect(lastByKey.has('50')).toBe(false);
    expect(deferrals(lines)).toEqual([]);
    const text = await b.app.metrics.registry.metrics();
    expect(text).toMatch(/^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 0$/m);
    expect((await b.store.checkpoint()).unreadable).toHaveLength(1);
  });

  it('a review turning unreadable defers the sweep visibly; the next sweep deletes only the deleted one', async () => {
    const { sim, b, env, lines } = await setup({ reviewCount: 300 });
    // In one sweep: review 50 is listed without its id from now on, review 200 is deleted.
    sim.control.setFaults({ idless: [50] });
    sim.control.removeReview(200);
    await sweepNow(b, 60_000);
    expect(await readAll([b.topics.deleted], { timeoutMs: 3_000 })).toEqual([]);
    expect([...(await b.store.read([50, 200])).keys()].sort()).toEqual([200, 50]);
    const [deferral, ...more] = deferrals(lines);
    expect(more).toEqual([]);
    expect(deferral).toMatchObject({ reason: 'new_unreadable', unreadable: 1, new: 1, deferredSweeps: 1 });
    const text = await b.app.metrics.registry.metrics();
    expect(text).toMatch(/^reviews_bridge_deletion_detection_deferred_total\{[^}]*reason="new_unreadable"[^}]*\} 1$/m);
    expect(text).toMatch(/^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 1$/m);
    const status = JSON.parse(await runCli('status', env)) as { deletionDetection: unknown };
    expect(status.deletionDetection).toEqual({
      deferredSweeps: 1,
      deferredReason: 'new_unreadable',
      unreadableRecords: 1,
    });

    // The next sweep, record 50 still broken the same way: 200 is reported deleted, 50 is kept.
    await sweepNow(b, 60_000);
    const deleted = await readAll([b.topics.deleted], { untilCount: 1, idleMs: 1_000, timeoutMs: 20_000 });
    expect(deleted.map((m) => m.key)).toEqual(['200']);
    const state = await readAll([b.topics.state], { untilCount: 301, timeoutMs: 20_000 });
    expect(new Map(state.map((m) => [m.key, m.value])).get('200')).toBe('');
    expect([...(await b.store.read([50, 200])).keys()]).toEqual([50]);
    expect(deferrals(lines)).toHaveLength(1);
    const after = await b.app.metrics.registry.metrics();
    expect(after).toMatch(/^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 0$/m);
    expect(JSON.parse(await runCli('status', env)).deletionDetection).toMatchObject({ deferredSweeps: 0 });
  });
});
