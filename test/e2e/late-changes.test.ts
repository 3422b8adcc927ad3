import { describe, expect, it } from 'vitest';
import {
  bridgeForTest,
  eventually,
  initialLoadDone,
  pollsCommitted,
  simulatorForTest,
  sweepNow,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { bridgeMetric as metric, bridgeMetricSum, deliveredStatuses as statuses } from '../helpers/freshness.js';
import type { Simulator } from '../../src/simulator/index.js';

// Changes that become visible late (a long transaction commits a status change stamped when it began, after later
// changes were already listed): their updated_date is older than the time polls had covered. Polls learn how late
// changes arrive and look back twice the latest lateness seen (1 s at first); a change within that lookback is
// delivered by the next poll, one beyond it but within POLL_OVERLAP_MS by a trailing read (src/core/trailing.ts),
// one later still by the next sweep, and all are counted in reviews_bridge_late_changes_total by who found them. Lateness is set against the checkpoint's watermark (the
// largest updated_date committed), which does not move while nothing else changes, so each change is exactly as late
// as the test says.

/**
 * A bridge at default lookback settings (POLL_OVERLAP_MS 5 min) past its initial load, its watermark on now;
 * `env`: settings of the test's own.
 */
async function settledBridge(sim: Simulator, own: Record<string, string> = {}): Promise<TestBridge> {
  const env = testEnv(sim.url, own);
  delete env.POLL_OVERLAP_MS;
  const b = await bridgeForTest(env);
  await initialLoadDone(b);
  // One ordinary change brings the watermark (the data's clock) to now.
  const stamp = sim.control.setStatus(1, { client: 'REJECTED' }).updated_date as number;
  await eventually(
    async () => (((await b.store.checkpoint()).watermark ?? 0) >= stamp ? true : undefined),
    20_000,
    'the watermark to reach the ordinary change',
  );
  return b;
}

/** A status change stamped `latenessMs` before the committed watermark; resolves its review's new status. */
async function lateChange(sim: Simulator, b: TestBridge, id: number, latenessMs: number): Promise<string> {
  const watermark = (await b.store.checkpoint()).watermark!;
  // Always a real change: the other status than the one the review has.
  const to = sim.control.get(id)?.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
  const review = sim.control.setStatusLate(id, { client: to }, Date.now() - (watermark - latenessMs));
  expect(Math.abs((review.updated_date as number) - (watermark - latenessMs))).toBeLessThan(50);
  return review.client_publication_status as string;
}

const late = 'reviews_bridge_late_changes_total';

describe('late-visible changes', () => {
  it('by seconds: delivered by polls as the lookback learns them, counted found_by=poll', async () => {
    const sim = await simulatorForTest({ reviewCount: 300, seed: 38 });
    // Polls alone: a trailing read (its narrowest tier reads every few seconds) may reach a late change before the
    // next poll, and then it is counted found_by=trailing_1 (2 runs in 10 raced so); this test is about polls.
    const b = await settledBridge(sim, { FRESHNESS_BOUND_MS: '0' });
    const lookback = () => metric(b, 'reviews_bridge_poll_lookback_seconds');
    let learned = await lookback();
    expect(learned).toBe(1);
    // Each change 0.9 times the lookback late, so within what the polls learned from the ones before (twice the
    // latest lateness seen): the lookback grows with each.
    const expected: string[] = [];
    for (let i = 0; i < 5; i++) {
      expected.push(await lateChange(sim, b, 10 + i, Math.round(900 * learned)));
      await eventually(
        async () => ((await metric(b, late, 'found_by="poll"')) === i + 1 ? true : undefined),
        20_000,
        `late change ${i + 1} (${Math.round(900 * learned)} ms) found by a poll`,
      );
      // The lookback is set once the poll that found it has committed.
      await pollsCommitted(b, 2);
      const next = await lookback();
      expect(next).toBeGreaterThanOrEqual(learned);
      learned = next;
    }
    expect(learned).toBeGreaterThan(3);
    const finals = await statuses(b);
    for (const [i, status] of expected.entries()) expect(finals.get(10 + i)).toBe(status);
    expect(await metric(b, late, 'found_by="sweep"')).toBe(0);
  });

  it('by minutes: within POLL_OVERLAP_MS a trailing read delivers it, beyond it the next sweep, which the lookback learns', async () => {
    const sim = await simulatorForTest({ reviewCount: 300, seed: 39 });
    const b = await settledBridge(sim);
    // 2 minutes late: beyond the polls' lookback (1 s), within the widest trailing tier's (POLL_OVERLAP_MS, 5 min).
    const within = await lateChange(sim, b, 20, 120_000);
    await eventually(
      async () => ((await statuses(b)).get(20) === within ? true : undefined),
      90_000,
      'a trailing read to deliver the change 2 minutes late',
    );
    expect(await bridgeMetricSum(b, late, 'found_by="trailing_')).toBe(1);
    expect(await metric(b, late, 'found_by="poll"')).toBe(0);
    // 10 minutes late: beyond every trailing read. Two reads of the widest tier after it showed pass it by.
    const to = await lateChange(sim, b, 21, 600_000);
    const window = () => metric(b, 'reviews_bridge_trailing_window_seconds', 'tier="3"');
    for (let i = 0; i < 2; i++) {
      const before = await window();
      await eventually(async () => ((await window()) !== before ? true : undefined), 90_000, 'a widest-tier read');
    }
    expect((await statuses(b)).get(21)).toBeUndefined();
    await sweepNow(b);
    expect((await statuses(b)).get(21)).toBe(to);
    expect(await metric(b, late, 'found_by="sweep"')).toBe(1);
    // The sweep's lateness teaches the lookback as a poll's does: up to its ceiling, POLL_OVERLAP_MS (shown by the
    // next poll).
    await eventually(
      async () => ((await metric(b, 'reviews_bridge_poll_lookback_seconds')) === 300 ? true : undefined),
      20_000,
      'the next poll to look back POLL_OVERLAP_MS',
    );
  });
});
