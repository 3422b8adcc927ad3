import { diffReview, type DiffResult } from '../../src/core/diff.js';
import type { Review } from '../../src/core/review.js';

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
