import { createHash } from 'node:crypto';
import { diffReview } from '../../core/diff.js';
import type { PassType } from '../../core/domain.js';
import { refreshedState, type ReviewEvent, type ReviewState } from '../../core/events.js';
import { fitReviewEvents } from '../../core/event-size.js';
import type { FingerprintKey } from '../../core/fingerprint-key.js';
import { encodeEntry, type SnapshotEntry } from '../../core/snapshot-entry.js';
import type { Page, Reject } from '../../upstream/types.js';
import { quarantineReject } from './dead-letters.js';
import type { PipelineDeps } from './types.js';

// The classification of a page: each review against what the bridge knew of it (the snapshot, or this run's page
// in flight) becomes a change (events and the entry to store), a refreshed state row, nothing, or a dead letter.

/** The outcome of one review: its events and the entry to store, under the key of its state. */
export interface ReviewChange {
  id: number;
  /** Identifies the review's state (id, updated_date, statuses, fingerprint): what quarantine remembers. */
  state: string;
  events: ReviewEvent[];
  entry: SnapshotEntry;
}

/** What the pipeline made of one page before publishing it. */
export interface DiffedPage {
  changes: ReviewChange[];
  /** State-topic rows of unchanged reviews (a resync refreshes every review it reads). */
  states: ReviewState[];
  writes: Map<number, SnapshotEntry>;
  rejects: Reject[];
}

/** What a page is diffed with: the run's pass and settings, and what the bridge knew of its reviews. */
export interface DiffInput {
  type: PassType;
  /** Whether created reviews are created as the initial load creates them (marked initial, or suppressed). */
  initialCreates: boolean;
  /** The CloudEvents source, whether the initial load's creations are suppressed, and the log of bad reviews. */
  deps: Pick<PipelineDeps, 'eventSource' | 'initialLoadMode' | 'logger'>;
  key: FingerprintKey | null;
  /** Kafka's message limit, which events are cut to fit (none: no limit known). */
  maxMessageBytes: number | undefined;
  /** The snapshot's entries of the page's reviews. */
  known: ReadonlyMap<number, SnapshotEntry>;
  /** Reviews without an entry that the bridge reported deleted: the sequence of their review.deleted. */
  gone?: ReadonlyMap<number, number>;
  /** The entries this run's page in flight will commit (newer than the snapshot's). */
  overlay: ReadonlyMap<number, SnapshotEntry> | null;
  /** Review states that broke their page before: dead-lettered by reference instead. */
  quarantined: { get(state: string): true | undefined };
}

/**
 * Diffs every review of the page. Each review is handled on its own: anything that throws for one review
 * (fingerprint, event building, entry encoding) makes that review a dead letter and the rest of the page goes on.
 */
export function diffPage(page: Page, input: DiffInput): DiffedPage {
  const { type, known, overlay, quarantined } = input;
  const { eventSource, logger } = input.deps;
  const changes: ReviewChange[] = [];
  const states: ReviewState[] = [];
  const writes = new Map<number, SnapshotEntry>();
  const rejects: Reject[] = [...page.rejects];
  const suppressCreated = input.initialCreates && input.deps.initialLoadMode === 'suppress';
  for (const review of page.reviews) {
    try {
      const previous = writes.get(review.id) ?? overlay?.get(review.id) ?? known.get(review.id) ?? null;
      const result = diffReview({
        previous,
        review,
        detection: type,
        source: eventSource,
        fetchedAt: page.fetchedAt,
        suppressCreated,
        createdDetection: input.initialCreates ? 'initial' : undefined,
        key: input.key,
        ...(previous === null && input.gone?.has(review.id) ? { deletedSequence: input.gone.get(review.id) } : {}),
      });
      if (!result.next) {
        if (type === 'resync' && previous) states.push(refreshedState(eventSource, review, previous.sequence));
        continue;
      }
      const state = `${review.id}|${result.next.updatedDate}|${result.next.client}|${result.next.pwr}|${result.next.digest}`;
      if (quarantined.get(state)) {
        rejects.push(quarantineReject(review.id));
        continue;
      }
      // Encoded here, not only at commit, so that an entry that cannot be stored fails its review, not the page.
      encodeEntry(result.next);
      // Events over Kafka's limit are cut to fit, or the review becomes a too_large dead letter (by reference).
      const fit = input.maxMessageBytes === undefined ? null : fitReviewEvents(result.events, input.maxMessageBytes);
      if (fit?.verdict === 'too_large') {
        rejects.push(fit.reject);
        continue;
      }
      writes.set(review.id, result.next);
      changes.push({ id: review.id, state, events: fit?.events ?? result.events, entry: result.next });
    } catch (err) {
      logger.warn({ id: review.id, err: errorName(err) }, 'review could not be processed; dead-lettered');
      rejects.push({
        id: String(review.id),
        reason: 'processing_failed',
        detail: '(record):processing_failed',
        raw: review,
      });
    }
  }
  return { changes, states, writes, rejects };
}

/** How many events a diffed page holds. */
export function eventCount(diffed: DiffedPage): number {
  return diffed.changes.reduce((n, c) => n + c.events.length, 0);
}

/** Identifies a page across retries: the same pass, cursor and review states make the same key. */
export function pageKey(type: PassType, page: Page, diffed: DiffedPage): string {
  const hash = createHash('sha1').update(`${type}|${page.cursor ?? ''}|`);
  for (const change of diffed.changes) hash.update(change.state).update(';');
  return hash.digest('hex');
}

/** An error's class name for a log line (never its message, which may carry a record's content). */
export function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}
