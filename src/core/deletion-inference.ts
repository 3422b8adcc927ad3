import { SeenIds } from './deletion.js';

// Deletion detection with unreadable records in the listing. A listed record whose id cannot be read might stand
// for a review the sweep did not see; giving up on every such sweep switches detection off for good while an
// upstream keeps one broken record listed. What is inferred instead needs no order of the listing
// (docs/bad-input.md, "Unreadable records and deletions", proves it):
// - a record that first appears in a complete sweep (a keyed digest of its bytes not listed as often by the
//   previous complete sweep) may stand for any review of the snapshot that sweep did not list: those are its
//   candidates, remembered with its digest;
// - while it stays listed byte for byte, it may stand only for those of its candidates still not listed (a review
//   listed since is not it); a record whose bytes change is a new one;
// - a review not listed that no record may stand for is deleted; the candidates are kept.
// What stays undecidable (more candidates kept than records that could stand for them) is reported: log, metric
// with a reason, status, alert on consecutive sweeps.

/** How many unreadable records' digests a complete sweep remembers (the checkpoint carries them): beyond, it defers. */
export const UNREADABLE_MEMORY_MAX = 1000;

/** How many candidate ids the remembered records hold together at most (the checkpoint carries them). */
export const CANDIDATE_MEMORY_MAX = 1000;

/** Why a complete sweep left deletions undecided: a closed set (metric label). */
export const DEFERRAL_REASONS = [
  'new_unreadable',
  'ambiguous_unreadable',
  'too_many_unreadable',
  'too_many_candidates',
] as const;

/** One reason of DEFERRAL_REASONS. */
export type DeferralReason = (typeof DEFERRAL_REASONS)[number];

/** What a sweep listed, in any order: the readable ids and the digests of the records whose id cannot be read. */
export class SweepListing {
  /** Every listed id (rejected records with a readable id included: they still exist upstream). */
  readonly seen = new SeenIds();
  /** The digests of the unreadable records (at most `cap` + 1: one more only tells that there are too many). */
  readonly digests: string[] = [];
  /** How many unreadable records were listed. */
  unreadableCount = 0;
  /** The updated_date of the last review listed, and whether every one so far was at most (at least) the one before. */
  private lastStamp: number | null = null;
  private descending = true;
  private ascending = true;
  /** The last readable id listed, and whether every one so far was above (below) the one before. */
  private lastId: number | null = null;
  private idsUp = true;
  private idsDown = true;

  constructor(private readonly cap = UNREADABLE_MEMORY_MAX) {}

  /** Records a listed record with a readable id (and, when readable, its updated_date, in listing order). */
  listed(id: number, updatedDate?: number): void {
    this.seen.add(id);
    if (this.lastId !== null && id <= this.lastId) this.idsUp = false;
    if (this.lastId !== null && id >= this.lastId) this.idsDown = false;
    this.lastId = id;
    if (updatedDate === undefined) return;
    if (this.lastStamp !== null && updatedDate > this.lastStamp) this.descending = false;
    if (this.lastStamp !== null && updatedDate < this.lastStamp) this.ascending = false;
    this.lastStamp = updatedDate;
  }

  /**
   * Whether the listing looked sorted newest first (every review's updated_date at most the one listed before).
   * Only such a listing can pass a review that still exists: one whose updated_date moves while the sweep pages
   * jumps ahead of its cursor (listed by id, a review stays where it was; oldest first, it moves to the end).
   */
  get newestFirst(): boolean {
    return this.descending && this.lastStamp !== null;
  }

  /**
   * Whether the listing looked sorted by id (either way) or oldest first, and not newest first: a review that still
   * exists cannot pass its cursor (by id it stays where it was; oldest first, a move takes it to the end), so only a
   * review gone is missing. False for a listing that may be newest first (one by id may look so too, when stamps
   * follow ids) or in an order it cannot tell.
   */
  get stable(): boolean {
    return !this.newestFirst && (this.idsUp || this.idsDown || (this.ascending && this.lastStamp !== null));
  }

  /** Records a listed record whose id cannot be read, by the keyed digest of its raw body. */
  unreadableRecord(digest: string): void {
    this.unreadableCount++;
    if (this.digests.length <= this.cap) this.digests.push(digest);
  }

  /** Whether there are more unreadable records than can be remembered (detection defers then). */
  get tooMany(): boolean {
    return this.unreadableCount > this.cap;
  }
}

/**
 * The updated_date a read must start from to list every one of `candidates` (the snapshot entries of reviews a
 * newest-first sweep did not list) that still exists: a review's updated_date never goes below the one its entry
 * holds, so such a read lists it unless it moves again while the read pages. Null without candidates.
 */
export function confirmationSince(candidates: Iterable<{ updatedDate: number }>): number | null {
  let since: number | null = null;
  for (const { updatedDate } of candidates) since = since === null ? updatedDate : Math.min(since, updatedDate);
  return since;
}

/** What a complete listing leaves the next one to compare with (the checkpoint carries it). */
export interface UnreadableMemory {
  /** Keyed digests of the unreadable records, sorted, repeats kept; null: unknown (every record counts as new). */
  digests: readonly string[] | null;
  /** Per digest, the reviews (ascending ids) its records may stand for; null: unknown (every record is new). */
  candidates: Readonly<Record<string, readonly number[]>> | null;
}

/** What a complete sweep infers from its unreadable records once it knows which snapshot reviews it did not list. */
export interface Inference {
  /** Reviews not listed that an unreadable record may stand for: this sweep does not delete them. */
  held: ReadonlySet<number>;
  /** The memory for the next complete sweep. */
  memory: { digests: string[]; candidates: Record<string, number[]> | null };
  /** Unreadable records listed, and how many of them the previous complete listing did not have. */
  unreadable: number;
  fresh: number;
  /** At least this many held reviews are gone upstream (more held than records that could stand for them). */
  undecided: number;
  /** Why deletions stay undecided; null: every held review may be one of the records. */
  reason: DeferralReason | null;
}

/**
 * Infers which reviews the sweep's unreadable records may stand for. `listed`: the digests of the sweep's
 * unreadable records (any order, repeats kept); `previous`: the memory of the previous complete listing (null:
 * none); `unlisted`: every review of the snapshot the sweep did not list (whenever its entry was written).
 */
export function inferUnreadable(
  listed: readonly string[],
  previous: UnreadableMemory | null,
  unlisted: Iterable<number>,
  cap = CANDIDATE_MEMORY_MAX,
): Inference {
  const missing = new Set(unlisted);
  const all = [...missing].sort((a, b) => a - b);
  const digests = [...listed].sort();
  const counts = countOf(digests);
  const before = previous?.candidates ? countOf(previous.digests ?? []) : new Map<string, number>();
  const candidates: Record<string, number[]> = {};
  const held = new Set<number>();
  let fresh = 0;
  let total = 0;
  let capacity = 0;
  for (const [digest, count] of counts) {
    const known = previous?.candidates ? own(previous.candidates, digest) : undefined;
    const had = known === undefined ? 0 : (before.get(digest) ?? 0);
    // As often as before: the same records, which stand for what they could stand for and is still not listed.
    const kept = count <= had && known ? known.filter((id) => missing.has(id)) : all;
    fresh += Math.max(0, count - had);
    candidates[digest] = kept;
    total += kept.length;
    capacity += Math.min(count, kept.length);
    for (const id of kept) held.add(id);
  }
  const unreadable = digests.length;
  if (total > cap) {
    // Too many to carry with every checkpoint: nothing this sweep did not list is deleted, and the next sweep
    // takes every record as new.
    const undecided = Math.max(0, missing.size - unreadable);
    const memory = { digests, candidates: null };
    return { held: missing, memory, unreadable, fresh, undecided, reason: 'too_many_candidates' };
  }
  const undecided = Math.max(0, held.size - capacity);
  const reason = undecided === 0 ? null : fresh > 0 ? 'new_unreadable' : 'ambiguous_unreadable';
  return { held, memory: { digests, candidates }, unreadable, fresh, undecided, reason };
}

function countOf(digests: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const d of digests) counts.set(d, (counts.get(d) ?? 0) + 1);
  return counts;
}

// A record's own property only (a digest is hex, but the memory comes from storage).
function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
}
