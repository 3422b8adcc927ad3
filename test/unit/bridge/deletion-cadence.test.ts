import { describe, expect, it } from 'vitest';
import { BridgeLoop } from '../../../src/bridge/loop.js';
import { Passes } from '../../../src/bridge/passes/index.js';
import type { ListOptions, Page, ReviewSource } from '../../../src/upstream/types.js';
import { FakeLease, FakeSource, page, review, silentLogger, FakeTime, loopFakes } from '../../helpers/fakes.js';
import { until } from '../../helpers/wait.js';

// Deletion detection at the end of a complete sweep runs a snapshot batch per loop step, so incremental polls keep
// their interval while it scans: the real passes and loop on fakes and a fake clock, each batch costing 150 ms.

/**
 * A listing in which review 7's updated_date moved just before the sweep's last page: the sweep does not list it
 * (listed newest first, it jumped ahead of the cursor). The polls read it once the sweep's listing has ended, or,
 * shown later than they look back (`pollsSee` false), never; a read from an updated_date lists it.
 */
class MovedAheadSource implements ReviewSource {
  sweepPages: Page[] = [];
  listingEnded = false;
  pollsSee = true;
  readonly rereads: number[] = [];

  constructor(
    private readonly time: FakeTime,
    private readonly moved: Page['reviews'][number],
  ) {}

  pages(options: ListOptions): AsyncIterable<Page> {
    const at = this.time.now;
    const { kind, updatedSince } = options;
    let pages: Page[];
    if (kind === 'sweep' && updatedSince === undefined) pages = this.sweepPages;
    else if (kind === 'sweep') {
      this.rereads.push(updatedSince!);
      const listed = this.sweepPages.flatMap((p) => p.reviews).filter((r) => r.updated_date >= updatedSince!);
      pages = [page([this.moved, ...listed])];
    } else pages = [page(this.listingEnded && this.pollsSee ? [this.moved] : [])];
    const full = kind === 'sweep' && updatedSince === undefined;
    const walk = async function* (this: MovedAheadSource): AsyncGenerator<Page> {
      for (const p of pages) yield { ...p, fetchedAt: at };
      if (full) this.listingEnded = true;
    };
    return { [Symbol.asyncIterator]: () => walk.call(this) };
  }

  async checkCredentials(): Promise<void> {}

  async close(): Promise<void> {}
}

/** A clock the loop's sleeps advance, starting now (the fake pages were fetched a minute before). */

describe('deletion detection and the poll cadence (fake clock)', () => {
  it('keeps polls on their 1 s interval while deletion detection scans the snapshot', async () => {
    const { time, snapshot, sink, metrics, deps } = loopFakes();
    const all = Array.from({ length: 400 }, (_, i) => review(i + 1));
    const source = new FakeSource([page(all)]);
    const passes = new Passes({ ...deps, clock: time.clock }, source, {
      overlapMs: 1000,
      metrics,
      deleteMaxFraction: 0.5,
      account: 'test',
    });
    await passes.fullScan(1, new AbortController().signal);
    expect(snapshot.entries.size).toBe(400);

    // Review 7 is deleted upstream; the snapshot scan yields 10 entries a batch, 150 ms each: 6 s of detection.
    source.pagesToServe = [page(all.filter((r) => r.id !== 7))];
    snapshot.scanBatch = 10;
    const batchTimes: number[] = [];
    snapshot.onScanBatch = () => {
      batchTimes.push(time.now);
      time.now += 150;
    };
    const pollTimes: number[] = [];
    const poll = passes.incremental.bind(passes);
    passes.incremental = async (epoch, signal) => {
      pollTimes.push(time.now);
      time.now += 50;
      return poll(epoch, signal);
    };
    snapshot.sweepRequested = true;
    const loop = new BridgeLoop({
      passes,
      lease: new FakeLease(),
      metrics,
      logger: silentLogger,
      clock: time.clock,
      sleep: time.sleep,
      timing: { pollIntervalMs: 1_000, sweepIntervalMs: 0, leaseTtlMs: 600, maxBackoffMs: 20 },
    });
    loop.start();
    await until(() => sink.deletions.length > 0 && pollTimes.length >= 10, 10_000);
    await loop.stop();

    expect(sink.deletions.map((e) => e.subject)).toEqual(['7']);
    expect(batchTimes.length).toBe(40);
    const [scanStart, scanEnd] = [batchTimes[0]!, batchTimes.at(-1)! + 150];
    const during = pollTimes.filter((t) => t >= scanStart && t <= scanEnd);
    // About one poll per second of the 6 s scan, each started on time (within one batch of its due time).
    expect(during.length).toBeGreaterThanOrEqual(5);
    const gaps = pollTimes.slice(1).map((t, i) => t - pollTimes[i]!);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(1_000);
      expect(gap).toBeLessThanOrEqual(1_000 + 150);
    }
  });

  /** A sweep of 10 reviews that does not list 7 (moved ahead of its cursor) and 3 (deleted); what it reports deleted. */
  async function sweepPastMoved(setup: (source: MovedAheadSource, all: Page['reviews']) => void) {
    const { time, snapshot, sink, metrics, deps } = loopFakes();
    const all = Array.from({ length: 10 }, (_, i) => review(i + 1));
    const moved = { ...review(7), updated_date: review(7).updated_date + 60_000 };
    const source = new MovedAheadSource(time, moved);
    source.sweepPages = [page(all)];
    const passes = new Passes({ ...deps, clock: time.clock }, source, {
      overlapMs: 1000,
      metrics,
      deleteMaxFraction: 0.5,
      account: 'test',
    });
    await passes.fullScan(1, new AbortController().signal);
    expect(snapshot.entries.size).toBe(10);

    // A minute later, the sweep lists every review but 7, and review 3 is gone for good.
    time.now += 60_000;
    source.listingEnded = false;
    setup(
      source,
      all.filter((r) => r.id !== 7 && r.id !== 3),
    );
    snapshot.sweepRequested = true;
    const loop = new BridgeLoop({
      passes,
      lease: new FakeLease(),
      metrics,
      logger: silentLogger,
      clock: time.clock,
      sleep: time.sleep,
      timing: { pollIntervalMs: 1_000, sweepIntervalMs: 0, leaseTtlMs: 600, maxBackoffMs: 20 },
    });
    loop.start();
    await until(() => sink.deletions.length > 0, 10_000);
    await loop.stop();
    return { deleted: sink.deletions.map((e) => e.subject), source, entry7: snapshot.entries.get(7) };
  }

  it('does not report deleted a review the sweep did not list until the polls read since the listing ended', async () => {
    // Issue 48 (newest-first): deletion detection decided right after the listing ended, before any poll could
    // read a review that had moved ahead of the sweep's cursor, and reported it deleted. (Listed by id here, so
    // that the polls alone must keep it.)
    const { deleted, source, entry7 } = await sweepPastMoved((source, listed) => {
      source.sweepPages = [page(listed)];
    });
    expect(deleted).toEqual(['3']);
    expect(source.rereads).toEqual([]);
    expect(entry7?.updatedDate).toBe(review(7).updated_date + 60_000);
  });

  it('reads a newest-first listing again from the oldest candidate: a review no poll reads is not deleted', async () => {
    // Issue 48 (seed 48608 with newest-first): a change shown 131 s after its stamp, beyond what the polls and the
    // trailing reads look back, moved a review ahead of the sweep's cursor; nothing but a sweep could list it.
    const { deleted, source } = await sweepPastMoved((source, listed) => {
      source.pollsSee = false;
      source.sweepPages = [page(listed.slice(5).reverse()), page(listed.slice(0, 5).reverse())];
    });
    expect(deleted).toEqual(['3']);
    // From the older of the two candidates' stamps (3's).
    expect(source.rereads).toEqual([review(3).updated_date]);
  });
});
