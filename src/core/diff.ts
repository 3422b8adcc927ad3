import {
  createdEvent,
  statusChangedEvent,
  updatedEvent,
  type Detection,
  type EventContext,
  type PreviousState,
  type ReviewEvent,
} from './events.js';
import type { FingerprintKey } from './fingerprint-key.js';
import {
  contentDigest,
  entryStateDigest,
  fieldHashesOf,
  fingerprintSource,
  slotFieldHashesOf,
  FINGERPRINT_FIELDS,
  type Fingerprint,
  type FingerprintSource,
  type SnapshotEntry,
} from './snapshot-entry.js';
import { STATUS_FIELDS, type Review } from './review.js';

// The diff is a pure function of (what the snapshot knew, what the upstream shows now): no clock, no I/O,
// so that it can be hammered by property tests and so that a re-processed page yields the same events.

/** Everything the diff needs to decide about one review. */
export interface DiffInput {
  previous: SnapshotEntry | null;
  review: Review;
  detection: Detection;
  /** CloudEvents `source` of this bridge (identifies the account). */
  source: string;
  /** When the page holding this review was fetched (ms): orders reads that share an updated_date. */
  fetchedAt: number;
  /** Suppress review.created (initial load configured so); the snapshot still records the review. */
  suppressCreated: boolean;
  /** How a review.created says it was found, when not `detection` (a poll during the initial load: 'initial'). */
  createdDetection?: Detection;
  /** The key of the fingerprints (null or absent: unkeyed, as entries written before keys). */
  key?: FingerprintKey | null;
  /**
   * Without a snapshot entry: the sequence of the review's review.deleted, when the bridge reported it deleted
   * (a comeback continues after it; absent: a review never seen, which starts at 1).
   */
  deletedSequence?: number;
}

/** Events to publish, in order, and the entry to store (null: the snapshot needs no write). */
export interface DiffResult {
  events: ReviewEvent[];
  next: SnapshotEntry | null;
}

const NOTHING: DiffResult = { events: [], next: null };

/** Compares one review with its snapshot entry and returns the events of the change (status first). */
export function diffReview(input: DiffInput): DiffResult {
  const { previous: prev, review } = input;
  // Nothing goes backwards: an older read (stale page, overlap window) says nothing new. At an equal
  // updated_date only edits can differ, and a page fetched before the one that stored the entry is older.
  // (Decided before any hashing: these reads cost nothing more.)
  if (prev !== null) {
    if (review.updated_date < prev.updatedDate) return NOTHING;
    if (review.updated_date === prev.updatedDate && input.fetchedAt < prev.observedAt) return NOTHING;
  }
  const key = input.key ?? null;
  const source = fingerprintSource(review, key);
  const digest = contentDigest(source, key);
  const keyId = key ? key.id : null;
  // The per-field hashes are only needed for an entry that is written with new content or for naming changed
  // fields: an unchanged review (most of every sweep) is decided on the digest alone.
  const reviewId = review.id;
  const fp = (): Fingerprint => ({ digest, fieldHashes: fieldHashesOf(source, key, reviewId), keyId });

  if (prev === null) {
    const base = baseEntry(review, input.fetchedAt, fp());
    // A review listed again after its review.deleted continues its sequence: restarting at 1 would reuse the
    // ids and sequences consumers already applied.
    const after = input.deletedSequence ?? 0;
    if (input.suppressCreated && after === 0) return { events: [], next: { ...base, sequence: 0 } };
    const detection = input.createdDetection ?? input.detection;
    return {
      events: [createdEvent({ ...context(input, base), detection }, after + 1)],
      next: { ...base, sequence: after + 1 },
    };
  }

  const clientChanged = prev.client !== review.client_publication_status;
  const pwrChanged = prev.pwr !== review.pwr_publication_status;
  const { changed: contentChanged, rekey } = compareContent(prev, digest, keyId, source);
  if (!clientChanged && !pwrChanged && !contentChanged) {
    // An entry written again carries this read's fetch time: a sweep's deletion detection keeps a review read
    // after the sweep started (its updated_date moved: a newest-first sweep may have passed it), and an older page
    // must not overwrite what this read stored.
    const observedAt = Math.max(prev.observedAt, input.fetchedAt);
    if (rekey) return { events: [], next: { ...rehashed(prev, fp()), updatedDate: review.updated_date, observedAt } };
    return review.updated_date > prev.updatedDate
      ? { events: [], next: { ...prev, updatedDate: review.updated_date, observedAt } }
      : NOTHING;
  }

  const current = fp();
  const base = baseEntry(review, input.fetchedAt, current);
  const ctx = context(input, base);
  const previous: PreviousState = {
    client_publication_status: prev.client,
    pwr_publication_status: prev.pwr,
    updated_date: prev.updatedDate,
    sequence: prev.sequence,
  };
  const events: ReviewEvent[] = [];
  let sequence = prev.sequence;
  if (clientChanged || pwrChanged) {
    const statusChanges = STATUS_FIELDS.filter((f) => (f === 'client_publication_status' ? clientChanged : pwrChanged));
    events.push(statusChangedEvent({ ...ctx, previous }, ++sequence, statusChanges));
  }
  if (contentChanged) {
    // An entry of an earlier format compares with its own form of the field hashes.
    const against = !rekey
      ? current.fieldHashes
      : prev.keyId === null || key === null
        ? fieldHashesOf(source, null, review.id)
        : prev.fieldHashForm === 'slot' && prev.keyId === keyId
          ? slotFieldHashesOf(source, key)
          : current.fieldHashes;
    events.push(updatedEvent({ ...ctx, previous }, ++sequence, changedFieldNames(prev.fieldHashes, against)));
  }
  return { events, next: { ...base, sequence } };
}

/** The entry fields of a review as read now (all but the sequence). */
function baseEntry(review: Review, fetchedAt: number, fp: Fingerprint): Omit<SnapshotEntry, 'sequence'> {
  return {
    client: review.client_publication_status,
    pwr: review.pwr_publication_status,
    updatedDate: review.updated_date,
    observedAt: fetchedAt,
    digest: fp.digest,
    fieldHashes: fp.fieldHashes,
    keyId: fp.keyId,
  };
}

function context(input: DiffInput, base: Omit<SnapshotEntry, 'sequence'>): EventContext {
  return {
    source: input.source,
    review: input.review,
    previous: null,
    detection: input.detection,
    stateDigest: entryStateDigest(base),
  };
}

/**
 * Whether the content differs from the entry's, and whether the entry must be written again in the current form
 * (`rekey`). An entry of the same key compares digest to digest; one whose field hashes are keyed per field only
 * (format 2) compares the same way (the digest did not change) and is rewritten with per-review hashes, so the
 * changelog stops linking reviews by equal values; one written before keys compares with the unkeyed form (so an
 * upgrade publishes nothing) and is re-keyed; one of another key (FINGERPRINT_KEY_FILE replaced, or a generated key
 * lost from Redis and from its copy in the changelog) cannot be compared: its content is taken as unchanged and
 * re-keyed (docs/guarantees.md says which edits this can miss).
 */
function compareContent(
  prev: SnapshotEntry,
  digest: string,
  keyId: number | null,
  source: FingerprintSource,
): { changed: boolean; rekey: boolean } {
  if (prev.keyId === keyId) return { changed: digest !== prev.digest, rekey: prev.fieldHashForm === 'slot' };
  if (prev.keyId === null) return { changed: contentDigest(source, null) !== prev.digest, rekey: true };
  return { changed: false, rekey: true };
}

/** The entry with the current fingerprint's digest and field hashes (in the current form) instead of its own. */
function rehashed(prev: SnapshotEntry, fp: Fingerprint): SnapshotEntry {
  const { fieldHashForm: _form, ...rest } = prev;
  return { ...rest, digest: fp.digest, fieldHashes: fp.fieldHashes, keyId: fp.keyId };
}

/** Names the fields whose hashes differ; a digest change with no differing hash (a hash collision) names them all. */
function changedFieldNames(before: number[], after: number[]): string[] {
  const names = FINGERPRINT_FIELDS.filter((_, i) => before[i] !== after[i]);
  return names.length > 0 ? names : [...FINGERPRINT_FIELDS];
}
