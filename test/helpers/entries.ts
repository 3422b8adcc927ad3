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
