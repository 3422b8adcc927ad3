import { describe, expect, it } from 'vitest';
import { Passes } from '../../../src/bridge/passes/index.js';
import type { Page } from '../../../src/upstream/types.js';
import { FakeSink, FakeSnapshot, FakeSource, page, review, silentLogger, testMetrics } from '../../helpers/fakes.js';

// Incremental polls on the data's own clock: the watermark is the largest updated_date committed, the lookback is
// learned from changes that become visible late, and what a sweep finds beyond it is counted.

const T = 1_800_000_000_000;
const signal = new AbortController().signal;

/**
 * A source whose pages carry the upstream's time (its Date header) `skewMs` away from the data's clock; a test whose
 * changes are stamped ahead of the fake clock sets it past them (no watermark passes the upstream's present).
 */
class ClockedSource extends FakeSource {
  /** Runs as each page is served (a test moves its clock: the poll pages that long). */
  onPage: () => void = () => undefined;

  constructor(
    pages: Page[],
    public upstreamTime: number,
  ) {
    super(pages);
  }

  upstreamNow(): number {
    return this.upstreamTime;
  }

  // An incremental listing holds only the reviews changed since its updated_date, as the upstream's does.
  override pages(options: Parameters<FakeSource['pages']>[0]): AsyncIterable<Page> {
    const since = options.kind === 'incremental' ? options.updatedSince : undefined;
    if (since === undefined) return super.pages(options);
    this.requests.push(options);
    const served = this.pagesToServe
      .map((p) => ({ ...p, reviews: p.reviews.filter((r) => r.updated_date >= since) }))
      .filter((p) => p.reviews.length > 0);
    const onPage = () => this.onPage();
    return (async function* () {
      for (const p of served) {
        onPage();
        yield p;
      }
    })();
  }
}

function setup(source: FakeSource, overlapMs = 300_000) {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  let now = T;
  const passes = new Passes(
    {
      snapshot,
      sink,
      metrics,
      logger: silentLogger,
      eventSource: 'urn:test',
      initialLoadMode: 'mark',
      clock: () => now,
    },
    source,
    {
      overlapMs,
      polls: { intervalMs: 1_000, lookback: 'learned', lookbackFloorMs: 1_000 },
      metrics,
      deleteMaxFraction: null,
      account: 'test',
    },
  );
  const metric = async (name: string, labels = '') => {
    const text = await metrics.registry.metrics();
    const line = text.split('\n').find((l) => l.startsWith(`reviews_bridge_${name}{`) && l.includes(labels));
    return line === undefined ? undefined : Number(line.split(' ').at(-1));
  };
  return { passes, snapshot, sink, metric, advance: (ms: number) => (now += ms) };
}

const at = (p: Page, upstreamAt: number): Page => ({ ...p, upstreamAt });

describe('polls on the data clock', () => {
  it('the initial load and polls take their watermark from the data, not from a Date header 5 minutes ahead', async () => {
    const dataNow = T;
    const source = new ClockedSource(
      [at(page([review(1, { updated_date: dataNow - 10 })]), dataNow + 300_000)],
      dataNow + 300_000,
    );
    const { passes, snapshot } = setup(source, 10_000);
    await passes.fullScan(1, signal);
    // Not the header's time: a change stamped dataNow + 1 (after the load) would be older than that.
    expect((await snapshot.checkpoint()).watermark).toBe(dataNow - 10);
    source.pagesToServe = [at(page([review(2, { updated_date: dataNow + 1 })]), dataNow + 300_001)];
    await passes.incremental(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(dataNow + 1);
  });

  it('a header 5 minutes behind the data caps the watermark at its time + the lookback floor, never raises it', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T - 300_000)], T - 300_000);
    const { passes, snapshot } = setup(source, 10_000);
    await passes.fullScan(1, signal);
    // The data runs 5 minutes ahead and no poll has learned its clock yet: the watermark stays the floor (1 s) past
    // the header: read again, never lost.
    expect((await snapshot.checkpoint()).watermark).toBe(T - 299_000);
  });

  it('the initial load finds a recent change when its first page is old, so polls do not read the account again', async () => {
    const old = at(page([review(1, { updated_date: T - 86_400_000 * 300 })], null, 'a'), T);
    const rest = at(page([review(2, { updated_date: T - 5_000 })], 'a'), T);
    const source = new ClockedSource([old, rest], T);
    const { passes, snapshot } = setup(source);
    const run = await passes.openFullScan(1, signal);
    await run.step();
    // The one-page incremental listing (the fake serves every listing the same pages) found review 2's date.
    expect((await snapshot.checkpoint()).watermark).toBe(T - 5_000);
    expect(source.requests.some((r) => r.kind === 'incremental' && r.updatedSince === T - 300_000)).toBe(true);
    await run.close();
  });

  it('polls start the learned lookback and their paging time before the watermark, and learn from a late change', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T + 120_000);
    const { passes, snapshot, metric, advance } = setup(source);
    await passes.fullScan(1, signal);
    source.requests.length = 0;
    source.pagesToServe = [page([review(5, { updated_date: T + 2_000 })])];
    await passes.incremental(1, signal);
    // The first poll of a leadership allows 30 s of a predecessor's paging; the lookback starts at the floor.
    expect(source.requests[0]!.updatedSince).toBe(T - 1_000 - 30_000);
    expect((await snapshot.checkpoint()).watermark).toBe(T + 2_000);
    expect(await metric('poll_lookback_seconds')).toBe(1);

    // A change stamped 0.8 s before what polls had covered becomes visible now: late, within this poll's reach.
    source.requests.length = 0;
    source.pagesToServe = [page([review(6, { updated_date: T + 1_200 })])];
    advance(500);
    await passes.incremental(1, signal);
    // The last poll paged in no time here (the fake clock stood still): only the lookback.
    expect(source.requests[0]!.updatedSince).toBe(T + 2_000 - 1_000);
    expect(await metric('late_changes_total', 'found_by="poll"')).toBe(1);
    // Twice the lateness seen.
    expect(await metric('poll_lookback_seconds')).toBe(1.6);
    source.requests.length = 0;
    source.pagesToServe = [];
    advance(500);
    await passes.incremental(1, signal);
    expect(source.requests[0]!.updatedSince).toBe(T + 2_000 - 1_600);
  });

  it('a change made while the last poll paged is not late: it neither counts nor grows the lookback', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T + 120_000);
    const { passes, metric, advance } = setup(source);
    await passes.fullScan(1, signal);
    // Polls that page for 800 ms; the first commits watermark T + 2000.
    source.pagesToServe = [page([review(5, { updated_date: T + 2_000 })])];
    source.onPage = () => advance(800);
    await passes.incremental(1, signal);
    // Review 6 changed while that poll paged, behind its cursor: 500 ms older than its watermark, not late.
    source.pagesToServe = [page([review(6, { updated_date: T + 1_500 })])];
    await passes.incremental(1, signal);
    expect((await metric('late_changes_total', 'found_by="poll"')) ?? 0).toBe(0);
    expect(await metric('poll_lookback_seconds')).toBe(1);
    // One 700 ms older than the watermark less that paging time was late.
    source.pagesToServe = [page([review(7, { updated_date: T + 2_000 - 800 - 700 })])];
    await passes.incremental(1, signal);
    expect(await metric('late_changes_total', 'found_by="poll"')).toBe(1);
    expect(await metric('poll_lookback_seconds')).toBe(1.4);
  });

  it('a sweep counts the changes polls missed (older than what they covered), not the ones they had not reached yet', async () => {
    const source = new ClockedSource(
      [at(page([review(1, { updated_date: T }), review(2, { updated_date: T })]), T)],
      T + 120_000,
    );
    const { passes, metric } = setup(source);
    await passes.fullScan(1, signal);
    source.pagesToServe = [page([review(3, { updated_date: T + 60_000 })])];
    await passes.incremental(1, signal);
    // Review 1 changed long before the watermark polls covered (visible only now); review 2 just now.
    source.pagesToServe = [
      page([
        review(1, { updated_date: T + 10_000, client_publication_status: 'APPROVED' }),
        review(2, { updated_date: T + 60_500, client_publication_status: 'APPROVED' }),
        review(3, { updated_date: T + 60_000 }),
      ]),
    ];
    await passes.fullScan(1, signal);
    expect(await metric('late_changes_total', 'found_by="sweep"')).toBe(1);
  });

  it('reads per change: reviews read by polls over the changes they found', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T);
    const { passes, metric } = setup(source);
    await passes.fullScan(1, signal);
    source.pagesToServe = [
      page([review(1, { updated_date: T }), review(2, { updated_date: T + 1 }), review(3, { updated_date: T + 2 })]),
    ];
    await passes.incremental(1, signal);
    // Three read, two new (review 1 was read again unchanged).
    expect(await metric('poll_reads_per_change')).toBe(1.5);
  });
});
