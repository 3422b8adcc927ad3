import { UpstreamError } from '../../src/core/errors.js';
import type { Review } from '../../src/core/review.js';
import type { ListOptions, Page, ReviewSource } from '../../src/upstream/types.js';
import { validateRecords } from '../../src/upstream/validate.js';
import type { Actor, World } from './world.js';

// The simulated upstream: the reviews as they are (the truth the checker compares the feed with) and every version
// each review ever had, a listing in one of several orders (oldest or newest first) with keyset cursors, changes
// that become visible some time after their updated_date (seconds, or minutes: beyond the bridge's lookback),
// records that turn malformed for a while (classified by the bridge's real validator, src/upstream/validate.ts, as
// the HTTP source does), a data clock of its own (an offset from the world's) and a Date header's clock apart from
// it, and faults (throttling, server errors) while a fault window is open.

/**
 * How long an upstream page request takes in the world (ms): drawn in [min, max) per request from the schedule's
 * seed (simulate.ts). The checker's bounds count a poll's and a sweep's paging at the maximum.
 */
export const PAGE_LATENCY_MS = { min: 100, max: 600 } as const;

/** How the listing is sorted. */
export type ListingOrder = 'id-asc' | 'id-desc' | 'updated-asc' | 'updated-desc';

/**
 * A record listed malformed for a while: of an id the reviews never use, or standing for a review's record (which
 * the listing shows broken meanwhile, under the review's id and updated_date).
 */
export interface Malformed {
  id: number;
  /** The raw record as the listing's JSON holds it. */
  raw: unknown;
}

/** The upstream service of one account. */
export class SimUpstream {
  /** The newest version of every review (the final state the feed must reach). */
  readonly reviews = new Map<number, Review>();
  /** Every version of every review, in order. */
  readonly history = new Map<number, Review[]>();
  /** When each version becomes visible in the listing (changes show up a little after their updated_date). */
  private readonly visibleAt = new Map<Review, number>();
  /** Reviews deleted upstream (they never come back in these schedules). */
  readonly deleted = new Set<number>();
  /** When each deleted review left the listing (world time). */
  readonly deletedAt = new Map<number, number>();
  readonly malformed = new Map<number, Malformed>();
  /**
   * Every record listed malformed and when (world time): the checker finds the dead-letter memory of each by its
   * digest, and which records without a readable id may hold a deletion back.
   */
  readonly malformedEver: Array<Malformed & { from: number; to: number }> = [];
  /**
   * When each review's own record was listed malformed (world time): its version then shows again with the same
   * updated_date, which only a sweep finds (the checker's late bound).
   */
  readonly broken = new Map<number, { from: number; to: number }[]>();
  /** Requests fail with this kind while set. */
  fault: 'throttled' | 'server' | 'network' | null = null;
  requests = 0;

  constructor(
    private readonly world: World,
    readonly order: ListingOrder,
    readonly pageSize: number,
    /** The upstream's data clock (its updated_date stamps) minus the world's (ms). */
    readonly clockOffsetMs: number,
    /** Its Date header's clock minus its data clock (ms): a header stamped by another host than the data. */
    readonly dateHeaderOffsetMs = 0,
  ) {}

  /** The upstream's own time (its data clock). */
  now(): number {
    return this.world.clock.now() + this.clockOffsetMs;
  }

  /** Stores a version of a review (create or change), listed from `visibleAt` on. */
  put(review: Review, visibleAt = 0): void {
    this.reviews.set(review.id, review);
    this.visibleAt.set(review, visibleAt);
    let h = this.history.get(review.id);
    if (!h) this.history.set(review.id, (h = []));
    h.push(review);
  }

  /** The newest version of a review the listing shows now (null: none visible yet). */
  private visible(id: number): Review | null {
    const versions = this.history.get(id) ?? [];
    const now = this.world.clock.now();
    for (let i = versions.length - 1; i >= 0; i--) if (this.visibleAt.get(versions[i]!)! <= now) return versions[i]!;
    return null;
  }

  remove(id: number): void {
    if (this.reviews.delete(id)) {
      this.deleted.add(id);
      this.deletedAt.set(id, this.world.clock.now());
    }
  }

  /** When a version became (or becomes) visible in the listing (world time). */
  visibleFrom(version: Review): number {
    return this.visibleAt.get(version) ?? 0;
  }

  /**
   * The records the listing shows at world time `at` (reviews not yet deleted, with a version visible then, and
   * records listed malformed under ids of their own), with each one's sort date: null for a record without a
   * date (listed by every read, polls too). For the checker: how many pages a read takes then.
   */
  listedAt(at: number): Array<number | null> {
    const rows: Array<number | null> = [];
    for (const [id, versions] of this.history) {
      const gone = this.deletedAt.get(id);
      if (gone !== undefined && gone <= at) continue;
      let shown: Review | undefined;
      for (let i = versions.length - 1; i >= 0 && !shown; i--)
        if (this.visibleFrom(versions[i]!) <= at) shown = versions[i];
      if (shown) rows.push(shown.updated_date);
    }
    for (const m of this.malformedEver) if (!this.history.has(m.id) && m.from <= at && m.to > at) rows.push(null);
    return rows;
  }

  /** The listing's records, sorted (reviews and malformed records, each with its sort key). */
  private listing(since: number | undefined): Array<{ id: number; at: number; record: Review | Malformed }> {
    const rows: Array<{ id: number; at: number; record: Review | Malformed }> = [];
    for (const id of this.reviews.keys()) {
      const r = this.visible(id);
      if (!r || (since !== undefined && r.updated_date < since)) continue;
      // A review whose record turned malformed is listed broken, where its record sorts.
      rows.push({ id: r.id, at: r.updated_date, record: this.malformed.get(id) ?? r });
    }
    // Malformed records of ids of their own have no readable date: listed by every full read, and by polls too.
    for (const m of this.malformed.values()) {
      if (!this.reviews.has(m.id)) rows.push({ id: m.id, at: this.now(), record: m });
    }
    const cmp =
      this.order === 'id-asc'
        ? (a: { id: number }, b: { id: number }) => a.id - b.id
        : this.order === 'id-desc'
          ? (a: { id: number }, b: { id: number }) => b.id - a.id
          : this.order === 'updated-asc'
            ? (a: { id: number; at: number }, b: { id: number; at: number }) => a.at - b.at || a.id - b.id
            : (a: { id: number; at: number }, b: { id: number; at: number }) => b.at - a.at || b.id - a.id;
    return rows.sort(cmp);
  }

  /** The keyset cursor after a row, and whether a row comes after a cursor. */
  private after(row: { id: number; at: number }, cursor: string | null | undefined): boolean {
    if (!cursor) return true;
    const [at, id] = cursor.split(':').map(Number) as [number, number];
    if (this.order === 'id-asc') return row.id > id;
    if (this.order === 'id-desc') return row.id < id;
    if (this.order === 'updated-desc') return row.at < at || (row.at === at && row.id < id);
    return row.at > at || (row.at === at && row.id > id);
  }

  /** One page request: `since`/`cursor` as the listing's parameters. */
  page(since: number | undefined, cursor: string | null | undefined, fetchedAt: number): Page {
    this.requests += 1;
    if (this.fault) {
      throw new UpstreamError(this.fault, `simulated upstream fault: ${this.fault}`, {
        endpoint: 'reviews',
        status: this.fault === 'throttled' ? 503 : this.fault === 'server' ? 500 : undefined,
        final: true,
      });
    }
    const rows = this.listing(since).filter((r) => this.after(r, cursor));
    const taken = rows.slice(0, this.pageSize);
    const last = taken.at(-1);
    const nextCursor = rows.length > taken.length && last ? `${last.at}:${last.id}` : null;
    // The records as the listing's JSON carries them, classified by the bridge's own validator on its clock.
    const records = taken.map((row) => ('raw' in row.record ? structuredClone(row.record.raw) : { ...row.record }));
    const { reviews, rejects } = validateRecords(records, {}, { clock: () => this.world.clock.now() });
    const upstreamAt = this.now() + this.dateHeaderOffsetMs;
    return { cursor: cursor ?? null, nextCursor, reviews, rejects, fetchedAt, upstreamAt, receivedAt: fetchedAt };
  }
}

/** A replica's view of the upstream (its ReviewSource): each page is one step of the replica. */
export class SimSource implements ReviewSource {
  private seen: number | null = null;

  constructor(
    private readonly world: World,
    private readonly actor: Actor,
    private readonly upstream: SimUpstream,
  ) {}

  pages(options: ListOptions): AsyncIterable<Page> {
    return { [Symbol.asyncIterator]: () => this.walk(options) };
  }

  private async *walk(options: ListOptions): AsyncGenerator<Page> {
    let cursor = options.cursor ?? null;
    for (;;) {
      options.signal?.throwIfAborted();
      const fetchedAt = this.world.clock.now();
      const page = await this.world.step(this.actor, `upstream page ${options.kind}`, () =>
        this.upstream.page(options.updatedSince, cursor, fetchedAt),
      );
      this.seen = page.upstreamAt ?? null;
      yield page;
      if (page.nextCursor === null) return;
      cursor = page.nextCursor;
    }
  }

  upstreamNow(): number | null {
    return this.seen === null ? null : this.upstream.now() + this.upstream.dateHeaderOffsetMs;
  }

  async checkCredentials(): Promise<void> {}

  async close(): Promise<void> {}
}
