import { fingerprint, type SnapshotEntry } from '../../src/core/snapshot-entry.js';

/** A snapshot entry of review `id` (APPROVED/PENDING, content from the id) written by a page fetched at `observedAt`. */
export function sampleEntry(id: number, observedAt: number, sequence = 1): SnapshotEntry {
  return {
    client: 'APPROVED',
    pwr: 'PENDING',
    updatedDate: 1_000 + id,
    sequence,
    observedAt,
    ...fingerprint({
      id,
      updated_date: 1,
      client_publication_status: 'x',
      pwr_publication_status: 'x',
      headline: `h${id}`,
    }),
  };
}

/** A snapshot entry of review `i` as the Redis script tests store it (APPROVED/APPROVED, content from the id). */
export function storedEntry(i: number, sequence = 1): SnapshotEntry {
  return {
    client: 'APPROVED',
    pwr: 'APPROVED',
    updatedDate: 1_700_000_000_000 + i,
    sequence,
    observedAt: 1_700_000_100_000,
    ...fingerprint({
      id: i,
      updated_date: 1,
      client_publication_status: 'x',
      pwr_publication_status: 'x',
      headline: `headline ${i}`,
      comments: `comment ${i}`,
      rating: 3,
    }),
  };
}
