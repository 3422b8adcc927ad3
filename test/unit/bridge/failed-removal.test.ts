import { describe, expect, it } from 'vitest';
import { deletedEvents } from '../../../src/core/deletion.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { loggedPassesOnFakes, FakeSink, page, review } from '../../helpers/fakes.js';

// A deletion whose Kafka commit landed and whose Redis removal failed (Redis restarting for a few seconds): the
// removal is part of the pending Redis write, so the next read removes the entries first. Before, the next read
// flushed only the transaction mark: the review kept its entry, a comeback unchanged published nothing, and a
// comeback changed reused the deleted event's sequence.

const signal = new AbortController().signal;
const CHANGED = 1_800_000_000_000;
const setup = loggedPassesOnFakes;

/** Reviews 1 and 2 committed by a sweep; resolves review 1's entry as a deletion would take it (missing). */
async function sweptTwo(setupResult: ReturnType<typeof setup>): Promise<Array<[number, SnapshotEntry]>> {
  const { passes, snapshot, pipeline } = setupResult;
  await passes.prepare(1, signal);
  const sweep = pipeline.open('sweep', 1);
  await sweep.submit(page([review(1), review(2)]));
  await pipeline.settle();
  return [[1, snapshot.entries.get(1)!]];
}

/** Publishes review 1's deletion while Redis refuses the removal once; resolves what the refusal threw. */
async function deleteWhileRedisRestarts(setupResult: ReturnType<typeof setup>): Promise<unknown> {
  const { snapshot, sink, pipeline } = setupResult;
  const missing = await sweptTwo(setupResult);
  let refusals = 1;
  const remove = async (epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>) => {
    if (refusals-- > 0) throw new Error('Connection is closed.');
    return snapshot.removeEntries(epoch, entries);
  };
  const events = deletedEvents('urn:test', missing, CHANGED);
  return pipeline.committer.commitDeletions(1, events, missing, sink, remove).catch((err: unknown) => err);
}

const delivered = (sink: FakeSink) => [
  ...sink.events.map((e) => [e.type, e.subject, e.sequence]),
  ...sink.deletions.map((e) => [e.type, e.subject, e.sequence]),
];

describe('a deletion whose Redis removal fails after its Kafka commit', () => {
  it('the next read removes the entry first: a comeback unchanged is published after the deletion', async () => {
    const s = setup();
    expect(await deleteWhileRedisRestarts(s)).toBeInstanceOf(Error);
    // Redis is back; the review is listed again, unchanged.
    const poll = s.pipeline.open('incremental', 1);
    await poll.submit(page([review(1)]));
    await poll.commit({ watermark: CHANGED });
    expect(s.snapshot.gone.get(1)).toBe(2);
    const comeback = s.sink.events.filter((e) => e.subject === '1').map((e) => [e.type, e.sequence]);
    expect(comeback).toEqual([
      ['review.created', 1],
      ['review.created', 3],
    ]);
    expect(delivered(s.sink)).toContainEqual(['review.deleted', '1', 2]);
  });

  it('a comeback changed continues after the deleted event’s sequence', async () => {
    const s = setup();
    await deleteWhileRedisRestarts(s);
    const poll = s.pipeline.open('incremental', 1);
    await poll.submit(page([review(1, { client_publication_status: 'REJECTED', updated_date: CHANGED })]));
    await poll.commit({ watermark: CHANGED });
    const sequences = delivered(s.sink)
      .filter(([, subject]) => subject === '1')
      .map(([, , sequence]) => sequence);
    expect(new Set(sequences).size).toBe(sequences.length);
    expect(Math.max(...(sequences as number[]))).toBe(3);
  });

  it('the removal is retried before the next page is read, and only once', async () => {
    const s = setup();
    await deleteWhileRedisRestarts(s);
    await s.pipeline.committer.catchUp();
    expect(s.snapshot.entries.has(1)).toBe(false);
    expect(s.snapshot.entries.has(2)).toBe(true);
    expect(s.snapshot.txn).toBe(2);
    const removals = () => s.log.filter((l) => l.startsWith('remove')).length;
    const before = removals();
    await s.pipeline.committer.catchUp();
    expect(removals()).toBe(before);
  });
});

describe('a deletion whose Kafka commit fails', () => {
  it('keeps the entries in Redis: they leave only after review.deleted is in Kafka (commit order)', async () => {
    const s = setup();
    const { snapshot, sink, pipeline } = s;
    const missing = await sweptTwo(s);
    const publish = sink.publishDeletions.bind(sink);
    sink.publishDeletions = async () => {
      throw new Error('broker unavailable');
    };
    const remove = (epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>) =>
      snapshot.removeEntries(epoch, entries);
    const events = deletedEvents('urn:test', missing, CHANGED);
    const failed = await pipeline.committer.commitDeletions(1, events, missing, sink, remove).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(Error);
    // Removed first, the review would be gone from Redis with no review.deleted anywhere, and no later sweep could
    // tell (it is in neither the listing nor the snapshot): the deletion lost.
    expect(snapshot.entries.has(1)).toBe(true);
    expect(sink.deletions).toEqual([]);
    sink.publishDeletions = publish;
    expect(await pipeline.committer.commitDeletions(1, events, missing, sink, remove)).toBe(1);
    expect(snapshot.entries.has(1)).toBe(false);
    expect(sink.deletions.map((e) => e.subject)).toEqual(['1']);
  });
});
