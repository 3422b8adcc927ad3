import { describe, expect, it, onTestFinished } from 'vitest';
import { bridgeForTest, eventually, initialLoadDone, simulatorForTest, testEnv } from '../helpers/bridge.js';
import { bridgeMetric, bridgeMetricSum, deliveredStatuses } from '../helpers/freshness.js';
import type { Simulator } from '../../src/simulator/index.js';
import type { FreshnessReport } from '../../src/core/freshness-report.js';
import { runCli } from '../helpers/processes.js';

// Freshness whatever the data's clock does, at default poll settings (POLL_INTERVAL_MS 1 s, POLL_OVERLAP_MS 5 min,
// FRESHNESS_BOUND_MS 30 s) and with no scheduled sweep, so that whatever arrives came from polls and trailing reads:
// - single status changes of which every tenth shows 10-20 s after its updated_date (a search index behind the
//   primary: the listing shows the review as it was until then): all delivered, the late ones by polls (once the
//   lookback learned them) or trailing reads, counted by finder;
// - one change stamped 4 minutes ahead and one 23 hours ahead (writers whose clocks run fast), then single
//   changes: every one delivered (the watermark stays at the upstream's present).
// Delays are printed, not asserted (a loaded machine); the waits are far below any sweep.

const late = 'reviews_bridge_late_changes_total';

/** A bridge at default poll settings, no scheduled sweep, past its initial load. */
async function defaultBridge(sim: Simulator) {
  const env = testEnv(sim.url, { SWEEP_INTERVAL_MS: '0', UPSTREAM_RATE_LIMIT_RPS: '10' });
  for (const name of ['POLL_OVERLAP_MS', 'POLL_INTERVAL_MS']) delete env[name];
  const b = await bridgeForTest(env);
  await initialLoadDone(b);
  const sweptAt = (await b.store.checkpoint()).lastSweepAt;
  return { b, sweptAt, env };
}

/** The other client status than the review's: always a real change. */
function flip(sim: Simulator, id: number): string {
  return sim.control.get(id)?.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('freshness whatever the data clock does', () => {
  it('60 single changes, every tenth shown 10-20 s late: all delivered by polls and trailing reads, no sweep', async () => {
    const sim = await simulatorForTest({ reviewCount: 500, seed: 45 });
    const { b, sweptAt } = await defaultBridge(sim);
    const expected = new Map<number, string>();
    const shown = new Map<number, number>();
    const shows: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      const id = 10 + i;
      const to = flip(sim, id);
      expected.set(id, to);
      if (i % 10 === 5) {
        // Changed now, shown by the listing only 10-20 s later, with the stamp it had now.
        const lagMs = 10_000 + ((i * 1_700) % 10_000);
        shows.push(
          pause(lagMs).then(() => {
            sim.control.setStatusLate(id, { client: to }, lagMs);
            shown.set(id, Date.now());
          }),
        );
      } else sim.control.setStatus(id, { client: to });
      // One change every 300 ms (the pace is no part of the claim; it keeps the file short).
      await pause(300);
    }
    await Promise.all(shows);
    const arrived = new Map<number, number>();
    await eventually(
      async () => {
        const finals = await deliveredStatuses(b);
        for (const [id, to] of expected) if (finals.get(id) === to && !arrived.has(id)) arrived.set(id, Date.now());
        return arrived.size === expected.size ? true : undefined;
      },
      120_000,
      'every change, the late ones included, to reach Kafka',
    );
    expect((await b.store.checkpoint()).lastSweepAt).toBe(sweptAt);
    expect(await bridgeMetric(b, late, 'found_by="sweep"')).toBe(0);
    // Each late one counted by its finder: a trailing read, or a poll once the lookback learned such lateness.
    const trailing = await bridgeMetricSum(b, late, 'found_by="trailing_');
    const byPoll = await bridgeMetric(b, late, 'found_by="poll"');
    const delays = [...shown].map(([id, at]) => ((arrived.get(id) ?? NaN) - at) / 1000);
    console.log(`late changes: found by trailing reads ${trailing}, by polls ${byPoll}; seconds after showing`, delays);
    expect(trailing).toBeGreaterThanOrEqual(1);
    expect(trailing + byPoll).toBeGreaterThanOrEqual(shown.size);
  }, 240_000);

  it('changes stamped 4 minutes and 23 hours ahead hide no later change', async () => {
    const sim = await simulatorForTest({ reviewCount: 500, seed: 46 });
    const { b, sweptAt } = await defaultBridge(sim);
    const expected = new Map<number, string>();
    for (const [id, aheadMs] of [
      [5, 240_000],
      [6, 23 * 3_600_000],
    ] as const) {
      const to = flip(sim, id);
      const review = sim.control.setStatusLate(id, { client: to }, -aheadMs);
      expect(review.updated_date as number).toBeGreaterThan(Date.now() + aheadMs - 60_000);
      expected.set(id, to);
    }
    for (let i = 0; i < 30; i++) {
      const id = 100 + i;
      const to = flip(sim, id);
      sim.control.setStatus(id, { client: to });
      expected.set(id, to);
      await pause(300);
    }
    await eventually(
      async () => {
        const finals = await deliveredStatuses(b);
        return [...expected].every(([id, to]) => finals.get(id) === to) ? true : undefined;
      },
      60_000,
      'every change after the ones stamped ahead to reach Kafka',
    );
    expect((await b.store.checkpoint()).lastSweepAt).toBe(sweptAt);
    // The watermark stays within the lookback floor of the present, not at either stamp ahead.
    expect((await b.store.checkpoint()).watermark!).toBeLessThan(Date.now() + 60_000);
  }, 180_000);

  it("status and /readyz show the bound that holds: the configured one, the widest tier's, each tier with its share", async () => {
    const sim = await simulatorForTest({ reviewCount: 300, seed: 47 });
    const { b, env } = await defaultBridge(sim);
    // A change a second, so that polls price the tiers' shares at a density they saw.
    let n = 0;
    const changes = setInterval(() => {
      const id = 20 + (n++ % 200);
      sim.control.setStatus(id, { client: flip(sim, id) });
    }, 1_000);
    onTestFinished(() => clearInterval(changes));
    const ready = await eventually(
      async () => {
        const body = (await (await fetch(`${b.app.ops.url}/readyz`)).json()) as { freshness?: FreshnessReport | null };
        const f = body.freshness;
        return f && f.holdingBoundSeconds !== null && f.tiers[0]!.shareRps !== null ? f : undefined;
      },
      60_000,
      'a trailing read and a priced poll shown in /readyz',
    );
    expect(ready).toMatchObject({ configuredBoundSeconds: 30, trailingBudgetRps: expect.any(Number) });
    expect(ready.tiers.map((t) => [t.tier, t.coverSeconds, t.periodSeconds])).toEqual([
      [1, 18.75, 4.688],
      [2, 75, 18.75],
      [3, 300, 30],
    ]);
    // At one change a second the budget carries every tier: each keeps about its period, and the whole holds.
    for (const t of ready.tiers) expect(t.short).toBe(false);
    expect(ready.holdingBoundSeconds!).toBeLessThan(60);
    console.log('freshness in /readyz', JSON.stringify(ready));
    // status (another process) reads the leader's report from Redis: the same shape, by account.
    const status = await eventually(
      async () => {
        const s = JSON.parse(await runCli('status', env)) as { freshness: FreshnessReport | null };
        return s.freshness && s.freshness.holdingBoundSeconds !== null ? s.freshness : undefined;
      },
      60_000,
      "the leader's freshness report in status",
    );
    expect(status.configuredBoundSeconds).toBe(30);
    expect(status.tiers.map((t) => t.tier)).toEqual([1, 2, 3]);
    expect(status.tiers.every((t) => t.shareRps !== null && t.demandRps !== null)).toBe(true);
  }, 180_000);
});
