import type { PassType } from '../../core/domain.js';
import type { ReviewEvent } from '../../core/events.js';
import { STATUS_FIELDS } from '../../core/review.js';
import type { DeadLetter } from '../../kafka/publisher.js';
import type { Page } from '../../upstream/types.js';
import type { PassSummary, PipelineMetrics } from './types.js';

/** Adds a committed page to its run's totals and to the metrics (counts, status transitions, event delays). */
export function recordPage(
  metrics: PipelineMetrics,
  summary: PassSummary,
  pass: PassType,
  now: number,
  committed: { page: Page; events: ReviewEvent[]; deadLetters: DeadLetter[] },
): void {
  const { page, events, deadLetters } = committed;
  summary.pages += 1;
  summary.reviews += page.reviews.length;
  summary.events += events.length;
  summary.deadLetters += deadLetters.length;
  if (events.length > 0) {
    summary.changes = (summary.changes ?? 0) + new Set(events.map((e) => e.subject)).size;
    for (const event of events) {
      // Edits keep their updated_date (the upstream moves it on status changes only): they say nothing of lateness.
      if (event.type === 'review.updated') continue;
      const date = event.data.review.updated_date;
      if (summary.oldestChange == null || date < summary.oldestChange) summary.oldestChange = date;
      if (summary.newestChange == null || date > summary.newestChange) {
        summary.newestChange = date;
        summary.newestChangeOf = event.subject;
      }
    }
  }
  metrics.reviewsProcessed(pass, page.reviews.length);
  for (const dl of deadLetters) metrics.deadLetter(dl.reject.reason);
  if (events.length > 0) metrics.eventsCommitted(new Date(now));
  for (const event of events) {
    metrics.eventsPublished(event.type, 1);
    if (event.data.truncated_fields?.length) metrics.eventTruncated(event.type);
    if (event.type === 'review.status_changed') {
      for (const field of STATUS_FIELDS) {
        const change = event.data.status[field];
        if (change.from !== change.to) metrics.statusTransition(field, change.from, change.to);
      }
    }
    // The delay from the upstream's change to Kafka (not for the initial load, nor content edits).
    if (pass !== 'initial' && event.type !== 'review.updated') {
      metrics.observeEventDelay(Math.max(0, (now - event.data.review.updated_date) / 1000));
    }
  }
}
