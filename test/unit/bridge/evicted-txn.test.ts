import { describe, expect, it } from 'vitest';
import { SnapshotLostError } from '../../../src/core/errors.js';
import { EMPTY_CHECKPOINT } from '../../../src/core/checkpoint.js';
import { loggedPassesOnFakes, page, review } from '../../helpers/fakes.js';

// Redis evicts the account's checkpoint (transaction number included) after a restore brought it up to the
// changelog and before the leadership's first commit. The commit used to take its number from that emptied Redis
// (0, so transaction 1 again) and publish it to Kafka before Redis refused the write: a restore picking or skipping
// records by number then took the wrong checkpoint or skipped a later commit's entries.

const signal = new AbortController().signal;
const CHANGED = 1_800_000_000_000;

describe('a commit after the restored checkpoint was evicted', () => {
  it('is refused before Kafka: no changelog transaction number is used twice', async () => {
    const { passes, snapshot, sink, pipeline } = loggedPassesOnFakes();
    await passes.prepare(1, signal);
    const sweep = pipeline.open('sweep', 1);
    await sweep.submit(page([review(1), review(2)]));
    await pipeline.settle();
    expect(snapshot.txn).toBe(1);
    // A new leadership restores (Redis holds transaction 1), then Redis evicts the checkpoint.
    await passes.prepare(2, signal);
    snapshot.ckpt = { ...EMPTY_CHECKPOINT };
    snapshot.txn = null;
    const records = sink.changelog.length;
    const err = await pipeline.committer
      .commitUnit(2, { update: { watermark: CHANGED }, durable: true })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SnapshotLostError);
    expect(sink.changelog.length).toBe(records);
    const txns = sink.changelog.map((r) => r.txn);
    expect(txns.every((t, i) => i === 0 || t >= txns[i - 1]!)).toBe(true);
  });
});
