import { deletedEvents, deletionVerdict, missingFromSweep } from '../../core/deletion.js';
import type { ReviewDeletedEvent } from '../../core/events.js';
import type { BridgeMetrics } from '../../ops/metrics.js';
import type { PagePipeline } from '../pipeline.js';
import type { SnapshotEntry } from '../../core/snapshot-entry.js';
import type { ChangelogBatch, ChangelogOffsets } from '../../kafka/publisher.js';
import type { Span } from '@opentelemetry/api';
import { endSpan, SPAN_ATTRIBUTES, withTraceparent } from '../../ops/tracing.js';

// The end of a complete sweep: reviews in the snapshot that the sweep did not list were deleted upstream. Order:
// publish review.deleted, the state topic's tombstones and the changelog's deletion markers (one transaction),
// then remove the entries (compare-and-delete, fenced); a crash in between is repaired from the changelog.

/** The snapshot operations of deletion detection. */
export interface DeletionSnapshot {
  scanEntries(): AsyncIterable<Array<[number, SnapshotEntry]>>;
  removeEntries(epoch: number, entries: ReadonlyArray<[number, SnapshotEntry]>): Promise<number>;
}

/** The Kafka operation of deletion detection. */
export interface DeletionSink {
  publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets>;
}

/** Settings and adapters of deletion detection. */
export interface DeletionDeps {
  snapshot: DeletionSnapshot;
  sink: DeletionSink;
  metrics: Pick<BridgeMetrics, 'reviewsDeleted' | 'deletionRefused'>;
  /** At most this fraction of the known reviews may be deleted by one sweep (a broken listing otherwise). */
  maxFraction: number;
}

/** What one complete sweep found. */
export type DeletionOutcome = { deleted: number } | { refused: number; known: number };

/**
 * Compares a complete sweep's ids with the snapshot and reports the reviews it did not list as deleted. Call it
 * once the sweep's last page is committed, so that a review's deletion follows its other events.
 */
export async function detectDeletions(
  pipeline: PagePipeline,
  deps: DeletionDeps,
  epoch: number,
  sawReview: (id: number) => boolean,
  sweepStartedAt: number,
  span: Span | null = null,
): Promise<DeletionOutcome> {
  try {
    const outcome = await detect(pipeline, deps, epoch, sawReview, sweepStartedAt, span);
    if (span) {
      span.setAttribute('reviews_bridge.deleted', 'deleted' in outcome ? outcome.deleted : 0);
      span.setAttribute('reviews_bridge.deletion_refused', 'refused' in outcome);
      endSpan(span, 'ok');
    }
    return outcome;
  } catch (err) {
    if (span) endSpan(span, 'error', err);
    throw err;
  }
}

async function detect(
  pipeline: PagePipeline,
  deps: DeletionDeps,
  epoch: number,
  sawReview: (id: number) => boolean,
  sweepStartedAt: number,
  span: Span | null,
): Promise<DeletionOutcome> {
  const missing: Array<[number, SnapshotEntry]> = [];
  let known = 0;
  for await (const batch of deps.snapshot.scanEntries()) {
    known += batch.length;
    missing.push(...missingFromSweep(batch, sawReview, sweepStartedAt));
  }
  const verdict = deletionVerdict(missing.length, known, deps.maxFraction);
  const { logger, eventSource } = pipeline.deps;
  if (verdict.action === 'none') return { deleted: 0 };
  if (verdict.action === 'refuse') {
    logger.error(
      { missing: verdict.missing, known, maxFraction: verdict.maxFraction },
      'a complete sweep did not list too many known reviews; deleting none (a broken listing is likelier)',
    );
    deps.metrics.deletionRefused();
    return { refused: verdict.missing, known };
  }
  // review.deleted carries the traceparent of the sweep's deletions span (no page produced it).
  const events = withTraceparent(deletedEvents(eventSource, missing, pipeline.clock()), span);
  span?.setAttribute(SPAN_ATTRIBUTES.events, events.length);
  const removed = await pipeline.commitDeletions(epoch, events, missing, deps.sink, (e, entries) =>
    deps.snapshot.removeEntries(e, entries),
  );
  deps.metrics.reviewsDeleted(removed);
  logger.info({ deleted: removed }, 'reviews deleted upstream reported');
  return { deleted: removed };
}
