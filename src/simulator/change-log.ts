// The simulator store's change log: every move of an updated_date, kept in updated_date order, so that an
// incremental query reads only the reviews changed since its bound. It also hands out the stamps, on the
// service's clock but never backwards, so that appending keeps the log sorted; a late stamp (a change made visible
// after newer ones, as a long transaction's) is inserted at its place instead.

/** Every updated_date move of the store, in stamp order, and the stamps themselves. */
export class ChangeLog {
  // Parallel arrays, stamps non-decreasing, one entry per updated_date move.
  private readonly ids: number[] = [];
  private readonly stamps: number[] = [];
  private lastStamp = 0;
  // Sorted candidate ids of the last incremental query, valid while the log has not grown.
  private cache: { minUpdated: number; logLength: number; ids: number[] } | null = null;

  constructor(private readonly clock: () => number) {}

  /** The service's time, but never behind the last stamp and strictly after the review's `previous` one. */
  nextStamp(previous: number | null): number {
    let stamp = Math.max(this.clock(), this.lastStamp);
    if (previous !== null && stamp <= previous) stamp = previous + 1;
    this.lastStamp = stamp;
    return stamp;
  }

  /** Records that review `id` moved to updated_date `stamp` (from nextStamp). */
  append(id: number, stamp: number): void {
    // A late change pushed past its review's own stamp may lie after the stamp handed out next: keep stamp order.
    if (this.stamps.length > 0 && (this.stamps.at(-1) as number) > stamp) return this.insert(id, stamp);
    this.ids.push(id);
    this.stamps.push(stamp);
  }

  /**
   * A stamp `lateByMs` before the service's time (negative: after it), strictly after the review's `previous` one;
   * it does not move the stamps nextStamp hands out.
   */
  lateStamp(previous: number | null, lateByMs: number): number {
    const stamp = this.clock() - lateByMs;
    return previous !== null && stamp <= previous ? previous + 1 : stamp;
  }

  /** Records a move to a stamp that may be older than logged ones (from lateStamp), after its equals. */
  insert(id: number, stamp: number): void {
    const stamps = this.stamps;
    const at = lowerBound(stamps.length, (i) => (stamps[i] as number) > stamp);
    if (at === stamps.length) return this.append(id, stamp);
    // Rare (late changes only), so a splice's copy is fine; the longer log drops the cached answer.
    this.ids.splice(at, 0, id);
    this.stamps.splice(at, 0, stamp);
  }

  /** Drops the cached answer (a review was removed). */
  invalidate(): void {
    this.cache = null;
  }

  /** Sorted ids whose updated_date is >= minUpdated: since stamps only grow, those logged at or after the bound. */
  idsSince(minUpdated: number): number[] {
    const logLength = this.ids.length;
    if (this.cache !== null && this.cache.minUpdated === minUpdated && this.cache.logLength === logLength) {
      return this.cache.ids;
    }
    const stamps = this.stamps;
    const first = lowerBound(logLength, (i) => (stamps[i] as number) >= minUpdated);
    const unique = new Set<number>();
    for (let i = first; i < logLength; i++) unique.add(this.ids[i] as number);
    const ids = [...unique].sort((a, b) => a - b);
    this.cache = { minUpdated, logLength, ids };
    return ids;
  }
}

/** First index in [0, length) where the monotone predicate holds, or length. */
export function lowerBound(length: number, holds: (index: number) => boolean): number {
  let lo = 0;
  let hi = length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (holds(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
