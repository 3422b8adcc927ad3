import { diffReview, type DiffResult } from '../../src/diff.js';
import type { Review } from '../../src/upstream/review.js';

/** The diff of a review the snapshot has never seen (an incremental poll): its review.created event and entry. */
export function firstDiff(review: Review, fetchedAt: number): DiffResult {
  return diffReview({
    previous: null,
    review,
    detection: 'incremental',
    source: 'urn:reviews-bridge:test',
    fetchedAt,
    suppressCreated: false,
  });
}
