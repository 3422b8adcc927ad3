import { describe, expect, it } from 'vitest';
import { Passes } from '../../../src/bridge/passes/index.js';
import { LeaderWork } from '../../../src/bridge/loop/leader-work.js';
import type { ListOptions, Page } from '../../../src/upstream/types.js';
import { FakeSink, FakeSnapshot, FakeSource, page, review, silentLogger, testMetrics } from '../../helpers/fakes.js';

// Each trailing tier its own share of the budget, through the leader's real steps: with the budget short, the
// widest tier's read of five minutes of changes takes over a minute of requests, and a change shown a few seconds
// late (tier 1's to find) must not wait for it. Before, the tiers read one at a time: tier 1 waited for tier 3's
// whole read (about 80 s here), though its own window is a few pages.

const T = 1_800_000_000_000;
const signal = new AbortController().signal;
/** Every request takes this long (a budget of 20 requests/s, whoever asks). */
const REQUEST_MS = 50;

/** A listing that serves what changed since the asked updated_date, a review a page, each request costing time. */
class MeteredSource extends FakeSource {
  metered = false;

  constructor(
    pages: Page[],
    private readonly clock: { now: number },
  ) {
    super(pages);
  }

  upstreamNow(): number {
    return this.clock.now;
  }

  override pages(options: ListOptions): AsyncIterable<Page> {
    this.requests.push(options);
    const since = options.updatedSince;
    const served = this.pagesToServe
      .map((p) => ({ ...p, reviews: p.reviews.filter((r) => since === undefined || r.updated_date >= since) }))
      .filter((p) => p.reviews.length > 0);
    const request = () => {
      if (this.metered) this.clock.now += REQUEST_MS;
      return this.clock.now;
    };
    return (async function* () {
      for (const p of served) yield { ...p, upstreamAt: request() };
      // The last, empty answer is a request too.
      request();
    })();
  }
}

function setup() {
  const clock = { now: T };
  // Five minutes and a half of history, three changes a second, each already known: trailing reads find nothing new
  // in it, but the widest tier's read of it takes about a minute of the budget.
  const history = Array.from({ length: 990 }, (_, i) =>
    page([review(10_000 + i, { updated_date: T - 330_000 + Math.round((i * 1_000) / 3) })]),
  );
  const source = new MeteredSource([...history, page([review(1, { updated_date: T })])], clock);
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  const passes = new Passes(
    {
      snapshot,
      sink,
      metrics,
      logger: silentLogger,
      eventSource: 'urn:test',
      initialLoadMode: 'mark',
      clock: () => clock.now,
    },
    source,
    {
      overlapMs: 300_000,
      polls: { intervalMs: 1_000, lookback: 'learned', lookbackFloorMs: 1_000, freshnessBoundMs: 30_000 },
      metrics,
      deleteMaxFraction: null,
      account: 'test',
    },
  );
  const work = new LeaderWork({
    passes,
    metrics,
    logger: silentLogger,
    timing: { pollIntervalMs: 1_000, sweepIntervalMs: 0, leaseTtlMs: 15_000 },
    clock: () => clock.now,
    releaseLease: async () => undefined,
  });
  const requests = async (tier: number) => {
    const text = await metrics.registry.metrics();
    const line = text
      .split('\n')
      .find((l) => l.startsWith('reviews_bridge_trailing_requests_total{') && l.includes(`tier="${tier}"`));
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };
  return { clock, source, passes, sink, work, requests };
}

describe('trailing tiers each with their share of the budget', () => {
  it("a change shown 8 s late is found by tier 1 while tier 3's long read goes on", async () => {
    const { clock, source, passes, sink, work, requests } = setup();
    await passes.fullScan(1, signal);
    // A leadership's first polls reach far back (a predecessor's paging is unknown): settled before the budget counts.
    for (let i = 0; i < 3; i++) await passes.incremental(1, signal);
    source.metered = true;
    const shownAt = T + 10_000;
    let shown = false;
    let eventsBefore = 0;
    let foundAt: number | null = null;
    let nextChangeAt = clock.now;
    let changes = 0;
    while (clock.now < T + 150_000 && foundAt === null) {
      if (!shown && clock.now >= shownAt) {
        // Changed at T + 2 s, shown by the listing only now, with that stamp: polls have covered past it.
        source.pagesToServe.push(page([review(1, { updated_date: T + 2_000, client_publication_status: 'APPROVED' })]));
        shown = true;
        eventsBefore = sink.events.length;
      }
      if (clock.now >= nextChangeAt) {
        // A change a second, on time: the watermark moves with the present, as on a live account.
        source.pagesToServe.push(page([review(5_000 + changes++, { updated_date: clock.now - 100 })]));
        nextChangeAt += 1_000;
      }
      const waitMs = await work.step(1, signal);
      clock.now += waitMs;
      if (shown && sink.events.slice(eventsBefore).some((e) => e.subject === '1')) foundAt = clock.now;
    }
    expect(foundAt).not.toBeNull();
    const delayS = (foundAt! - shownAt) / 1000;
    console.log(`found ${delayS} s after it showed`);
    // Tier 1's bound on a third of the trailing requests, not the wait for tier 3's read (about a minute here).
    expect(delayS).toBeLessThan(30);
    // What status shows: tier 1 holds its bound on its share; tier 3, whose first read still goes on, has none yet.
    const report = passes.freshness();
    expect(report.tiers[0]!.boundSeconds).toBeLessThan(30);
    expect(report.tiers[2]!.boundSeconds).toBeNull();
    // The tiers took the trailing requests in turn (equal shares before polls priced them): about a third each.
    const byTier = [await requests(1), await requests(2), await requests(3)];
    console.log('trailing requests by tier', byTier);
    const all = byTier.reduce((a, b) => a + b, 0);
    for (const n of byTier) expect(n / all).toBeGreaterThan(0.25);
  }, 60_000);
});
