import { describe, expect, it } from 'vitest';
import { FingerprintKey, type FingerprintKeySource } from '../../../src/core/fingerprint-key.js';
import {
  FakeSink,
  FakeSnapshot,
  FakeSource,
  gate,
  page,
  passesOnFakes,
  review,
  testMetrics,
} from '../../helpers/fakes.js';

// Redis as a cache of the Kafka changelog, on in-memory stand-ins: a flushed snapshot is restored before the next
// pass (no second review.created, sequences go on), and a commit Kafka has but Redis missed is applied, not
// derived and published again.

const key = new FingerprintKey(Buffer.alloc(32, 5));
const keySource: FingerprintKeySource = { get: async () => key, persist: async () => undefined };

function setup(source: FakeSource, deleteMaxFraction: number | null = null) {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const metrics = testMetrics();
  const passes = passesOnFakes({ snapshot, sink, source, keySource, metrics }, { deleteMaxFraction });
  return { passes, snapshot, sink, log, metrics };
}

const signal = new AbortController().signal;

describe('restore from the changelog', () => {
  it('a flushed Redis is restored whole: entries, checkpoint, sequences; no second review.created', async () => {
    const reviews = [1, 2, 3, 4, 5].map((id) => review(id));
    const source = new FakeSource([page(reviews.slice(0, 3), null, 'a'), page(reviews.slice(3), 'a')]);
    const { passes, snapshot, sink } = setup(source);
    expect(await passes.prepare(10, signal)).toBe(true);
    await passes.fullScan(10, signal);
    const before = new Map(snapshot.entries);
    const ckpt = await snapshot.checkpoint();
    expect(before.size).toBe(5);

    snapshot.clear();
    // Every batch read tells the loop's liveness the restore goes forward.
    let alive = 0;
    expect(await passes.prepare(11, signal, false, () => (alive += 1))).toBe(true);
    expect(alive).toBeGreaterThan(0);
    expect(snapshot.entries).toEqual(before);
    expect((await snapshot.checkpoint()).initialDone).toBe(ckpt.initialDone);
    expect(sink.transactionsBegun).toBe(2);

    // The next sweep sees review 3 approved: one status change with sequence 2, and no created events again.
    const created = sink.events.length;
    source.pagesToServe = [
      page(
        [review(1), review(2), review(3, { client_publication_status: 'APPROVED', updated_date: 1_800_000_000_000 })],
        null,
        'a',
      ),
      page([review(4), review(5)], 'a'),
    ];
    await passes.fullScan(11, signal);
    const fresh = sink.events.slice(created);
    expect(fresh.map((e) => [e.type, e.subject, e.sequence])).toEqual([['review.status_changed', '3', 2]]);
  });

  it('a flushed Redis keeps what deletion detection needs: the deleted review comes back after its review.deleted', async () => {
    const idless = { id: null, reason: 'schema' as const, detail: 'id:invalid_type', raw: { headline: 'x' } };
    const listing = (ids: number[]) => [{ ...page(ids.map((id) => review(id))), rejects: [idless] }];
    const source = new FakeSource(listing([5, 4, 3, 2, 1]));
    const { passes, snapshot, sink } = setup(source, 0.5);
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    source.pagesToServe = listing([5, 4, 2, 1]);
    await passes.fullScan(10, signal);
    expect(sink.deletions.map((e) => [e.subject, e.sequence])).toEqual([['3', 2]]);
    const remembered = await snapshot.checkpoint();

    snapshot.clear();
    expect(await passes.prepare(11, signal)).toBe(true);
    expect(snapshot.gone.get(3)).toBe(2);
    const restored = await snapshot.checkpoint();
    expect(restored.unreadable).toEqual(remembered.unreadable);
    expect(restored.unreadableCandidates).toEqual(remembered.unreadableCandidates);
    source.pagesToServe = listing([5, 4, 3, 2, 1]);
    const before = sink.events.length;
    await passes.fullScan(11, signal);
    expect(sink.events.slice(before).map((e) => [e.type, e.subject, e.sequence])).toEqual([['review.created', '3', 3]]);
  });

  it('a commit that reached Kafka but not Redis is applied from the changelog, never published again', async () => {
    const source = new FakeSource([page([review(1), review(2)])]);
    const { passes, snapshot, sink } = setup(source);
    await passes.prepare(10, signal);
    // The Redis commit of the only page fails (Redis away) after Kafka committed it.
    const run = await passes.openFullScan(10, signal);
    const g = gate();
    snapshot.commitGate = g;
    g.fail(new Error('redis away'));
    // The load's first page sets the watermark, so its step waits for the commit (and sees it fail).
    await expect(run.step()).rejects.toThrow('redis away');
    await run.close();
    expect(sink.events.map((e) => e.subject)).toEqual(['1', '2']);
    expect(snapshot.entries.size).toBe(0);

    // A new leadership reads the changelog's tail and applies the page; the load then completes without events.
    expect(await passes.prepare(11, signal)).toBe(true);
    expect([...snapshot.entries.keys()].sort()).toEqual([1, 2]);
    await passes.fullScan(11, signal);
    expect(sink.events.map((e) => e.subject)).toEqual(['1', '2']);
  });

  it('a failover that lost the last Redis commit is caught before the next diff, and repaired from Kafka', async () => {
    const source = new FakeSource([page([review(1), review(2)], null, 'a'), page([review(3)], 'a')]);
    const { passes, snapshot, sink } = setup(source);
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    // The Redis primary fails over to a replica that missed the last commit (its entries and transaction).
    snapshot.txn = (snapshot.txn ?? 0) - 2;
    snapshot.offsets[0] = 0;
    snapshot.entries.delete(3);
    source.pagesToServe = [page([review(1), review(2)], null, 'a'), page([review(3)], 'a')];
    await expect(passes.fullScan(10, signal)).rejects.toThrow(/LOST/);
    // Nothing was derived from the stale snapshot: review 3 got no second review.created.
    expect(sink.events.filter((e) => e.subject === '3').length).toBe(1);
    expect(await passes.prepare(11, signal)).toBe(true);
    expect(snapshot.entries.has(3)).toBe(true);
    await passes.fullScan(11, signal);
    expect(sink.events.filter((e) => e.subject === '3').map((e) => e.type)).toEqual(['review.created']);
  });

  it('a deletion that reached Kafka but not Redis is applied from the changelog: its review.deleted is sent once', async () => {
    const ids = [1, 2, 3, 4];
    const source = new FakeSource([page(ids.map((id) => review(id)))]);
    const { passes, snapshot, sink } = setup(source, 0.5);
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    // Review 2 is deleted upstream: the sweep publishes its review.deleted, then Redis goes away before the removal.
    const listed = () => [page(ids.filter((id) => id !== 2).map((id) => review(id)))];
    source.pagesToServe = listed();
    const remove = snapshot.removeEntries.bind(snapshot);
    snapshot.removeEntries = () => Promise.reject(new Error('Connection is closed.'));
    await expect(passes.fullScan(10, signal)).rejects.toThrow('Connection is closed.');
    snapshot.removeEntries = remove;
    expect(snapshot.entries.has(2)).toBe(true);

    // The next leadership applies the deletion's changelog commit (its own transaction, after the sweep's pages).
    expect(await passes.prepare(11, signal)).toBe(true);
    expect(snapshot.entries.has(2)).toBe(false);
    expect(snapshot.gone.get(2)).toBe(2);
    source.pagesToServe = listed();
    await passes.fullScan(11, signal);
    expect(sink.deletions.map((e) => [e.subject, e.sequence])).toEqual([['2', 2]]);
  });

  it("a new leadership with nothing Redis missed keeps Redis's checkpoint: a sweep cursor of unchanged pages stays", async () => {
    const reviews = [1, 2, 3].map((id) => review(id));
    const { passes, snapshot, sink } = setup(new FakeSource([page(reviews)]));
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    const commits = sink.changelog.length;
    // A sweep's unchanged page moves the cursor in Redis only (after a restart, re-reading it publishes nothing).
    const cursor = { kind: 'sweep' as const, cursor: 'b', startedAt: 1, seen: 3 };
    const sweep = passes.pipeline.open('sweep', 10);
    await sweep.submit(page(reviews), { checkpoint: { sweep: cursor }, commitIfUnchanged: true });
    await passes.pipeline.settle();
    expect(sink.changelog.length).toBe(commits);
    expect((await snapshot.checkpoint()).sweep).toEqual(cursor);
    // The next leadership reads the changelog from Redis's last commit on: nothing after it, nothing to apply.
    expect(await passes.prepare(11, signal)).toBe(true);
    expect((await snapshot.checkpoint()).sweep).toEqual(cursor);
  });

  it('asks for a new lease when the restored history holds an epoch at or above the current one', async () => {
    const { passes, snapshot } = setup(new FakeSource([page([review(1)])]));
    await passes.prepare(50, signal);
    await passes.fullScan(50, signal);
    snapshot.clear();
    expect(await passes.prepare(40, signal)).toBe(false);
    expect(snapshot.entries.size).toBe(1);
  });

  it('keeps a Redis that the changelog knows nothing of (an account written before changelogs)', async () => {
    const { passes, snapshot, log } = setup(new FakeSource([]));
    snapshot.entries.set(1, {
      client: 'PENDING',
      pwr: 'PENDING',
      updatedDate: 1,
      sequence: 4,
      observedAt: 1,
      digest: '00',
      fieldHashes: [],
      keyId: null,
    });
    snapshot.hasCheckpoint = true;
    snapshot.sealed = false;
    expect(await passes.prepare(10, signal)).toBe(true);
    expect(log).not.toContain('clear');
    expect(snapshot.entries.get(1)?.sequence).toBe(4);
    // Sealed as it stands: a bucket lost from now on is told from a new one.
    expect(log).toContain('seal');
    expect(snapshot.sealed).toBe(true);
  });

  it('seals a snapshot of the previous format whose entries match its count, and restores one that does not in full', async () => {
    const { passes, snapshot, log, sink } = setup(new FakeSource([page([review(1), review(2)])]));
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    snapshot.sealed = false;
    log.length = 0;
    expect(await passes.prepare(11, signal)).toBe(true);
    expect(log).toEqual(['seal']);
    expect(snapshot.sealed).toBe(true);

    snapshot.sealed = false;
    snapshot.complete = false;
    log.length = 0;
    expect(await passes.prepare(12, signal)).toBe(true);
    expect(log).toContain('clear');
    expect(snapshot.sealed).toBe(true);
    expect([...snapshot.entries.keys()].sort()).toEqual([1, 2]);
    log.length = 0;
    expect(await passes.prepare(13, signal)).toBe(true);
    expect(log).not.toContain('clear');
    expect(sink.events.filter((e) => e.type === 'review.created')).toHaveLength(2);
  });

  it('restores in full when asked after a partial loss, though Redis still holds a checkpoint', async () => {
    const { passes, snapshot, log } = setup(new FakeSource([page([review(1), review(2)])]));
    await passes.prepare(10, signal);
    await passes.fullScan(10, signal);
    // One entry's bucket vanished; the checkpoint (and its transaction) stayed.
    snapshot.entries.delete(2);
    log.length = 0;
    await passes.prepare(11, signal);
    expect(snapshot.entries.has(2)).toBe(false);
    await passes.prepare(12, signal, true);
    expect(log).toContain('clear');
    expect(snapshot.entries.has(2)).toBe(true);
  });
});
