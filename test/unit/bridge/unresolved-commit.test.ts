import { describe, expect, it } from 'vitest';
import { CommitOutcomeUnknownError } from '../../../src/core/errors.js';
import { FakeSink, gate, page, review, loggedPassesOnFakes } from '../../helpers/fakes.js';

// What a commit the bridge did not see through costs the runs after it, on in-memory stand-ins. A sweep page whose
// Kafka commit outcome is unknown, then a due poll: the poll must neither read Redis (still at the transaction
// before) nor commit under the next transaction number, or the sweep's page is derived and published again. The same
// when Kafka committed and only the Redis write failed: the next read sees that commit first.

const signal = new AbortController().signal;
const CHANGED = 1_800_000_000_000;

function setup() {
  const { passes, snapshot, sink } = loggedPassesOnFakes();
  return { passes, snapshot, sink, pipeline: passes.pipeline };
}

/** The events a reader of the sink got, as [type, review, sequence]. */
const delivered = (sink: FakeSink) => sink.events.map((e) => [e.type, e.subject, e.sequence]);

/** Makes the sink's next publish land in Kafka and then fail as if the commit's answer was lost. */
function loseNextAnswer(sink: FakeSink): void {
  const publish = sink.publish.bind(sink);
  sink.publish = async (...args) => {
    sink.publish = publish;
    await publish(...args);
    throw new CommitOutcomeUnknownError('no answer to EndTxn');
  };
}

describe('a commit whose outcome is unknown, then another run', () => {
  it('a due poll after a sweep page whose Kafka commit is unknown reads and commits nothing until the changelog decides', async () => {
    const { passes, snapshot, sink, pipeline } = setup();
    await passes.prepare(1, signal);
    const sweep = pipeline.open('sweep', 1);
    await sweep.submit(page([review(1)]));
    await pipeline.settle();
    expect(snapshot.txn).toBe(1);

    // The sweep's next page lands in Kafka as transaction 2; its answer is lost.
    loseNextAnswer(sink);
    await sweep.submit(page([review(2), review(3)]));
    const poll = pipeline.open('incremental', 1);
    // The poll waits for the sweep's page; it must not go on as if nothing happened.
    await expect(
      poll.submit(page([review(2, { client_publication_status: 'REJECTED', updated_date: CHANGED })])),
    ).rejects.toThrow(CommitOutcomeUnknownError);
    await expect(poll.commit({ watermark: CHANGED })).rejects.toThrow(CommitOutcomeUnknownError);
    await expect(sweep.submit(page([review(4)]))).rejects.toThrow(CommitOutcomeUnknownError);
    expect(sink.changelog.map((r) => r.txn).at(-1)).toBe(2);

    // The leadership is readied again (the loop's recovery): the changelog's tail brings Redis to transaction 2.
    await passes.prepare(1, signal);
    expect(snapshot.txn).toBe(2);
    const again = pipeline.open('incremental', 1);
    await again.submit(page([review(2, { client_publication_status: 'REJECTED', updated_date: CHANGED }), review(3)]));
    await again.commit({ watermark: CHANGED });
    expect(delivered(sink)).toEqual([
      ['review.created', '1', 1],
      ['review.created', '2', 1],
      ['review.created', '3', 1],
      ['review.status_changed', '2', 2],
    ]);
  });

  it('a poll touching none of the sweep page’s reviews still waits: its commit would take the unseen transaction’s number', async () => {
    const { passes, snapshot, sink, pipeline } = setup();
    await passes.prepare(1, signal);
    const sweep = pipeline.open('sweep', 1);
    loseNextAnswer(sink);
    await sweep.submit(page([review(5)]));
    const poll = pipeline.open('incremental', 1);
    await expect(poll.submit(page([review(6)]))).rejects.toThrow(CommitOutcomeUnknownError);
    // Kafka holds transaction 1 (the sweep's page) and nothing else under that number.
    expect(new Set(sink.changelog.map((r) => r.txn))).toEqual(new Set([1]));

    await passes.prepare(1, signal);
    expect(snapshot.entries.has(5)).toBe(true);
    const sweepAgain = pipeline.open('sweep', 1);
    await sweepAgain.submit(page([review(5), review(6)]));
    await sweepAgain.commit({});
    expect(delivered(sink)).toEqual([
      ['review.created', '5', 1],
      ['review.created', '6', 1],
    ]);
  });

  it('a poll after a sweep page that Kafka committed and Redis refused diffs against that page, not the Redis behind it', async () => {
    const { passes, snapshot, sink, pipeline } = setup();
    await passes.prepare(1, signal);
    const sweep = pipeline.open('sweep', 1);
    // Redis refuses the page's write (OOM, a read-only replica) after Kafka committed it.
    const refused = gate();
    snapshot.commitGate = refused;
    refused.fail(new Error('OOM command not allowed when used memory > maxmemory'));
    await sweep.submit(page([review(1), review(2)]));
    await pipeline.settle();
    expect(snapshot.entries.size).toBe(0);

    // Redis takes writes again; the poll lists review 1 unchanged and review 2 changed.
    const poll = pipeline.open('incremental', 1);
    await poll.submit(page([review(1), review(2, { client_publication_status: 'REJECTED', updated_date: CHANGED })]));
    await poll.commit({ watermark: CHANGED });
    expect(delivered(sink)).toEqual([
      ['review.created', '1', 1],
      ['review.created', '2', 1],
      ['review.status_changed', '2', 2],
    ]);
    // Both commits in Redis, in Kafka's order: the page's (1), the poll's (2) and its watermark (3).
    expect(snapshot.txn).toBe(3);
  });
});
