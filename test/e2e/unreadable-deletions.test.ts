import { afterEach, describe, expect, it } from 'vitest';
import type { ReviewDeletedEvent, ReviewEvent } from '../../src/core/events.js';
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
import { openRedis, redisAddress } from '../helpers/topologies.js';
import { pollUntil } from '../helpers/wait.js';

// Deletion detection with records whose id cannot be read in the listing (issues 23 and 41), end to end against
// the simulator listing newest first, a real Kafka and a real Redis, read back by a read_committed consumer (the
// kafkajs default): persistent id-less records do not stop deletions, whatever the listing's order; a record that
// turns unreadable holds back only the reviews that went missing with it, visibly (log, metric, status); a review
// that comes back after its review.deleted continues its sequence.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(options: Parameters<typeof startSimulator>[0]) {
  const sim: Simulator = await startSimulator({ rateLimit: null, seed: 41, listingOrder: 'descending', ...options });
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

/** Every event of the review topics and review.deleted, by review id, as a read_committed consumer sees them. */
async function eventsOf(b: TestBridge, untilCount?: number) {
  const topics = [b.topics.created, b.topics.statusChanged, b.topics.updated, b.topics.deleted];
  const messages = await readAll(topics, { untilCount, idleMs: 1_000, timeoutMs: 20_000 });
  return messages.map((m) => JSON.parse(m.value) as ReviewEvent | ReviewDeletedEvent);
}

/** The last state-topic value per review id ('' for a tombstone). */
async function lastStates(b: TestBridge, untilCount: number) {
  const state = await readAll([b.topics.state], { untilCount, idleMs: 1_000, timeoutMs: 20_000 });
  return new Map(state.map((m) => [m.key, m.value]));
}

describe('deletion detection with records whose id cannot be read, newest-first listing', () => {
  it('deletes each removed review once, with a tombstone, after the next sweep; a comeback continues its sequence', async () => {
    // Reviews 50, 120 and 360 are listed without their id from the start, on every page read after. (Three
    // removals out of 397 stay under the tests' DELETE_MAX_FRACTION of 1 %.)
    const { sim, b, env, lines } = await setup({ reviewCount: 400, faults: { idless: [50, 120, 360] } });
    for (const id of [10, 200, 399]) sim.control.removeReview(id);
    await sweepNow(b, 60_000);
    const deleted = (await eventsOf(b)).filter((e) => e.type === 'review.deleted');
    expect(deleted.map((e) => e.subject).sort()).toEqual(['10', '200', '399']);
    expect(deleted.map((e) => e.sequence)).toEqual([2, 2, 2]);
    const states = await lastStates(b, 397 + 3);
    for (const id of ['10', '200', '399']) expect(states.get(id)).toBe('');
    for (const id of ['50', '120', '360']) expect(states.has(id)).toBe(false);
    expect(deferrals(lines)).toEqual([]);
    expect(await b.app.metrics.registry.metrics()).toMatch(
      /^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 0$/m,
    );
    expect((await b.store.checkpoint()).unreadable).toHaveLength(3);

    // Redis loses every key of the account: the leader restores it from the Kafka changelog, with what deletion
    // detection remembers of the unreadable records and the sequence of each review.deleted.
    const redis = openRedis(redisAddress(env));
    cleanups.push(async () => void (await redis.quit()));
    const keys = await redis.keys(`${env.REDIS_KEY_PREFIX}:{${env.BRIDGE_ACCOUNT}}:*`);
    expect(keys.length).toBeGreaterThan(0);
    await redis.del(...keys);
    const restored = await pollUntil(
      async () => {
        const ckpt = await b.store.checkpoint();
        const gone = await b.store.goneSequences([200]);
        return ckpt.unreadableCandidates !== null && gone.get(200) === 2 ? ckpt : undefined;
      },
      { timeoutMs: 60_000, what: 'the restore from the changelog', ignoreErrors: true },
    );
    expect(restored.unreadable).toHaveLength(3);
    expect(Object.values(restored.unreadableCandidates ?? {})).toEqual([[], [], []]);

    // Review 200 is listed again: the next sweep creates it after its review.deleted, not at sequence 1.
    sim.control.restoreReview(200);
    await sweepNow(b, 60_000);
    const events = await eventsOf(b);
    const of200 = events
      .filter((e) => e.subject === '200')
      .sort((x, y) => x.sequence - y.sequence)
      .map((e) => [e.type, e.sequence]);
    expect(of200).toEqual([
      ['review.created', 1],
      ['review.deleted', 2],
      ['review.created', 3],
    ]);
    // Nothing else happened: one review.deleted each, no event twice.
    expect(events.filter((e) => e.type === 'review.deleted')).toHaveLength(3);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect((await b.store.read([200])).get(200)?.sequence).toBe(3);
    expect(JSON.parse((await lastStates(b, 397 + 3 + 1)).get('200') ?? '{}')).toMatchObject({ sequence: 3 });
  });

  it('a review turning unreadable holds back only what went missing with it, visibly, until its record changes', async () => {
    const { sim, b, env, lines } = await setup({ reviewCount: 300 });
    // In one sweep: review 50 is listed without its id from now on, review 200 is removed. The record may be
    // either: both are held back.
    sim.control.setFaults({ idless: [50] });
    sim.control.removeReview(200);
    await sweepNow(b, 60_000);
    expect((await eventsOf(b)).filter((e) => e.type === 'review.deleted')).toEqual([]);
    expect([...(await b.store.read([50, 200])).keys()].sort()).toEqual([200, 50]);
    const [deferral, ...more] = deferrals(lines);
    expect(more).toEqual([]);
    expect(deferral).toMatchObject({ reason: 'new_unreadable', unreadable: 1, new: 1, held: 2, undecided: 1 });
    const text = await b.app.metrics.registry.metrics();
    expect(text).toMatch(/^reviews_bridge_deletion_detection_deferred_total\{[^}]*reason="new_unreadable"[^}]*\} 1$/m);
    expect(text).toMatch(/^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 1$/m);
    const status = JSON.parse(await runCli('status', env)) as { deletionDetection: unknown };
    expect(status.deletionDetection).toEqual({
      deferredSweeps: 1,
      deferredReason: 'new_unreadable',
      unreadableRecords: 1,
      heldReviews: 2,
    });

    // The next sweep, record 50 still broken the same way, review 250 removed meanwhile: 250 is deleted (no new
    // record came with it); 50 and 200 stay held, and the sweep says so again.
    sim.control.removeReview(250);
    await sweepNow(b, 60_000);
    const second = (await eventsOf(b)).filter((e) => e.type === 'review.deleted');
    expect(second.map((e) => e.subject)).toEqual(['250']);
    expect(deferrals(lines).at(-1)).toMatchObject({ reason: 'ambiguous_unreadable', held: 2, deferredSweeps: 2 });

    // Review 50 is readable again (its record is gone): 200 is deleted by the next sweep, detection is back to 0.
    sim.control.setFaults({ idless: [] });
    await sweepNow(b, 60_000);
    const third = (await eventsOf(b)).filter((e) => e.type === 'review.deleted');
    expect(third.map((e) => e.subject).sort()).toEqual(['200', '250']);
    const states = await lastStates(b, 300 + 2);
    expect(states.get('200')).toBe('');
    expect(states.get('50')).not.toBe('');
    expect([...(await b.store.read([50, 200])).keys()]).toEqual([50]);
    expect(await b.app.metrics.registry.metrics()).toMatch(
      /^reviews_bridge_deletion_detection_deferred_sweeps\{[^}]*\} 0$/m,
    );
    expect(JSON.parse(await runCli('status', env)).deletionDetection).toMatchObject({
      deferredSweeps: 0,
      heldReviews: 0,
    });
  });
});
