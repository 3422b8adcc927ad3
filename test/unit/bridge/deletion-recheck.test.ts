import { describe, expect, it } from 'vitest';
import { Passes } from '../../../src/bridge/passes/index.js';
import type { ListOptions, Page, ReviewSource } from '../../../src/upstream/types.js';
import { page, review, loopFakes, fastLoop } from '../../helpers/fakes.js';
import { until } from '../../helpers/wait.js';

// Deletion detection decides on the entries it scanned, which a poll may rewrite before the decision: a review the
// sweep did not list (it moved past the sweep's cursor while it paged) but a poll then saw is not gone, and the
// entries are read again before review.deleted goes out (src/bridge/passes/deletions.ts, stillMissing). The real
// passes and loop on fakes and a fake clock; the scan is slow enough for polls to run between its batches.

/** A clock the loop's sleeps advance (the fake pages were fetched a minute before it starts). */

/** A listing whose sweeps and polls serve pages of their own. */
class TwoListings implements ReviewSource {
  constructor(
    public sweep: Page[],
    public poll: () => Page[],
  ) {}

  pages(options: ListOptions): AsyncIterable<Page> {
    const pages = options.kind === 'incremental' ? this.poll() : this.sweep;
    return {
      [Symbol.asyncIterator]: async function* () {
        yield* pages;
      },
    };
  }

  async checkCredentials(): Promise<void> {}

  async close(): Promise<void> {}
}

describe('deletion detection reads its candidates again (fake clock)', () => {
  it('does not delete a review the sweep missed when a poll rewrote it after the scan read it', async () => {
    const { time, snapshot, sink, metrics, deps } = loopFakes();
    const all = Array.from({ length: 100 }, (_, i) => review(i + 1));
    const source = new TwoListings([page(all)], () => []);
    const passes = new Passes({ ...deps, clock: time.clock }, source, {
      overlapMs: 1000,
      metrics,
      deleteMaxFraction: 0.5,
      account: 'test',
    });
    await passes.fullScan(1, new AbortController().signal);
    expect(snapshot.entries.get(7)?.sequence).toBe(1);

    // The sweep does not list review 7 (it moved ahead of the sweep's cursor); once the scan has read 7's entry
    // (its first batch), polls list 7 with a new status: it exists, and its entry is no longer the one scanned.
    source.sweep = [page(all.filter((r) => r.id !== 7))];
    const changed = review(7, { client_publication_status: 'APPROVED', updated_date: all.at(-1)!.updated_date + 1 });
    let batches = 0;
    source.poll = () => (batches > 0 ? [{ ...page([changed]), fetchedAt: time.now }] : []);
    snapshot.scanBatch = 10;
    snapshot.onScanBatch = () => {
      batches += 1;
      time.now += 150;
    };
    // The candidates' second read is the one without an epoch; a poll after it runs once detection has finished.
    let rechecks = 0;
    let pollsAfter = 0;
    const read = snapshot.read.bind(snapshot);
    snapshot.read = async (ids, epoch, minTxn) => {
      if (epoch === undefined) rechecks += 1;
      return read(ids, epoch, minTxn);
    };
    const poll = passes.incremental.bind(passes);
    passes.incremental = async (epoch, signal) => {
      if (rechecks > 0) pollsAfter += 1;
      return poll(epoch, signal);
    };
    snapshot.sweepRequested = true;
    const loop = fastLoop(passes, time, metrics);
    loop.start();
    await until(() => pollsAfter > 0, 10_000);
    await loop.stop();

    // 7 was a candidate (the scan read it before the poll), read again, and kept with the poll's entry.
    expect(rechecks).toBe(1);
    expect(sink.deletions.map((e) => e.subject)).toEqual([]);
    expect(snapshot.entries.get(7)?.sequence).toBe(2);
  });
});
