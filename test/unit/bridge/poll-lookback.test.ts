import { describe, expect, it } from 'vitest';
import { Passes } from '../../../src/bridge/passes/index.js';
import { PollState } from '../../../src/bridge/passes/poll-state.js';
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

/** `start`: the local clock's time at first (a test whose data runs ahead of T sets it at least that far). */
function setup(source: FakeSource, overlapMs = 300_000, freshnessBoundMs = 0, start = T) {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  let now = start;
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
      polls: { intervalMs: 1_000, lookback: 'learned', lookbackFloorMs: 1_000, freshnessBoundMs },
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

/** A second later on both clocks, a poll of a listing showing `reviews`. */
async function pollAfterSecond(
  bridge: Pick<ReturnType<typeof setup>, 'passes' | 'advance'>,
  source: ClockedSource,
  reviews: Page['reviews'],
): Promise<void> {
  bridge.advance(1_000);
  source.upstreamTime += 1_000;
  source.pagesToServe = [page(reviews)];
  await bridge.passes.incremental(1, signal);
}

describe('polls on the data clock', () => {
  it('the initial load and polls take their watermark from the data, not from a Date header 5 minutes ahead', async () => {
    const dataNow = T;
    const source = new ClockedSource(
      [at(page([review(1, { updated_date: dataNow - 10 })]), dataNow + 300_000)],
      dataNow + 300_000,
    );
    const { passes, snapshot, advance } = setup(source, 10_000);
    await passes.fullScan(1, signal);
    // Not the header's time: a change stamped dataNow + 1 (after the load) would be older than that.
    expect((await snapshot.checkpoint()).watermark).toBe(dataNow - 10);
    source.pagesToServe = [at(page([review(2, { updated_date: dataNow + 1 })]), dataNow + 300_001)];
    advance(1_000);
    await passes.incremental(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(dataNow + 1);
  });

  it('a header 5 minutes behind the data caps the watermark at its time, never raises it', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T - 300_000)], T - 300_000);
    const { passes, snapshot } = setup(source, 10_000);
    await passes.fullScan(1, signal);
    // The data runs 5 minutes ahead and no poll has learned its clock yet: the watermark stays at the header's time:
    // read again, never lost.
    expect((await snapshot.checkpoint()).watermark).toBe(T - 300_000);
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
    const { passes, snapshot, metric, advance } = setup(source, 300_000, 0, T + 120_000);
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
    const { passes, metric, advance } = setup(source, 300_000, 0, T + 120_000);
    await passes.fullScan(1, signal);
    // Polls that page for 800 ms; the first commits watermark T + 2000.
    source.pagesToServe = [page([review(5, { updated_date: T + 2_000 })])];
    source.onPage = () => advance(800);
    await passes.incremental(1, signal);
    // Review 6 changed while that poll paged, behind its cursor: 500 ms older than its watermark, not late. The
    // next poll is an interval later (the present it learns from review 6 stays past that watermark).
    source.pagesToServe = [page([review(6, { updated_date: T + 1_500 })])];
    advance(1_000);
    await passes.incremental(1, signal);
    expect((await metric('late_changes_total', 'found_by="poll"')) ?? 0).toBe(0);
    expect(await metric('poll_lookback_seconds')).toBe(1);
    // That poll found nothing newer than T + 2000, the data's present when it began or earlier: nothing made while
    // it paged is older. One 700 ms older than that was late by 700 ms, not by 700 ms less the paging time.
    source.pagesToServe = [page([review(7, { updated_date: T + 2_000 - 700 })])];
    advance(1_000);
    await passes.incremental(1, signal);
    expect(await metric('late_changes_total', 'found_by="poll"')).toBe(1);
    expect(await metric('poll_lookback_seconds')).toBe(1.4);
  });

  it("in a quiet spell after a burst polls read the lookback behind the watermark, not also the last poll's paging", async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T + 120_000);
    const { passes, snapshot, advance } = setup(source);
    await passes.fullScan(1, signal);
    // A burst of four changes a second apart, one a page; each page takes the poll a second (longer than its
    // interval, 1 s), then nothing changes.
    source.pagesToServe = [500, 1_500, 2_500, 3_500].map((d, i) => page([review(10 + i, { updated_date: T + d })]));
    source.onPage = () => advance(1_000);
    await passes.incremental(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(T + 3_500);
    // The next poll covers what was made while that one paged: from the watermark it started from (T).
    source.requests.length = 0;
    await passes.incremental(1, signal);
    expect(source.requests[0]!.updatedSince).toBe(T - 1_000);
    // It found nothing newer: what it started from was the watermark itself. From there on polls read the 1 s
    // lookback (two of the burst's changes), not 4 s more for the poll before that paged 4 s (the whole burst again,
    // 4 s again, and so on for as long as nothing changes).
    for (let i = 0; i < 3; i++) {
      source.requests.length = 0;
      await passes.incremental(1, signal);
      expect(source.requests[0]!.updatedSince).toBe(T + 3_500 - 1_000);
    }
  });

  it('once the present is learned, polls in a quiet spell cover it: they stop reading the last burst again', async () => {
    // Issue 48's `bursts`: a burst within the lookback floor behind a quiet watermark was read again by every poll
    // (in the simulation 14 pages against a 2 s interval, for minutes, starving a sweep) until something changed.
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T)], T);
    const { passes, snapshot, sink, advance } = setup(source);
    await passes.fullScan(1, signal);
    // The listing as it stands (the fake serves what is at or past a poll's updated_date).
    const listing = new Map<number, number>([[1, T - 5_000]]);
    const tick = async (changes: Array<[number, number]> = []) => {
      advance(1_000);
      source.upstreamTime += 1_000;
      for (const [id, date] of changes) listing.set(id, date);
      source.pagesToServe = [page([...listing].map(([id, date]) => review(id, { updated_date: date })))];
      source.requests.length = 0;
      await passes.incremental(1, signal);
      return source.requests[0]!.updatedSince!;
    };
    // Three reviews' changes, each stamped 100 ms before the poll that reads it: the present is learned.
    for (let i = 2; i <= 4; i++) await tick([[i, source.upstreamTime + 1_000 - 100]]);
    // A burst of 20 changes within the 100 ms before a poll, then nothing changes.
    const burst: Array<[number, number]> = [];
    for (let i = 0; i < 20; i++) burst.push([10 + i, source.upstreamTime + 1_000 - 100 - i * 5]);
    await tick(burst);
    const burstEnd = Math.max(...burst.map(([, d]) => d));
    expect((await snapshot.checkpoint()).watermark).toBe(burstEnd);
    // The next poll still reads the floor behind the burst (a change of it shown late by up to the floor) and covers
    // the present at its start, a second past the burst; the one after reads the floor behind that (the burst's
    // last change only), and from then on polls start past the burst: the watermark follows the present.
    expect(await tick()).toBe(burstEnd - 1_000);
    expect(await tick()).toBe(burstEnd);
    for (let i = 0; i < 5; i++) {
      const since = await tick();
      expect(since).toBeGreaterThan(burstEnd);
      expect((await snapshot.checkpoint()).watermark).toBe(source.upstreamTime - 100);
    }
    // A change shown 500 ms after its stamp (within the floor, on time) is read by the next poll, not left for a
    // trailing read: the watermark covers the present at a poll's start, never more.
    const published = sink.events.length;
    await tick([[40, source.upstreamTime + 1_000 - 100 - 500]]);
    expect(sink.events.slice(published).map((e) => e.subject)).toEqual(['40']);
  });

  it('a change made while a poll paged, behind its position, is read by the next poll and is not late', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T + 120_000);
    // Local time 10 s past the stamps: the data's clock is not ahead of it, so the present caps no watermark here.
    const { passes, sink, metric, advance } = setup(source, 300_000, 0, T + 10_000);
    await passes.fullScan(1, signal);
    source.pagesToServe = [];
    await passes.incremental(1, signal);
    // A poll from watermark T that pages 2 s and finds T + 4000: the data's present when it began was T + 2000 or
    // later (its newest change was made before it ended), and a change made then, behind its cursor, is stamped so.
    source.pagesToServe = [1_000, 4_000].map((d, i) => page([review(10 + i, { updated_date: T + d })]));
    source.onPage = () => advance(1_000);
    await passes.incremental(1, signal);
    source.requests.length = 0;
    source.pagesToServe = [page([review(12, { updated_date: T + 2_000 })])];
    await passes.incremental(1, signal);
    expect(source.requests[0]!.updatedSince).toBe(T + 2_000 - 1_000);
    expect(sink.events.map((e) => e.subject)).toContain('12');
    expect((await metric('late_changes_total', 'found_by="poll"')) ?? 0).toBe(0);
  });

  it('a sweep counts the changes polls missed (older than what they covered), not the ones they had not reached yet', async () => {
    const source = new ClockedSource(
      [at(page([review(1, { updated_date: T }), review(2, { updated_date: T })]), T)],
      T + 120_000,
    );
    const { passes, metric } = setup(source, 300_000, 0, T + 120_000);
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

  it('one record stamped 4 minutes ahead of the upstream hides no later change: it is read again until time reaches it', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T);
    const { passes, snapshot, sink, advance } = setup(source);
    await passes.fullScan(1, signal);
    source.pagesToServe = [page([review(2, { updated_date: T + 240_000 })])];
    await passes.incremental(1, signal);
    // The watermark stays at the upstream's present (its Date header).
    expect((await snapshot.checkpoint()).watermark).toBe(T);
    for (let i = 3; i < 8; i++) {
      advance(1_000);
      source.upstreamTime += 1_000;
      source.pagesToServe = [
        page([review(2, { updated_date: T + 240_000 }), review(i, { updated_date: source.upstreamTime - 100 })]),
      ];
      await passes.incremental(1, signal);
      expect(sink.events.map((e) => e.subject)).toContain(String(i));
      expect((await snapshot.checkpoint()).watermark).toBeLessThanOrEqual(source.upstreamTime);
    }
  });

  it('with a stamp ahead listed, a change stamped just before a poll began and shown after it read is read next', async () => {
    // Schedule seed 943: the watermark capped a floor past the present started the next poll at this one's start.
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T)], T);
    const { passes, sink, advance } = setup(source);
    await passes.fullScan(1, signal);
    // The poll begins at T, reads a record stamped 4 minutes ahead and pages 300 ms.
    source.pagesToServe = [page([review(2, { updated_date: T + 240_000 })])];
    source.onPage = () => {
      advance(300);
      source.upstreamTime += 300;
    };
    await passes.incremental(1, signal);
    source.onPage = () => undefined;
    // Review 3 was stamped 200 ms before that poll began and shows 487 ms after its stamp: after the poll's page.
    advance(1_000);
    source.upstreamTime += 1_000;
    source.pagesToServe = [page([review(2, { updated_date: T + 240_000 }), review(3, { updated_date: T - 200 })])];
    await passes.incremental(1, signal);
    expect(sink.events.map((e) => e.subject)).toContain('3');
  });

  it('local time 103 s ahead of the data, before any sample: a record stamped past it moves no watermark', async () => {
    // date-header-apart seed 430093: the Date header 54 minutes ahead, the bridge's clock 103 s ahead of the data, a
    // record stamped 3 minutes ahead found by a poll. The present before three samples is the earliest of header,
    // local time and samples: local time, 103 s ahead; the record, capped at it, carried the watermark there, and
    // every honest change after it was left to a sweep.
    const local = T + 103_000;
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T + 54 * 60_000)], T);
    source.upstreamTime = T + 54 * 60_000;
    const bridge = setup(source, 30_000, 0, local);
    const { passes, snapshot, sink } = bridge;
    await passes.fullScan(1, signal);
    const step = (reviews: Page['reviews']) => pollAfterSecond(bridge, source, reviews);
    await step([review(7, { updated_date: T + 180_000 })]);
    expect(sink.events.map((e) => e.subject)).toContain('7');
    expect((await snapshot.checkpoint()).watermark).toBeLessThanOrEqual(T);
    // Honest changes, stamped as the data's clock runs, each shown at once (the record ahead listed too).
    for (let i = 0; i < 3; i++) {
      await step([review(7, { updated_date: T + 180_000 }), review(20 + i, { updated_date: T + 1_000 * (i + 2) })]);
      expect(sink.events.map((e) => e.subject)).toContain(String(20 + i));
    }
  });

  it("local time 120 s ahead of the data: a record stamped ahead on the initial load's pages sets no watermark", async () => {
    // date-header-apart seeds 430010 and 430087: the Date header an hour (29 minutes) ahead, the bridge's clock 120 s
    // (78 s) ahead of the data, and the load's listing for a recent change found only a record stamped an hour (10
    // minutes) ahead. Capped at the present (local time, before any sample), it set the first watermark 120 s past
    // the data's clock, and every change of the next two minutes was left to trailing reads and sweeps.
    const local = T + 120_000;
    const header = T + 3_600_000;
    const first = at(page([review(1, { updated_date: T - 10 }), review(2, { updated_date: T + 3_700_000 })]), header);
    const source = new ClockedSource([first], header);
    const { passes, snapshot, sink, advance } = setup(source, 30_000, 0, local);
    await passes.fullScan(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(T - 10);
    // An honest change stamped as the data's clock runs, shown at once: the next poll reads it.
    advance(1_000);
    source.upstreamTime += 1_000;
    source.pagesToServe = [page([review(2, { updated_date: T + 3_700_000 }), review(3, { updated_date: T + 1_000 })])];
    await passes.incremental(1, signal);
    expect(sink.events.map((e) => e.subject)).toContain('3');
  });

  it('a review stamped ahead and changed by three polls moves the present no further than the others show', async () => {
    // Schedule seed 308: its stamps stay ahead (each a ms past the last) and were three of five samples.
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T)], T);
    const { passes, sink, advance } = setup(source);
    await passes.fullScan(1, signal);
    const ahead = T + 3 * 3_600_000;
    const step = async (reviews: Page['reviews']) => {
      advance(1_000);
      source.upstreamTime += 1_000;
      source.pagesToServe = [page(reviews)];
      await passes.incremental(1, signal);
    };
    for (let i = 0; i < 3; i++) {
      await step([
        review(7, { updated_date: ahead + i, client_publication_status: ['APPROVED', 'REJECTED', 'PENDING'][i]! }),
      ]);
    }
    await step([
      review(7, { updated_date: ahead + 2, client_publication_status: 'PENDING' }),
      review(8, { updated_date: source.upstreamTime - 100 }),
    ]);
    await step([
      review(7, { updated_date: ahead + 2, client_publication_status: 'PENDING' }),
      review(9, { updated_date: source.upstreamTime - 100 }),
    ]);
    // Five polls found changes, three of them on review 7: three reviews sampled, and the present is still the
    // header's. A change made now is read by the next poll.
    await step([
      review(7, { updated_date: ahead + 2, client_publication_status: 'PENDING' }),
      review(10, { updated_date: source.upstreamTime - 100 }),
    ]);
    expect(sink.events.map((e) => e.subject)).toContain('10');
  });

  it('a Date header an hour ahead and a record stamped hours ahead, before any sample, hide no later change', async () => {
    // Date-header-apart seed 330091: the present was the header's time until samples came; one record stamped 3.7
    // hours ahead carried the watermark an hour past every change, and no poll found one to sample again.
    const source = new ClockedSource(
      [at(page([review(1, { updated_date: T - 5_000 })]), T + 3_600_000)],
      T + 3_600_000,
    );
    const { passes, sink, advance } = setup(source);
    await passes.fullScan(1, signal);
    const tick = async (reviews: Page['reviews']) => {
      advance(1_000);
      source.upstreamTime += 1_000;
      source.pagesToServe = [page(reviews)];
      await passes.incremental(1, signal);
    };
    const ahead = review(2, { updated_date: T + 13_300_000 });
    await tick([ahead]);
    await tick([ahead, review(3, { updated_date: T + 2_000 - 100 })]);
    expect(sink.events.map((e) => e.subject)).toContain('3');
  });

  it('a watermark restored from ahead of the present (an earlier version committed it) is read from the present', async () => {
    const source = new ClockedSource(
      [{ ...page([review(1, { updated_date: T + 23 * 3_600_000 })]), upstreamAt: null }],
      T,
    );
    const { passes, snapshot, sink } = setup(source);
    // No Date header on the load's page: the cap is the upstream's time as the source knows it (T).
    await passes.fullScan(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(T);
    // As a checkpoint an earlier version committed (restored from the changelog): 23 hours ahead.
    snapshot.ckpt.watermark = T + 23 * 3_600_000;
    source.requests.length = 0;
    source.pagesToServe = [page([review(2, { updated_date: T + 500 })])];
    await passes.incremental(1, signal);
    expect(source.requests[0]!.updatedSince).toBeLessThanOrEqual(T);
    expect(sink.events.map((e) => e.subject)).toContain('2');
  });

  it('a trailing read finds a change shown beyond the lookback, counts it by tier, and the lookback learns it', async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T);
    const { passes, sink, metric, advance } = setup(source, 300_000, 30_000);
    await passes.fullScan(1, signal);
    source.pagesToServe = [];
    await passes.incremental(1, signal);
    const tiersRead: number[] = [];
    // As the leader's loop does between polls: the read due, if any, a page per step.
    const trail = async () => {
      if ((passes.trailingDueAt() ?? Infinity) > T + 1e9) return;
      const read = await passes.openTrailing(1, signal);
      if (!read) return;
      tiersRead.push(read.tier);
      while (await read.step());
    };
    await trail();
    // The first read is the widest tier's, which serves the narrower ones.
    expect(tiersRead).toEqual([3]);
    // Polls with an on-time change each second; at 15 s a change stamped 15 s back shows: polls (lookback 1 s) pass
    // it by; a trailing read finds it.
    const late = review(9, { updated_date: T + 1_000, client_publication_status: 'APPROVED' });
    let foundAt: number | null = null;
    for (let i = 1; i <= 25; i++) {
      advance(1_000);
      source.upstreamTime += 1_000;
      const onTime = review(100 + i, { updated_date: source.upstreamTime - 100 });
      source.pagesToServe = [page(i < 16 ? [onTime] : [onTime, late])];
      await passes.incremental(1, signal);
      const polled = sink.events.some((e) => e.subject === '9');
      await trail();
      if (foundAt === null && !polled && sink.events.some((e) => e.subject === '9')) foundAt = i;
    }
    // Found within tier 2's period (18.75 s) of showing (at 16 s): tier 2 came due before tier 1's next read.
    expect(tiersRead).toEqual([3, 1, 1, 1, 2, 1]);
    expect(foundAt).toBe(19);
    expect(await metric('late_changes_total', 'found_by="trailing_2"')).toBe(1);
    expect((await metric('late_changes_total', 'found_by="poll"')) ?? 0).toBe(0);
    expect(await metric('trailing_bound_seconds', 'tier="2"')).toBe(19);
    // It showed after tier 1's read at 15 s (whose window held its stamp) began, when polls covered 13.9 s past
    // its stamp: at least that late. The lookback learns it (twice), so polls now read such changes themselves.
    expect(await metric('lateness_seen_seconds', 'found_by="trailing_2"')).toBe(12.9);
    expect(await metric('poll_lookback_seconds')).toBe(25.8);
  });
});

describe('late changes are no sample of the present', () => {
  it('changes found late by polls leave the present (and the watermark) alone: each is late by what the test says', async () => {
    // test/e2e/late-changes.test.ts in small (polls every 500 ms). Were late changes samples, the present (a low
    // quartile) would run behind by their lateness, and the next poll would read from there: the lateness polls
    // measure against what they covered, and learn their lookback from, would be wrong.
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T)], T);
    const { passes, snapshot, metric, advance } = setup(source);
    await passes.fullScan(1, signal);
    const tick = async (reviews: Page['reviews']) => {
      advance(500);
      source.upstreamTime += 500;
      source.pagesToServe = [page(reviews)];
      await passes.incremental(1, signal);
    };
    // Three ordinary changes: the present is learned, the watermark is on the last.
    for (let i = 2; i <= 4; i++) await tick([review(i, { updated_date: source.upstreamTime + 500 - 100 })]);
    expect((await snapshot.checkpoint()).watermark).toBe(source.upstreamTime - 100);
    // Polls that find nothing new for a few seconds cover the present (the data's clock: the header's less 100 ms).
    for (let i = 0; i < 10; i++) await tick([]);
    const present = () => source.upstreamTime - 100;
    expect((await snapshot.checkpoint()).watermark).toBe(present());
    let learned = (await metric('poll_lookback_seconds'))!;
    for (let i = 0; i < 10; i++) {
      // 0.9 times the lookback older than the watermark, shown now.
      const covered = (await snapshot.checkpoint()).watermark!;
      const late = review(10 + i, { updated_date: covered - Math.round(900 * learned) });
      await tick([late]);
      expect(await metric('late_changes_total', 'found_by="poll"')).toBe(i + 1);
      const next = (await metric('poll_lookback_seconds'))!;
      expect(next).toBeGreaterThan(learned);
      learned = next;
      // The watermark is the present still (the late change pulled it back, it would stay where it was), and the
      // next poll reads from it less the lookback (the fake's polls page in no time).
      expect((await snapshot.checkpoint()).watermark).toBe(present());
      source.requests.length = 0;
      const before = present();
      await tick([late]);
      expect(source.requests[0]!.updatedSince).toBe(before - Math.round(1_000 * learned));
      expect((await snapshot.checkpoint()).watermark).toBe(present());
    }
    // Ten late changes: the lookback has grown past half a minute.
    expect(learned).toBeGreaterThan(30);
  });
});

describe('what polls find during the initial load is no sample of the present', () => {
  it('a review the load had not reached, stamped 11 days ago, does not hold the watermark back after the load', async () => {
    // test/e2e/late-changes.test.ts with the ahead branch: a poll during the load found a review stamped three years
    // before (the simulator's data), the low quartile took it, and the watermark stayed three years behind.
    const old = T - 1_000_000_000;
    const source = new ClockedSource(
      [
        at(page([review(1, { updated_date: old })], null, 'a'), T),
        at(page([review(2, { updated_date: old + 5 })], 'a'), T),
      ],
      T,
    );
    const { passes, snapshot, advance } = setup(source);
    const load = await passes.openFullScan(1, signal);
    await load.step();
    // A poll during the load lists review 3 (the load has not reached it): created as the load would.
    source.pagesToServe = [page([review(3, { updated_date: old + 10 })])];
    advance(1_000);
    source.upstreamTime += 1_000;
    await passes.incremental(1, signal);
    while (await load.step());
    // An ordinary change after the load: the watermark goes to it.
    advance(1_000);
    source.upstreamTime += 1_000;
    const stamp = T + 2_000 - 100;
    source.pagesToServe = [page([review(4, { updated_date: stamp })])];
    await passes.incremental(1, signal);
    expect((await snapshot.checkpoint()).watermark).toBe(stamp);
  });
});

describe('the present learned from trailing reads too', () => {
  it('a present learned ahead (the first reviews sampled all stamped ahead) comes back by what trailing reads find', async () => {
    // Schedule seed 330136 of date-header-apart: seven reviews, most stamped ahead; the present learned ran 10
    // minutes ahead and hid every change from polls, which then gave it no sample to correct it.
    const source = new ClockedSource([at(page([review(1, { updated_date: T - 5_000 })]), T)], T);
    const { passes, sink, advance } = setup(source, 300_000, 30_000);
    await passes.fullScan(1, signal);
    const trail = async () => {
      const read = await passes.openTrailing(1, signal);
      if (read) while (await read.step());
    };
    const tick = async (reviews: Page['reviews']) => {
      advance(1_000);
      source.upstreamTime += 1_000;
      source.pagesToServe = [page(reviews)];
      await passes.incremental(1, signal);
    };
    const ahead = [10, 11, 12].map((id) => review(id, { updated_date: T + 120_000 + id }));
    for (let i = 1; i <= 3; i++) await tick(ahead.slice(0, i));
    // Three reviews sampled, all ahead: the next poll commits a watermark two minutes ahead.
    await tick(ahead);
    // Polls pass ordinary changes by; trailing reads find them.
    for (let i = 0; i < 5; i++) {
      await tick([...ahead, review(20 + i, { updated_date: source.upstreamTime - 100 })]);
      await trail();
    }
    expect(sink.events.map((e) => e.subject)).toContain('20');
    // Now a change is the next poll's again.
    await tick([...ahead, review(30, { updated_date: source.upstreamTime - 100 })]);
    expect(sink.events.map((e) => e.subject)).toContain('30');
  });
});

describe('trailing reads count late changes as polls do', () => {
  it("a change within the polls' lookback that a trailing read reaches before the next poll is counted late", async () => {
    const source = new ClockedSource([at(page([review(1, { updated_date: T })]), T)], T);
    const { passes, sink, metric, advance } = setup(source, 300_000, 30_000);
    await passes.fullScan(1, signal);
    source.pagesToServe = [];
    await passes.incremental(1, signal);
    const trail = async () => {
      const read = await passes.openTrailing(1, signal);
      if (read) while (await read.step());
      return read?.tier ?? null;
    };
    expect(await trail()).toBe(3);
    let stamp = T;
    for (let i = 1; i <= 5; i++) {
      advance(1_000);
      source.upstreamTime += 1_000;
      stamp = source.upstreamTime - 100;
      source.pagesToServe = [page([review(100 + i, { updated_date: stamp })])];
      await passes.incremental(1, signal);
    }
    // Shown now, stamped half a second before the watermark: within the polls' lookback (1 s), older than what they
    // covered. Tier 1's read, due, comes before the next poll.
    source.pagesToServe = [page([review(9, { updated_date: stamp - 500, client_publication_status: 'APPROVED' })])];
    expect(await trail()).toBe(1);
    expect(sink.events.map((e) => e.subject)).toContain('9');
    expect(await metric('late_changes_total', 'found_by="trailing_1"')).toBe(1);
  });
});

describe('the lookback priced by the rate budget', () => {
  it('a lookback learned from late changes costs polls at most a quarter of an interval of budget; fixed is not capped', () => {
    const settings = { intervalMs: 1_000, floorMs: 1_000, ceilingMs: 300_000, readsPerInterval: 1_000 };
    const learned = new PollState({ ...settings, mode: 'learned' });
    learned.lookback.observe(20_000, 0);
    learned.committed(T, T, 0, 0);
    expect(learned.lookbackMs(0)).toBe(40_000);
    // 20 changes/s: 250 reviews a poll buy 12.5 s.
    learned.read(400, 20_000);
    expect(learned.lookbackMs(0)).toBe(12_500);
    // 300 changes/s (smoothed towards it): down to the floor, never below.
    for (let i = 0; i < 20; i++) learned.read(6_000, 20_000);
    expect(learned.lookbackMs(0)).toBe(1_000);
    expect(learned.since(T, 0)).toBe(T - 1_000);
    const fixed = new PollState({ ...settings, mode: 'fixed' });
    fixed.read(6_000, 20_000);
    expect(fixed.lookbackMs(0)).toBe(300_000);
  });

  it("the trailing tiers' shares: the budget the polls leave at the density they see, max-min fair", () => {
    const settings = { intervalMs: 1_000, floorMs: 1_000, ceilingMs: 300_000, freshnessBoundMs: 30_000 };
    const priced = new PollState({ ...settings, mode: 'learned', readsPerInterval: 1_000, pageSize: 100 });
    // Not priced before a poll read (the tiers weigh the same), nor without a page size.
    expect(priced.allotTrailing(0)).toBeNull();
    expect(new PollState({ ...settings, mode: 'learned' }).allotTrailing(0)).toBeNull();
    // A poll that paged 0.5 s while the watermark moved as far: the next reads those 0.5 s again.
    priced.committed(T - 500, T, 0, 500);
    // 100 changes a second: polls read 3 s of them (1 s, the 1 s floor, 0.5 s of paging: 3 requests a second).
    for (let i = 0; i < 30; i++) priced.read(250, 2_500);
    const a = priced.allotTrailing(0)!;
    expect(a.budgetRps).toBe(7);
    expect(a.tiers.map((t) => Math.round(t.demandRps * 100) / 100)).toEqual([5.12, 5.01, 11]);
    // All three short of their need: an even split, and each the bound its share keeps (2P back to back, a part-filled
    // last page a read included).
    for (const t of a.tiers) expect(t.shareRps).toBeCloseTo(7 / 3, 6);
    expect(a.tiers.map((t) => Math.round(t.boundOnShareMs / 100) / 10)).toEqual([29.6, 114, 451.5]);
    expect(priced.lastAllotment()).toBe(a);
  });
});
