import type { SnapshotEntry } from '../../core/snapshot-entry.js';

// At most one page is in flight in a bridge: page N is committed while page N+1 of the same run is read and
// diffed, because the bridge would otherwise sit idle while Kafka and Redis acknowledge.

/** What a page in flight is reported back to: the run that submitted it. */
export interface InFlightOwner {
  /** Records the failure of this run's page in flight; the run's next call throws it. */
  fail(err: unknown): void;
}

interface InFlight<R> {
  run: R;
  done: Promise<void>;
  /** The entries this page will commit: the next page of the same run diffs against them. */
  writes: Map<number, SnapshotEntry>;
}

/** The one page in flight of a bridge, and the run it belongs to. */
export class InFlightSlot<R extends InFlightOwner> {
  private inflight: InFlight<R> | null = null;

  /**
   * Waits until the page in flight is published and committed. Its failure is not thrown here but kept by the run
   * that submitted it, so that a failed sweep page fails the sweep and not the poll that happened to wait for it.
   */
  async settle(): Promise<void> {
    const inflight = this.inflight;
    if (!inflight) return;
    try {
      await inflight.done;
    } catch (err) {
      inflight.run.fail(err);
    } finally {
      if (this.inflight === inflight) this.inflight = null;
    }
  }

  /** The entries the page in flight of `run` will commit, if that page belongs to `run`. */
  overlayOf(run: R): Map<number, SnapshotEntry> | null {
    return this.inflight?.run === run ? this.inflight.writes : null;
  }

  /** Waits for the page in flight when it belongs to another run (its entries are not ours to diff against). */
  async settleOthers(run: R): Promise<void> {
    if (this.inflight && this.inflight.run !== run) await this.settle();
  }

  /** Registers the page a run just handed over for publishing. */
  launch(run: R, done: Promise<void>, writes: Map<number, SnapshotEntry>): void {
    // Observed by the next settle; until then, keep Node from reporting it as unhandled.
    done.catch(() => undefined);
    this.inflight = { run, done, writes };
  }
}

// Pages that failed and records that were quarantined are remembered in memory, bounded: enough for every page an
// account's passes hold in the overlap window, small enough that a listing full of bad records cannot grow it.
const MEMORY_LIMIT = 10_000;

/** What the pipeline remembers of failing pages across runs. */
export class PageMemory {
  /** Consecutive failures of a page, by its key (pass type, cursor and the state of its reviews). */
  readonly pageFailures = new BoundedMap<string, number>(MEMORY_LIMIT);
  /** Reviews (id and state) that broke their page and were dead-lettered by reference: skipped until they change. */
  readonly quarantined = new BoundedMap<string, true>(MEMORY_LIMIT);
}

/** A Map that forgets its oldest keys beyond a size limit (insertion order). */
class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    if (this.size > this.limit) this.delete(this.keys().next().value as K);
    return this;
  }
}
