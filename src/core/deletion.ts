import { deletedEvent, type ReviewDeletedEvent } from './events.js';
import { entryStateDigest, type SnapshotEntry } from './snapshot-entry.js';

// Deletion detection is pure: which snapshot entries a complete sweep did not see, whether deleting them is
// believable, and the review.deleted events. The I/O (scanning the snapshot, publishing, removing entries) is the
// caller's, in that order: publish the events and tombstones, then remove the entries (fenced, compare-and-delete).

/** What the guard decided about the reviews a complete sweep did not list. */
export type DeletionVerdict =
  | { action: 'delete'; missing: number }
  | { action: 'none' }
  | { action: 'refuse'; missing: number; known: number; fraction: number; maxFraction: number };

/**
 * Guards against a broken listing: more than `maxFraction` of the known reviews missing at once is far likelier
 * a listing that silently dropped records than a real mass deletion, so nothing is deleted then.
 */
export function deletionVerdict(missingCount: number, knownCount: number, maxFraction: number): DeletionVerdict {
  if (missingCount <= 0) return { action: 'none' };
  const fraction = knownCount > 0 ? missingCount / knownCount : 1;
  // More missing than known (an empty snapshot, counts out of step) is nonsense, whatever the allowed fraction.
  if (fraction > maxFraction || missingCount > knownCount)
    return { action: 'refuse', missing: missingCount, known: knownCount, fraction, maxFraction };
  return { action: 'delete', missing: missingCount };
}

/**
 * The entries of reviews a complete sweep did not see. An entry written by a page fetched after the sweep started
 * (a review created, or seen by a poll, meanwhile) is never a candidate: the sweep's pages may predate it.
 */
export function missingFromSweep(
  entries: Iterable<[number, SnapshotEntry]>,
  sawReview: (id: number) => boolean,
  sweepStartedAt: number,
): Array<[number, SnapshotEntry]> {
  const missing: Array<[number, SnapshotEntry]> = [];
  for (const [id, entry] of entries) {
    if (!sawReview(id) && entry.observedAt < sweepStartedAt) missing.push([id, entry]);
  }
  return missing;
}

/** The review.deleted events of the missing reviews, in id order, each continuing its review's sequence. */
export function deletedEvents(
  source: string,
  missing: ReadonlyArray<[number, SnapshotEntry]>,
  detectedAt: number,
): ReviewDeletedEvent[] {
  return [...missing]
    .sort(([a], [b]) => a - b)
    .map(([id, entry]) =>
      deletedEvent(
        source,
        {
          id,
          previous: {
            client_publication_status: entry.client,
            pwr_publication_status: entry.pwr,
            updated_date: entry.updatedDate,
            sequence: entry.sequence,
          },
          stateDigest: entryStateDigest(entry),
        },
        detectedAt,
      ),
    );
}

/**
 * The ids a sweep saw, as a growable bitmap (1 bit per id up to the largest id: 1.25 MB for ids up to 10 million,
 * where a Set of numbers would take hundreds). Add every listed id, rejected records with a readable id included:
 * a record that fails validation still exists upstream.
 */
export class SeenIds {
  private bits = new Uint8Array(1024);
  private count = 0;

  /** Records an id (non-negative integer; anything else is ignored). */
  add(id: number): void {
    if (!Number.isSafeInteger(id) || id < 0) return;
    const byte = id >>> 3;
    if (byte >= this.bits.length) {
      const grown = new Uint8Array(Math.max(byte + 1, this.bits.length * 2));
      grown.set(this.bits);
      this.bits = grown;
    }
    const mask = 1 << (id & 7);
    if ((this.bits[byte]! & mask) === 0) {
      this.bits[byte]! |= mask;
      this.count++;
    }
  }

  /** Whether the id was added. */
  has(id: number): boolean {
    if (!Number.isSafeInteger(id) || id < 0) return false;
    const byte = id >>> 3;
    return byte < this.bits.length && (this.bits[byte]! & (1 << (id & 7))) !== 0;
  }

  /** How many distinct ids were added. */
  get size(): number {
    return this.count;
  }
}
