import { describe, expect, it } from 'vitest';
import { PagePipeline } from '../../../src/bridge/pipeline.js';
import { UpstreamError } from '../../../src/upstream/errors.js';
import { Passes } from '../../../src/bridge/passes/index.js';
import {
  FakeSink,
  FakeSnapshot,
  FakeSource,
  gate,
  page,
  review,
  silentLogger,
  testMetrics,
} from '../../helpers/fakes.js';

function setup() {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  const pipeline = new PagePipeline({
    snapshot,
    sink,
    metrics,
    logger: silentLogger,
    eventSource: 'urn:test',
    initialLoadMode: 'mark',
  });
  return { log, snapshot, sink, metrics, pipeline };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('PagePipeline', () => {
  it('reads and diffs page N+1 while page N is published, and publishes N+1 only after N is committed', async () => {
    const { log, sink, pipeline } = setup();
    const held = gate();
    sink.gates.push(held);
    const run = pipeline.open('sweep', 1);
    await run.submit(page([review(1)]));
    await tick();
    // Page 1 is being published (held); page 2 is read and diffed meanwhile.
    const second = run.submit(page([review(2)]));
    await tick();
    expect(log).toEqual(['read 1', 'publish created:1', 'read 2']);
    held.open();
    await second;
    await run.commit({});
    expect(log).toEqual([
      'read 1',
      'publish created:1',
      'read 2',
      'acked created:1',
      'commit 1',
      'publish created:2',
      'acked created:2',
      'commit 2',
      // A checkpoint update that moves nothing a restore needs goes to Redis only.
      'commit ',
    ]);
  });

  it('diffs a review against the page in flight of the same run, not the stale snapshot', async () => {
    const { sink, pipeline } = setup();
    const held = gate();
    sink.gates.push(held);
    const run = pipeline.open('sweep', 1);
    await run.submit(page([review(7)]));
    const changed = run.submit(
      page([review(7, { client_publication_status: 'REJECTED', updated_date: 1_800_000_000_000 })]),
    );
    held.open();
    await changed;
    await run.commit({});
    expect(sink.events.map((e) => [e.type, e.sequence])).toEqual([
      ['review.created', 1],
      ['review.status_changed', 2],
    ]);
  });

  it("keeps a failed page's error with the run that submitted it: the next run goes on, the failed run throws", async () => {
    const { snapshot, sink, pipeline } = setup();
    const held = gate();
    sink.gates.push(held);
    const sweep = pipeline.open('sweep', 1);
    await sweep.submit(page([review(1)]));
    const poll = pipeline.open('incremental', 1);
    held.fail(new Error('broker refused the sweep page'));
    // The poll waits for the sweep's page, but the sweep's failure is not the poll's.
    await poll.submit(page([review(2)]));
    await poll.commit({ watermark: 5 });
    expect(snapshot.entries.has(2)).toBe(true);
    expect(snapshot.entries.has(1)).toBe(false);
    expect(snapshot.ckpt.watermark).toBe(5);
    await expect(sweep.submit(page([review(3)]))).rejects.toThrow('broker refused the sweep page');
    await expect(sweep.commit({})).rejects.toThrow('broker refused the sweep page');
  });

  it('turns a review that cannot be processed into a dead letter and publishes the rest of its page', async () => {
    const { snapshot, sink, pipeline } = setup();
    const run = pipeline.open('incremental', 1);
    // 2^50 ms does not fit the snapshot entry's 48-bit field: encoding throws for this review only.
    await run.submit(page([review(1), review(2, { updated_date: 2 ** 50 }), review(3)]));
    await run.commit({});
    expect(sink.events.map((e) => e.subject)).toEqual(['1', '3']);
    expect(sink.deadLetters.map((d) => [d.reject.id, d.reject.reason])).toEqual([['2', 'processing_failed']]);
    expect([...snapshot.entries.keys()]).toEqual([1, 3]);
  });

  it('cuts the free text of an event over the message limit, and dead-letters by reference one that cannot fit', async () => {
    const { sink, pipeline, snapshot, metrics } = setup();
    sink.maxMessageBytes = 4_000;
    const run = pipeline.open('incremental', 1);
    const hugeId = review(3, { product_page_id: 'p'.repeat(5_000) });
    await run.submit(page([review(1), review(2, { comments: 'c'.repeat(20_000) }), hugeId]));
    await run.commit({});
    const cut = sink.events.find((e) => e.subject === '2')!;
    expect(cut.data.truncated_fields).toEqual(['comments']);
    expect(Buffer.byteLength(JSON.stringify(cut))).toBeLessThan(4_000);
    expect(sink.events.map((e) => e.subject)).toEqual(['1', '2']);
    expect(sink.deadLetters.map((d) => [d.reject.id, d.reject.reason])).toEqual([['3', 'too_large']]);
    expect(JSON.stringify(sink.deadLetters[0]!.reject.raw)).not.toContain('ppppp');
    expect([...snapshot.entries.keys()]).toEqual([1, 2]);
    expect(await metrics.registry.metrics()).toMatch(
      /reviews_bridge_events_truncated_total\{[^}]*type="review.created"[^}]*\} 1/,
    );
  });

  it('dead-letters a bad record once per day, not once per poll that re-reads it', async () => {
    const { sink, pipeline } = setup();
    const bad = {
      ...page([]),
      rejects: [{ id: '9', reason: 'schema' as const, detail: 'id:invalid_type', raw: { id: 9 } }],
    };
    for (let i = 0; i < 3; i++) {
      const run = pipeline.open('incremental', 1);
      await run.submit(bad);
      await run.commit({});
    }
    expect(sink.deadLetters).toHaveLength(1);
  });
});

describe('full scan', () => {
  function passes(source: FakeSource) {
    const s = setup();
    const p = new Passes(
      {
        snapshot: s.snapshot,
        sink: s.sink,
        metrics: s.metrics,
        logger: silentLogger,
        eventSource: 'urn:test',
        initialLoadMode: 'mark',
      },
      source,
      { overlapMs: 1000, metrics: s.metrics, deleteMaxFraction: 0.5, account: 'test' },
    );
    return { ...s, passes: p };
  }

  it('a complete sweep reports the reviews it did not list as deleted, after its pages, then removes them', async () => {
    const source = new FakeSource([page([review(1), review(2), review(3)], null, 'a'), page([review(4)], 'a')]);
    const { passes: p, snapshot, sink, log } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    // Review 3 is removed upstream; a review the sweep did not list but that was written after it started stays.
    source.pagesToServe = [page([review(1), review(2)], null, 'a'), page([review(4)], 'a')];
    snapshot.entries.set(9, { ...snapshot.entries.get(4)!, observedAt: Date.now() + 60_000 });
    log.length = 0;
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions.map((e) => [e.subject, e.sequence])).toEqual([['3', 2]]);
    // Kafka first (events, tombstones, changelog markers), then Redis: the entries, then the transaction's mark;
    // then the sweep's end, to Kafka's changelog and to Redis.
    expect(log.slice(log.indexOf('deleted 3'))).toEqual([
      'deleted 3',
      'remove 3',
      'commit ',
      'publish ',
      'acked ',
      'commit  +sweep',
    ]);
    expect([...snapshot.entries.keys()].sort()).toEqual([1, 2, 4, 9]);
  });

  it('newest first, with id-less records: deletes what none may be, holds what a new one may be', async () => {
    const idless = (raw: unknown) => ({ id: null, reason: 'schema' as const, detail: 'id:invalid_type', raw });
    const listing = (ids: number[], raws: unknown[]) => [
      { ...page(ids.map((id) => review(id))), rejects: raws.map(idless) },
    ];
    const junk = { headline: 'no id' };
    const source = new FakeSource(listing([6, 5, 4, 3, 2, 1], [junk]));
    const { passes: p, snapshot, sink } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    // Review 2 removed; the junk record stays byte for byte: 2 is deleted, nothing is deferred.
    source.pagesToServe = listing([6, 5, 4, 3, 1], [junk]);
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions.map((e) => e.subject)).toEqual(['2']);
    expect(snapshot.ckpt).toMatchObject({ deferredSweeps: 0, deferredReason: null });
    // Review 4 loses its id in the sweep that misses review 1: the new record may be either, both are held.
    source.pagesToServe = listing([6, 5, 3], [junk, { headline: 'review 4' }]);
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions.map((e) => e.subject)).toEqual(['2']);
    expect(snapshot.ckpt).toMatchObject({ deferredSweeps: 1, deferredReason: 'new_unreadable' });
    expect(Object.values(snapshot.ckpt.unreadableCandidates ?? {}).sort()).toEqual([[], [1, 4]]);
    // Review 6 removed next, the records unchanged: 6 is deleted, 1 and 4 stay held (reported again).
    source.pagesToServe = listing([5, 3], [{ headline: 'review 4' }, junk]);
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions.map((e) => e.subject)).toEqual(['2', '6']);
    expect(snapshot.ckpt).toMatchObject({ deferredSweeps: 2, deferredReason: 'ambiguous_unreadable' });
    expect([...snapshot.entries.keys()].sort()).toEqual([1, 3, 4, 5]);
  });

  it('a review listed again after its review.deleted continues its sequence (not 1 again)', async () => {
    const source = new FakeSource([page([review(1), review(2), review(3), review(4)])]);
    const { passes: p, snapshot, sink } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    source.pagesToServe = [page([review(1), review(2), review(4)])];
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions.map((e) => [e.subject, e.sequence])).toEqual([['3', 2]]);
    expect(snapshot.gone.get(3)).toBe(2);
    source.pagesToServe = [page([review(1), review(2), review(3), review(4)])];
    sink.events.length = 0;
    await p.fullScan(1, new AbortController().signal);
    expect(sink.events.map((e) => [e.type, e.subject, e.sequence])).toEqual([['review.created', '3', 3]]);
    expect(snapshot.entries.get(3)?.sequence).toBe(3);
  });

  it('deletes nothing when a sweep misses more than the allowed fraction (a broken listing)', async () => {
    const source = new FakeSource([page([review(1), review(2), review(3), review(4)])]);
    const { passes: p, snapshot, sink, metrics } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    source.pagesToServe = [page([review(1)])];
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions).toEqual([]);
    expect(snapshot.entries.size).toBe(4);
    expect(await metrics.registry.metrics()).toMatch(/reviews_bridge_deletions_refused_total\{[^}]*\} 1/);
  });

  it('a resumed sweep reports no deletions: it did not list the pages before its cursor', async () => {
    const source = new FakeSource([page([review(1), review(2)], null, 'a'), page([review(3)], 'a')]);
    const { passes: p, snapshot, sink } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    snapshot.ckpt = { ...snapshot.ckpt, sweep: { kind: 'sweep', cursor: 'a', startedAt: 0, seen: 2 } };
    source.pagesToServe = [page([review(3)], 'a')];
    await p.fullScan(1, new AbortController().signal);
    expect(sink.deletions).toEqual([]);
  });

  it('starts a sweep over when the listing refuses its checkpointed cursor, instead of failing from it for ever', async () => {
    const source = new FakeSource([page([review(1)], null, 'a'), page([review(2)], 'a')]);
    const { passes: p, snapshot } = passes(source);
    await p.fullScan(1, new AbortController().signal);
    snapshot.ckpt = { ...snapshot.ckpt, sweep: { kind: 'sweep', cursor: 'expired', startedAt: 0, seen: 40 } };
    source.failAt = { index: 0, error: new UpstreamError('cursor_invalid', 'the listing refused the cursor') };
    await expect(p.fullScan(1, new AbortController().signal)).rejects.toThrow('refused the cursor');
    expect(snapshot.ckpt.sweep).toMatchObject({ kind: 'sweep', cursor: null, seen: 0 });
    source.failAt = null;
    const run = await p.fullScan(1, new AbortController().signal);
    expect(run.summary.pages).toBe(2);
    expect(snapshot.ckpt.sweep).toBeNull();
  });

  it('closes the page iterator of an abandoned scan (its abort listeners and prefetch go with it)', async () => {
    const source = new FakeSource([page([review(1)], null, 'a'), page([review(2)], 'a', 'b'), page([review(3)], 'b')]);
    const { passes: p } = passes(source);
    const scan = await p.openFullScan(1, new AbortController().signal);
    expect(await scan.step()).toBe(true);
    await scan.close();
    expect(source.closedEarly).toBe(1);
  });

  it('checkpoints the cursor with its pages and completes the initial load with the watermark at its start', async () => {
    const source = new FakeSource([page([review(1)], null, 'a'), page([review(2)], 'a')]);
    const { passes: p, snapshot } = passes(source);
    const run = await p.fullScan(1, new AbortController().signal);
    expect(run.type).toBe('initial');
    expect(run.summary).toMatchObject({ pages: 2, reviews: 2, events: 2 });
    expect(snapshot.ckpt.initialDone).toBe(true);
    expect(snapshot.ckpt.sweep).toBeNull();
    expect(snapshot.ckpt.watermark).not.toBeNull();
  });

  it('an incremental poll commits its watermark even when a sweep page in flight failed', async () => {
    const source = new FakeSource([page([review(1)], null, 'a'), page([review(2)], 'a')]);
    const { passes: p, snapshot, sink } = passes(source);
    snapshot.ckpt = { ...snapshot.ckpt, initialDone: true, watermark: 1_000 };
    const scan = await p.openFullScan(1, new AbortController().signal);
    const held = gate();
    sink.gates.push(held);
    await scan.step();
    held.fail(new Error('sweep page refused'));
    source.pagesToServe = [page([review(5, { updated_date: 1_500 })])];
    await expect(p.incremental(1, new AbortController().signal)).resolves.toMatchObject({ events: 1 });
    expect(snapshot.ckpt.watermark).toBe(1_500);
    await expect(scan.step()).rejects.toThrow('sweep page refused');
  });
});

describe('a page that keeps failing', () => {
  const refusal = () => Object.assign(new Error('This server has a message size limit'), { type: 'MESSAGE_TOO_LARGE' });

  async function attempt(pipeline: PagePipeline, p: ReturnType<typeof page>) {
    const run = pipeline.open('incremental', 1);
    await run.submit(p);
    await run.commit({});
  }

  it('is published record by record after three failures; the review that breaks it is dead-lettered by reference', async () => {
    const { pipeline, sink, snapshot, metrics } = setup();
    // Kafka refuses review 2's record for a reason the bridge cannot classify.
    sink.refuse = (e) => (e.subject === '2' ? new Error('unknown broker error') : null);
    const p = page([review(1), review(2), review(3)]);
    for (let i = 0; i < 3; i++) await expect(attempt(pipeline, p)).rejects.toThrow('unknown broker error');
    expect(sink.events).toHaveLength(0);
    await attempt(pipeline, p);
    expect(sink.events.map((e) => e.subject).sort()).toEqual(['1', '3']);
    expect(sink.deadLetters.map((d) => [d.reject.id, d.reject.reason, d.reject.raw])).toEqual([
      ['2', 'quarantined', { id: 2, reference: true }],
    ]);
    expect([...snapshot.entries.keys()].sort()).toEqual([1, 3]);
    expect(await metrics.registry.metrics()).toMatch(
      /reviews_bridge_records_quarantined_total\{reason="isolated"[^}]*\} 1/,
    );
    // The next poll re-reads the same page: the quarantined review is skipped at once, not dead-lettered again.
    await attempt(pipeline, p);
    expect(sink.deadLetters).toHaveLength(1);
    // Once the review changes, it is tried again (and published when Kafka takes it).
    sink.refuse = null;
    await attempt(pipeline, page([review(2, { client_publication_status: 'APPROVED' })]));
    expect(sink.events.map((e) => e.subject)).toContain('2');
  });

  it('blames nobody during an outage: every part fails, the pass fails, nothing is dead-lettered', async () => {
    const { pipeline, sink } = setup();
    sink.refuse = () => new Error('connection refused');
    const p = page([review(1), review(2)]);
    for (let i = 0; i < 5; i++) await expect(attempt(pipeline, p)).rejects.toThrow('connection refused');
    expect(sink.deadLetters).toHaveLength(0);
    sink.refuse = null;
    await attempt(pipeline, p);
    expect(sink.events.map((e) => e.subject)).toEqual(['1', '2']);
  });

  it("blames nobody when an outage ends between the suspects' last tries", async () => {
    const { pipeline, sink } = setup();
    // Refused: the page's three attempts, its five parts, then reviews 1 and 2 tried again; review 3's try goes
    // through (found by the simulation, seed 424921: good reviews were quarantined after a Kafka outage).
    let refusals = 0;
    sink.refuse = () => (refusals++ < 10 ? new Error('connection refused') : null);
    const p = page([review(1), review(2), review(3)]);
    for (let i = 0; i < 3; i++) await expect(attempt(pipeline, p)).rejects.toThrow('connection refused');
    await attempt(pipeline, p);
    expect(sink.deadLetters).toHaveLength(0);
    expect(sink.events.map((e) => e.subject).sort()).toEqual(['1', '2', '3']);
  });

  it('quarantines the only review of a page when Kafka refuses its record as such', async () => {
    const { pipeline, sink, metrics } = setup();
    sink.refuse = () => refusal();
    const p = page([review(5)]);
    for (let i = 0; i < 3; i++) await expect(attempt(pipeline, p)).rejects.toThrow('message size limit');
    await attempt(pipeline, p);
    expect(sink.deadLetters.map((d) => d.reject.reason)).toEqual(['quarantined']);
    expect(await metrics.registry.metrics()).toMatch(
      /reviews_bridge_records_quarantined_total\{reason="record_refused"[^}]*\} 1/,
    );
  });
});
