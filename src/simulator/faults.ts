import type { SimRecord } from './data.js';
import { hash32, hashUnit, mulberry32, type Random } from './prng.js';
import { parseFaults } from './options.js';
import type { Faults } from './types.js';

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
};

const SALT_MALFORMED = 4;
const SALT_MALFORMED_KIND = 5;
const SALT_DICE = 6;

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

/** The records of a page as served under the current faults (malformed ones swapped in, padding added). */
export function applyRecordFaults(records: readonly SimRecord[], faults: Faults, seed: number): readonly SimRecord[] {
  if (faults.malformedRate <= 0 && faults.padBytes <= 0) return records;
  const padding = faults.padBytes > 0 ? 'x'.repeat(faults.padBytes) : null;
  return records.map((record) => {
    const kind = typeof record.id === 'number' ? malformedKind(seed, record.id, faults.malformedRate) : null;
    const served = kind === null ? record : malform(record, kind);
    return padding === null ? served : { ...served, padding };
  });
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
    return { ...this.faults, errorStatuses: [...this.faults.errorStatuses] };
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
