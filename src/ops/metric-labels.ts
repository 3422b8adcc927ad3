import { DEFERRAL_REASONS } from '../core/deletion-inference.js';
import { KNOWN_STATUSES, PASS_TYPES, isPassType, type PassType } from '../core/domain.js';
import { EVENT_TYPES } from '../core/events.js';
import { STATUS_FIELDS } from '../core/review.js';
import { REJECT_KINDS, type RejectKind } from '../upstream/types.js';
import type { Instruments } from './metric-definitions.js';

// Label bounding, in one place: every label value of the bridge's metrics comes from a closed set or through a
// bounding function here, so that a value fed from upstream data (status strings, error reasons) can never create
// an unbounded number of series. The closed sets are also pre-created at 0 (presetSeries) for the alerts.

/** Outcome of one pass. */
export type PassOutcome = 'ok' | 'error' | 'aborted';

/** Label of a reject or dead-letter reason: a reject kind, or 'other' for anything outside the closed set. */
export type RejectKindLabel = RejectKind | 'other';

/** Why a review was quarantined: Kafka refused its record, or the rest of its page went through without it. */
export type QuarantineReason = 'record_refused' | 'isolated';

/** Every pass outcome (a label value). */
export const PASS_OUTCOMES: readonly PassOutcome[] = ['ok', 'error', 'aborted'];
/** Every token refresh outcome (a label value). */
export const TOKEN_OUTCOMES = ['ok', 'unauthorized', 'error'] as const;
const ENDPOINTS = ['token', 'reviews'] as const;
const REJECT_KIND_LABELS: readonly RejectKindLabel[] = [...REJECT_KINDS, 'other'];
/** Every quarantine reason (a label value). */
export const QUARANTINE_REASONS: readonly QuarantineReason[] = ['record_refused', 'isolated'];
/** The statuses of a throttled answer (a label value; anything else is 'other'). */
export const THROTTLE_STATUSES = ['429', '503'];
// Pre-created so that rate()/increase() see the step from 0 to 1 of the first auth failure or throttle.
const PRESET_REQUEST_STATUSES = ['200', '401', '402', '403', '404', '429', '503'];
const PAGE_SHRINK_REASONS = ['too_large', 'status_400'] as const;
// Upper bound of distinct free-form words (retry reasons) a label may take before the rest become 'other'.
const MAX_FREE_LABEL_VALUES = 20;

/** Maps an HTTP status to a bounded label: the code as a string, '0' for a connection error, else 'other'. */
export function statusCodeLabel(status: number): string {
  if (status === 0) return '0';
  return Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'other';
}

/** The label of a reject kind; a value outside the closed set (possible only through untyped callers) is 'other'. */
export function rejectKindLabel(kind: string): RejectKindLabel {
  return (REJECT_KINDS as readonly string[]).includes(kind) ? (kind as RejectKind) : 'other';
}

/** Admits short lower-case words as label values up to a fixed number of distinct ones, then maps to 'other'. */
export class BoundedVocabulary {
  private readonly seen = new Set<string>();

  constructor(
    private readonly max: number,
    preset: readonly string[] = [],
  ) {
    for (const v of preset) this.seen.add(v);
  }

  /** The label value of `raw`: itself while the vocabulary has room and it is a short word, else 'other'. */
  label(raw: string): string {
    const v = raw.trim().toLowerCase();
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(v)) return 'other';
    if (this.seen.has(v)) return v;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(v);
    return v;
  }
}

/** Publication status label values: the known statuses (case-insensitive) and 'other'. */
export class StatusLabels {
  private readonly known: Set<string>;

  constructor(knownStatuses: readonly string[] = KNOWN_STATUSES) {
    this.known = new Set(knownStatuses.map((s) => s.toLowerCase()));
  }

  /** Every value the label can take. */
  vocabulary(): string[] {
    return [...this.known, 'other'];
  }

  /** The label of a status value. */
  label(value: string): string {
    const v = value.toLowerCase();
    return this.known.has(v) ? v : 'other';
  }
}

// The retry reasons the upstream client gives (a first vocabulary; others are admitted up to the bound).
const PRESET_RETRY_REASONS = ['status_429', 'status_503', 'timeout', 'connection', 'truncated'] as const;

/** The retry reasons' vocabulary: the usual ones admitted up front, a few more as they come, then 'other'. */
export function retryReasonVocabulary(): BoundedVocabulary {
  return new BoundedVocabulary(MAX_FREE_LABEL_VALUES, PRESET_RETRY_REASONS);
}

/** The pass type label of a pass (anything unknown counts as a poll). */
export function passLabel(pass: string): PassType {
  return isPassType(pass) ? pass : 'incremental';
}

// Counters with labels appear only when first incremented, and increase() cannot see a series' first sample
// as a rise: pre-creating the bounded combinations at 0 lets alerts fire on the very first occurrence.
/** Creates every bounded label combination of the counters at 0. */
export function presetSeries(m: Instruments, statuses: readonly string[]): void {
  for (const endpoint of ENDPOINTS) {
    for (const status of PRESET_REQUEST_STATUSES) m.upstreamRequests.inc({ endpoint, status }, 0);
    for (const reason of PRESET_RETRY_REASONS) m.upstreamRetries.inc({ endpoint, reason }, 0);
    // Histograms too: a dashboard panel on a fresh or idle bridge then shows an empty histogram, not "no data".
    m.upstreamDuration.zero({ endpoint });
  }
  for (const reason of DEFERRAL_REASONS) m.deletionDeferredTotal.inc({ reason }, 0);
  for (const status of THROTTLE_STATUSES) m.upstreamThrottled.inc({ status }, 0);
  for (const reason of PAGE_SHRINK_REASONS) m.pageShrinks.inc({ reason }, 0);
  for (const outcome of TOKEN_OUTCOMES) m.tokenRefreshes.inc({ outcome }, 0);
  for (const pass of PASS_TYPES) {
    m.passDuration.zero({ pass });
    m.limiterWait.zero({ pass });
    m.reviewsProcessedTotal.inc({ pass }, 0);
    for (const outcome of PASS_OUTCOMES) m.passes.inc({ pass, outcome }, 0);
  }
  for (const type of EVENT_TYPES) {
    m.eventsPublishedTotal.inc({ type }, 0);
    m.eventsTruncatedTotal.inc({ type }, 0);
  }
  for (const reason of REJECT_KIND_LABELS) {
    m.deadLetters.inc({ reason }, 0);
    m.recordsRejected.inc({ reason }, 0);
  }
  for (const reason of QUARANTINE_REASONS) m.quarantined.inc({ reason }, 0);
  // From the start, so that the alert on a sweep's finds sees the first one (increase() needs a sample before it).
  for (const foundBy of ['poll', 'sweep']) m.lateChanges.inc({ found_by: foundBy }, 0);
  for (const field of STATUS_FIELDS) {
    m.unknownStatuses.inc({ field }, 0);
    for (const to of statuses) {
      for (const from of ['none', ...statuses]) m.transitions.inc({ field, from, to }, 0);
    }
  }
}
