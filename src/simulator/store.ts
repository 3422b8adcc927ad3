import { ChangeLog, lowerBound } from './change-log.js';
import { BASE_EPOCH_MS, baseUpdatedDate, generateBaseReview, generateNewReview, type SimRecord } from './data.js';

// The review store: generated base reviews plus an overlay of the ones a test created or changed. Every move of an
// updated_date is appended to a change log kept in updated_date order, so an incremental query (updated_date after
// the base epoch) reads only the log and never touches the million untouched base reviews.

/** A control call that cannot be honoured: unknown review or a field that may not be set that way. */
export class StoreError extends Error {
  constructor(
    readonly kind: 'not_found' | 'invalid',
    message: string,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

/** One page request against the store, already validated. */
export interface StoreQuery {
  /** First id to consider (the cursor), 1 for the first page. */
  startId: number;
  /** Page size. */
  limit: number;
  /** Inclusive lower bound on updated_date in ms, or null for the full listing. */
  minUpdated: number | null;
  /** Whether startId came from a next_page cursor (a newest-first listing starts at the highest id otherwise). */
  fromCursor?: boolean;
}

/** One page: records in id order and the id the next page starts at (null on the last page). */
export interface StorePage {
  records: readonly SimRecord[];
  nextId: number | null;
}

/** Status change as the control interface names it. */
export interface StatusChange {
  client?: string;
  pwr?: string;
}

// Managed by the store: a caller that could set them could break the updated_date rule of the spec.
const CREATE_FORBIDDEN = new Set(['id', 'updated_date', '__proto__']);
const EDIT_FORBIDDEN = new Set([
  'id',
  'updated_date',
  'client_publication_status',
  'pwr_publication_status',
  '__proto__',
]);

/** Holds the reviews of one simulator and answers listing queries. */
export class ReviewStore {
  private readonly overlay = new Map<number, SimRecord>();
  // Reviews removed upstream: skipped by every listing; their ids are never reused.
  private readonly removed = new Set<number>();
  // Every updated_date move, in stamp order (change-log.ts).
  private readonly changes: ChangeLog;
  private maxId: number;
  // updated_date of every base review by id, computed on the first query that reaches into the base period.
  private baseUpdated: Float64Array | null = null;

  constructor(
    private readonly seed: number,
    private readonly baseCount: number,
    clock: () => number = Date.now,
    /** Order of the full listing: ascending ids, or newest first (descending ids, cursor = next page's first id). */
    private readonly order: 'ascending' | 'descending' = 'ascending',
  ) {
    this.maxId = baseCount;
    this.changes = new ChangeLog(clock);
  }

  /** Number of reviews, which is also the highest id (ids are dense, nothing is deleted). */
  count(): number {
    return this.maxId;
  }

  /** A copy of the review, or null for an unknown id. */
  get(id: number): SimRecord | null {
    if (!this.exists(id)) return null;
    return { ...this.current(id) };
  }

  /** Adds a review with the next id and updated_date = now; returns a copy. */
  create(fields: Record<string, unknown> = {}): SimRecord {
    checkFields(fields, CREATE_FORBIDDEN);
    const id = this.maxId + 1;
    const stamp = this.changes.nextStamp(null);
    const record = Object.assign(generateNewReview(this.seed, id, stamp), fields);
    this.maxId = id;
    this.overlay.set(id, record);
    this.changes.append(id, stamp);
    return { ...record };
  }

  /**
   * Changes publication statuses and moves updated_date strictly forward; returns a copy. With `lateByMs`, the new
   * updated_date is that much before now (but still after the review's previous one): a late-visible change; a
   * negative one stamps it that much ahead of now (a writer whose clock runs fast), without moving the stamps of
   * the changes after it.
   */
  setStatus(id: number, change: StatusChange, lateByMs?: number): SimRecord {
    if (lateByMs !== undefined && !Number.isFinite(lateByMs)) {
      throw new StoreError('invalid', 'lateByMs must be a finite number');
    }
    const record = this.materialise(id);
    if (change.client === undefined && change.pwr === undefined) {
      throw new StoreError('invalid', 'a status change needs client and/or pwr');
    }
    for (const value of [change.client, change.pwr]) {
      if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
        throw new StoreError('invalid', 'a status must be a non-empty string');
      }
    }
    if (change.client !== undefined) record.client_publication_status = change.client;
    if (change.pwr !== undefined) record.pwr_publication_status = change.pwr;
    const previous = record.updated_date as number;
    if (lateByMs === undefined) {
      const stamp = this.changes.nextStamp(previous);
      record.updated_date = stamp;
      this.changes.append(id, stamp);
    } else {
      const stamp = this.changes.lateStamp(previous, Math.round(lateByMs));
      record.updated_date = stamp;
      this.changes.insert(id, stamp);
    }
    return { ...record };
  }

  /** Edits non-status fields; updated_date stays (the spec moves it only on publication changes). */
  edit(id: number, fields: Record<string, unknown>): SimRecord {
    checkFields(fields, EDIT_FORBIDDEN);
    const record = this.materialise(id);
    Object.assign(record, fields);
    return { ...record };
  }

  /** Lists a removed review again as it was (a comeback); unknown or listed ids are refused. */
  restore(id: number): void {
    if (!this.removed.has(id)) throw new StoreError('not_found', `no removed review with id ${id}`);
    this.removed.delete(id);
    this.changes.invalidate();
  }

  /** Removes a review: it is no longer listed, found or changeable. */
  remove(id: number): void {
    if (!this.exists(id)) throw new StoreError('not_found', `no review with id ${id}`);
    this.removed.add(id);
    this.overlay.delete(id);
    this.changes.invalidate();
  }

  /**
   * One page of the listing, in ascending id order (the full listing newest first when so configured). Records
   * are shared: serialise, do not mutate.
   */
  list(query: StoreQuery): StorePage {
    const { startId, limit, minUpdated } = query;
    if (minUpdated === null) {
      return this.order === 'descending'
        ? this.listNewestFirst(query.fromCursor ? startId : this.maxId, limit)
        : this.listAll(startId, limit);
    }
    // Every base review was updated before the epoch: past it, only the change log can match.
    if (minUpdated >= BASE_EPOCH_MS) return this.listFromLog(startId, limit, minUpdated);
    return this.scan(startId, limit, minUpdated);
  }

  private exists(id: number): boolean {
    return Number.isInteger(id) && id >= 1 && id <= this.maxId && !this.removed.has(id);
  }

  private current(id: number): SimRecord {
    return this.overlay.get(id) ?? generateBaseReview(this.seed, id);
  }

  private materialise(id: number): SimRecord {
    if (!this.exists(id)) throw new StoreError('not_found', `no review with id ${id}`);
    let record = this.overlay.get(id);
    if (record === undefined) {
      record = generateBaseReview(this.seed, id);
      this.overlay.set(id, record);
    }
    return record;
  }

  private listAll(startId: number, limit: number): StorePage {
    const records: SimRecord[] = [];
    let id = startId;
    for (; id <= this.maxId && records.length < limit; id++) {
      if (!this.removed.has(id)) records.push(this.current(id));
    }
    return { records, nextId: id <= this.maxId ? id : null };
  }

  private listNewestFirst(startId: number, limit: number): StorePage {
    const records: SimRecord[] = [];
    let id = Math.min(startId, this.maxId);
    for (; id >= 1 && records.length < limit; id--) {
      if (!this.removed.has(id)) records.push(this.current(id));
    }
    return { records, nextId: id >= 1 ? id : null };
  }

  private listFromLog(startId: number, limit: number, minUpdated: number): StorePage {
    const ids = this.changes.idsSince(minUpdated);
    let lo = lowerBound(ids.length, (i) => (ids[i] as number) >= startId);
    const records: SimRecord[] = [];
    for (; lo < ids.length && records.length < limit; lo++) {
      if (!this.removed.has(ids[lo] as number)) records.push(this.current(ids[lo] as number));
    }
    return { records, nextId: ids[lo] ?? null };
  }

  // A filter reaching into the base period: walk ids from the cursor and test each one's updated_date.
  private scan(startId: number, limit: number, minUpdated: number): StorePage {
    const base = this.baseUpdatedDates();
    const records: SimRecord[] = [];
    for (let id = startId; id <= this.maxId; id++) {
      if (this.removed.has(id)) continue;
      const changed = this.overlay.get(id);
      const updated = changed !== undefined ? (changed.updated_date as number) : (base[id] as number);
      if (updated < minUpdated) continue;
      if (records.length === limit) return { records, nextId: id };
      records.push(changed ?? generateBaseReview(this.seed, id));
    }
    return { records, nextId: null };
  }

  private baseUpdatedDates(): Float64Array {
    if (this.baseUpdated === null) {
      // 8 bytes per review (8 MB per million), paid only by clients that filter into the base period.
      const dates = new Float64Array(this.baseCount + 1);
      for (let id = 1; id <= this.baseCount; id++) dates[id] = baseUpdatedDate(this.seed, id);
      this.baseUpdated = dates;
    }
    return this.baseUpdated;
  }
}

function checkFields(fields: Record<string, unknown>, forbidden: ReadonlySet<string>): void {
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) {
    throw new StoreError('invalid', 'fields must be an object');
  }
  for (const key of Object.keys(fields)) {
    if (forbidden.has(key)) throw new StoreError('invalid', `field ${key} cannot be set this way`);
  }
}
