import type { SimRecord } from './data.js';
import { hash32, hashUnit, mulberry32, type Random } from './prng.js';
import { parseFaults } from './options.js';
import type { Faults, PoisonKind, StatusFault } from './types.js';

// Injected faults. Which requests fail or get cut is drawn from a seeded stream (reproducible for a fixed request
// sequence); which records are malformed is a pure function of (seed, id), so a bad record stays bad on retry, as
// a really broken upstream record would.

/** Faults off. */
export const NO_FAULTS: Faults = {
  errorRate: 0,
  errorStatuses: [500, 502, 503, 504],
  latencyMs: 0,
  truncateRate: 0,
  malformedRate: 0,
  padBytes: 0,
  statusFault: null,
  poison: [],
  dropRate: 0,
  idless: [],
};

const SALT_MALFORMED = 4;
const SALT_MALFORMED_KIND = 5;
const SALT_DICE = 6;
const SALT_DROP = 7;

/** The ways a record can be malformed, one per field the bridge relies on. */
export const MALFORMED_KINDS = ['id-not-integer', 'updated-date-missing', 'status-not-string'] as const;

/** Name of one kind of malformed record. */
export type MalformedKind = (typeof MALFORMED_KINDS)[number];

/** Which kind of malformed record this id becomes at this rate, or null when it stays well-formed. */
export function malformedKind(seed: number, id: number, rate: number): MalformedKind | null {
  if (rate <= 0 || hashUnit(seed, id, SALT_MALFORMED) >= rate) return null;
  return MALFORMED_KINDS[hash32(seed, id, SALT_MALFORMED_KIND) % MALFORMED_KINDS.length] as MalformedKind;
}

/** A broken copy of the record that a schema-validating client must reject. */
export function malform(record: SimRecord, kind: MalformedKind): SimRecord {
  const copy = { ...record };
  switch (kind) {
    case 'id-not-integer':
      copy.id = 'abc';
      break;
    case 'updated-date-missing':
      delete copy.updated_date;
      break;
    case 'status-not-string':
      copy.client_publication_status = 42;
      break;
  }
  return copy;
}

/** Depth of the unknown field of a 'deep-nesting' poison record. */
export const POISON_NESTING_DEPTH = 3000;
/** Length of the comments of a 'huge-text' poison record (3 MiB of ASCII). */
export const POISON_TEXT_LENGTH = 3 * 1024 * 1024;

let hugeText: string | null = null;
let deepValue: unknown = null;

/**
 * A copy of the record with absurd but valid-JSON content of the given kind. The `__proto__` key is defined as an
 * own property (as JSON.parse makes it), so that it is serialized instead of replacing the copy's prototype.
 */
export function poison(record: SimRecord, kind: PoisonKind): SimRecord {
  const copy: SimRecord = { ...record };
  switch (kind) {
    case 'huge-text':
      copy.comments = hugeText ??= 'x'.repeat(POISON_TEXT_LENGTH);
      break;
    case 'far-future-updated':
      copy.updated_date = 2 ** 50;
      break;
    case 'far-created':
      copy.created_date = 1e16;
      break;
    case 'deep-nesting':
      if (deepValue === null) {
        let value: unknown = 'bottom';
        for (let i = 0; i < POISON_NESTING_DEPTH - 1; i++) value = { nested: value };
        deepValue = value;
      }
      copy.deep_unknown_field = deepValue;
      break;
    case 'proto-keys':
      Object.defineProperty(copy, '__proto__', {
        value: { polluted: true, client_publication_status: 'REJECTED' },
        enumerable: true,
        writable: true,
        configurable: true,
      });
      (copy as Record<string, unknown>)['constructor'] = { prototype: { polluted: true } };
      break;
  }
  return copy;
}

/** The records of a page as served under the current faults (malformed and poisoned ones swapped in, padding added). */
export function applyRecordFaults(records: readonly SimRecord[], faults: Faults, seed: number): readonly SimRecord[] {
  const { malformedRate, padBytes, dropRate, poison: poisons, idless: idlessIds } = faults;
  if (malformedRate <= 0 && padBytes <= 0 && dropRate <= 0 && poisons.length === 0 && idlessIds.length === 0) {
    return records;
  }
  const idless = new Set(idlessIds);
  const padding = faults.padBytes > 0 ? 'x'.repeat(faults.padBytes) : null;
  const poisoned = new Map(faults.poison.map((p) => [p.id, p.kind]));
  const kept = faults.dropRate > 0 ? records.filter((r) => !isDropped(seed, r.id, faults.dropRate)) : records;
  return kept.map((record) => {
    const id = typeof record.id === 'number' ? record.id : null;
    const kind = id === null ? null : malformedKind(seed, id, faults.malformedRate);
    let served = kind === null ? record : malform(record, kind);
    const poisonKind = id === null ? undefined : poisoned.get(id);
    if (poisonKind !== undefined) served = poison(served, poisonKind);
    if (id !== null && idless.has(id)) {
      const { id: _dropped, ...rest } = served;
      served = rest as SimRecord;
    }
    return padding === null ? served : { ...served, padding };
  });
}

/** Whether a broken listing (dropRate) silently leaves this review out; a pure function of (seed, id). */
export function isDropped(seed: number, id: unknown, rate: number): boolean {
  return rate > 0 && typeof id === 'number' && hashUnit(seed, id, SALT_DROP) < rate;
}

/** Current fault settings plus the dice that decide per request. */
export class FaultInjector {
  private faults: Faults;
  private readonly dice: Random;

  constructor(seed: number, initial: Partial<Faults> = {}) {
    this.faults = parseFaults({ ...NO_FAULTS, ...initial });
    this.dice = mulberry32(hash32(seed, 0, SALT_DICE));
  }

  /** The settings in force. */
  current(): Faults {
    return {
      ...this.faults,
      errorStatuses: [...this.faults.errorStatuses],
      statusFault: this.faults.statusFault === null ? null : { ...this.faults.statusFault },
      poison: this.faults.poison.map((p) => ({ ...p })),
      idless: [...this.faults.idless],
    };
  }

  /** The status fault for this listing request (counting it down), or null to answer normally. */
  drawStatus(hasCursor: boolean): StatusFault | null {
    const fault = this.faults.statusFault;
    if (fault === null || (fault.cursorOnly === true && !hasCursor)) return null;
    if (fault.times !== undefined) {
      const left = fault.times - 1;
      this.faults = { ...this.faults, statusFault: left > 0 ? { ...fault, times: left } : null };
    }
    return { ...fault };
  }

  /** Replaces the given settings, keeping the others; throws on out-of-range values. */
  set(update: Partial<Faults>): void {
    this.faults = parseFaults({ ...this.faults, ...update });
  }

  /** Status of an injected error for this request, or null to answer normally. */
  drawError(): number | null {
    const { errorRate, errorStatuses } = this.faults;
    if (errorRate <= 0 || errorStatuses.length === 0 || this.dice() >= errorRate) return null;
    return errorStatuses[Math.floor(this.dice() * errorStatuses.length)] as number;
  }

  /** Whether this answer is cut midway. */
  drawTruncation(): boolean {
    return this.faults.truncateRate > 0 && this.dice() < this.faults.truncateRate;
  }
}
