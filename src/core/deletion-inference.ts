import { SeenIds } from './deletion.js';

// Deletion detection with unreadable records in the listing. A listed record whose id cannot be read might stand
// for any review the sweep did not see; giving up on every such sweep switches detection off for good while an
// upstream keeps one broken record listed. What is inferred instead (docs/bad-input.md, "Unreadable records and
// deletions"):
// - a review stays in the listing at its place in id order, so an unreadable record between the listed ids `after`
//   and `before` can only stand for a review whose id lies strictly between them: such reviews are never deleted
//   while the record is listed (a listing that is not in ascending id order gives no place: detection waits);
// - a record unreadable byte for byte (keyed digest, counted as a multiset) in the previous complete listing too is
//   an old breakage; a new one is news of an upstream change, and detection waits one sweep for it to settle.
// Each deferral is reported (log, metric with a reason, status, alert on consecutive deferrals).

/** How many unreadable records' digests a complete sweep remembers (the checkpoint carries them): beyond, it defers. */
export const UNREADABLE_MEMORY_MAX = 1000;

/** Why deletion detection was deferred at the end of a complete sweep: a closed set (metric label). */
export const DEFERRAL_REASONS = ['new_unreadable', 'too_many_unreadable', 'unordered_listing'] as const;

/** One reason of DEFERRAL_REASONS. */
export type DeferralReason = (typeof DEFERRAL_REASONS)[number];

/** A listed record whose id could not be read: its keyed digest and the listed ids around it (null: none). */
export interface UnreadableRecord {
  digest: string;
  after: number | null;
  before: number | null;
}

/** What a sweep listed, in listing order: the readable ids, the unreadable records and whether ids ascended. */
export class SweepListing {
  /** Every listed id (rejected records with a readable id included: they still exist upstream). */
  readonly seen = new SeenIds();
  /** The unreadable records kept (at most `cap` + 1: one more only tells that there are too many). */
  readonly unreadable: UnreadableRecord[] = [];
  /** How many unreadable records were listed. */
  unreadableCount = 0;
  /** Whether every listed id was larger than the one listed before it. */
  ordered = true;
  private last: number | null = null;
  private open = 0;

  constructor(private readonly cap = UNREADABLE_MEMORY_MAX) {}

  /** Records a listed record with a readable id, in listing order. */
  listed(id: number): void {
    if (this.last !== null && id <= this.last) this.ordered = false;
    this.last = id;
    this.seen.add(id);
    for (; this.open < this.unreadable.length; this.open++) this.unreadable[this.open]!.before = id;
  }

  /** Records a listed record whose id cannot be read, in listing order, by the keyed digest of its raw body. */
  unreadableRecord(digest: string): void {
    this.unreadableCount++;
    if (this.unreadable.length > this.cap) return;
    this.unreadable.push({ digest, after: this.last, before: null });
  }
}

/** What to do at the end of a complete sweep, and the digests to remember for the next one. */
export type DetectionDecision =
  | {
      action: 'detect';
      /** Whether a review the sweep did not see may stand behind an unreadable record (it is kept then). */
      keep: (id: number) => boolean;
      /** Reviews kept so (for the log): how many unreadable records there are. */
      unreadable: number;
      remember: string[];
    }
  | {
      action: 'defer';
      reason: DeferralReason;
      /** Unreadable records listed, and how many of them were not in the previous complete listing. */
      unreadable: number;
      fresh: number;
      /** Null: too many to remember (the next sweep sees every unreadable record as new). */
      remember: string[] | null;
    };

/**
 * Decides whether a complete sweep may tell deletions. `previous`: the digests the previous complete listing
 * remembered (null: unknown, so every unreadable record counts as new).
 */
export function decideDetection(
  listing: Pick<SweepListing, 'unreadable' | 'unreadableCount' | 'ordered'>,
  previous: readonly string[] | null,
  cap = UNREADABLE_MEMORY_MAX,
): DetectionDecision {
  const count = listing.unreadableCount;
  if (count > cap || listing.unreadable.length > cap) {
    return { action: 'defer', reason: 'too_many_unreadable', unreadable: count, fresh: count, remember: null };
  }
  const remember = listing.unreadable.map((u) => u.digest).sort();
  const left = new Map<string, number>();
  for (const d of previous ?? []) left.set(d, (left.get(d) ?? 0) + 1);
  let fresh = 0;
  for (const d of remember) {
    const n = left.get(d) ?? 0;
    if (n > 0) left.set(d, n - 1);
    else fresh++;
  }
  if (fresh > 0) return { action: 'defer', reason: 'new_unreadable', unreadable: count, fresh, remember };
  if (count > 0 && !listing.ordered) {
    return { action: 'defer', reason: 'unordered_listing', unreadable: count, fresh: 0, remember };
  }
  const gaps = listing.unreadable.map(({ after, before }) => [after ?? -Infinity, before ?? Infinity] as const);
  const keep = (id: number) => gaps.some(([after, before]) => id > after && id < before);
  return { action: 'detect', keep, unreadable: count, remember };
}
