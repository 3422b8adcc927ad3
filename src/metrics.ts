import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { PassKind, UpstreamHooks } from './upstream/types.js';

// All metrics live on the bridge's own registry so that tests and embedders can run several bridges in one
// process without clashing on the global registry. Every label value goes through a bounding function: a label
// fed from upstream data (status strings, error reasons) must never create an unbounded number of series.

/** Type of a published CloudEvent (one Kafka topic each). */
export type EventType = 'review.created' | 'review.status_changed' | 'review.updated';

/** Kind of pass as labelled in metrics: the initial load is a sweep, but operators want it apart. */
export type PassLabel = 'incremental' | 'sweep' | 'initial';

/** Outcome of one pass. */
export type PassOutcome = 'ok' | 'error' | 'aborted';

/** A publication-status field whose transitions are counted. */
export type StatusFieldLabel = 'client_publication_status' | 'pwr_publication_status';

/** Short, bounded reasons of a dead-lettered record. */
export type DeadLetterReason = 'validation' | 'too_large' | 'other';

/** Options of {@link BridgeMetrics}. */
export interface BridgeMetricsOptions {
  /** Source account: the default label `account` of every series. */
  account: string;
  /** Status values that get their own label value (compared case-insensitively); others become 'other'. */
  knownStatuses?: string[];
}

const PREFIX = 'reviews_bridge_';
const DEFAULT_STATUSES = ['PENDING', 'APPROVED', 'REJECTED'];
const EVENT_TYPES: readonly EventType[] = ['review.created', 'review.status_changed', 'review.updated'];
const PASS_LABELS: readonly PassLabel[] = ['incremental', 'sweep', 'initial'];
const PASS_KINDS: readonly PassKind[] = ['incremental', 'sweep'];
const PASS_OUTCOMES: readonly PassOutcome[] = ['ok', 'error', 'aborted'];
const STATUS_FIELDS: readonly StatusFieldLabel[] = ['client_publication_status', 'pwr_publication_status'];
const TOKEN_OUTCOMES = ['ok', 'unauthorized', 'error'] as const;
const ENDPOINTS = ['token', 'reviews'] as const;
const DEAD_LETTER_REASONS: readonly DeadLetterReason[] = ['validation', 'too_large', 'other'];
const THROTTLE_STATUSES = ['429', '503'];
// Pre-created so that rate()/increase() see the step from 0 to 1 of the first auth failure or throttle.
const PRESET_REQUEST_STATUSES = ['200', '401', '403', '429', '503'];
// zod issue codes: a reject reason naming one of them keeps it as label, anything else is 'other'.
const ZOD_CODES = [
  'invalid_type',
  'too_big',
  'too_small',
  'invalid_format',
  'invalid_value',
  'invalid_union',
  'invalid_key',
  'invalid_element',
  'unrecognized_keys',
  'not_multiple_of',
  'custom',
];
// Upper bound of distinct free-form words (retry reasons) a label may take before the rest become 'other'.
const MAX_FREE_LABEL_VALUES = 20;

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const LIMITER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PASS_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14_400, 28_800, 86_400];
// From half a second (a change caught by the next poll) to a day (a sweep catching what polls missed).
const EVENT_DELAY_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400];

/** Maps an HTTP status to a bounded label: the code as a string, '0' for a connection error, else 'other'. */
export function statusCodeLabel(status: number): string {
  if (status === 0) return '0';
  return Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'other';
}

/** Maps a free-form dead-letter reason to the short enum used as label. */
export function deadLetterReasonLabel(reason: string): DeadLetterReason {
  const r = reason.toLowerCase();
  if (/too[ _-]?large|size|oversize/.test(r)) return 'too_large';
  if (/valid|schema|parse|json|zod/.test(r) || ZOD_CODES.some((code) => r.includes(code))) return 'validation';
  return 'other';
}

/** Maps a validation failure reason (`path:code`, e.g. `updated_date:invalid_type`) to its zod issue code, or 'other'. */
export function rejectReasonLabel(reason: string): string {
  const r = reason.toLowerCase().trim();
  // The code follows the last colon; the path before it is a field name that may itself contain a code's words.
  const tail = r.slice(r.lastIndexOf(':') + 1).trim();
  if (ZOD_CODES.includes(tail)) return tail;
  return ZOD_CODES.find((code) => r.includes(code)) ?? 'other';
}

/** Admits short lower-case words as label values up to a fixed number of distinct ones, then maps to 'other'. */
class BoundedVocabulary {
  private readonly seen = new Set<string>();

  constructor(
    private readonly max: number,
    preset: readonly string[] = [],
  ) {
    for (const v of preset) this.seen.add(v);
  }

  label(raw: string): string {
    const v = raw.trim().toLowerCase();
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(v)) return 'other';
    if (this.seen.has(v)) return v;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(v);
    return v;
  }
}

/** The bridge's Prometheus metrics: the only place metric names and label bounding are defined. */
export class BridgeMetrics {
  /** The registry to expose on /metrics (own registry, never the global one). */
  readonly registry: Registry;

  private readonly knownStatuses: Set<string>;
  private readonly retryReasons = new BoundedVocabulary(MAX_FREE_LABEL_VALUES, [
    'status_429',
    'status_503',
    'timeout',
    'connection',
    'truncated',
  ]);
  private watermarkMs: number | null = null;

  private readonly upstreamRequests: Counter<'endpoint' | 'status'>;
  private readonly upstreamDuration: Histogram<'endpoint'>;
  private readonly upstreamThrottled: Counter<'status'>;
  private readonly upstreamRetries: Counter<'endpoint' | 'reason'>;
  private readonly tokenRefreshes: Counter<'outcome'>;
  private readonly limiterWait: Histogram<'pass'>;
  private readonly recordsRejected: Counter<'reason'>;
  private readonly unknownStatuses: Counter<'field'>;
  private readonly reviewsProcessedTotal: Counter<'pass'>;
  private readonly eventsPublishedTotal: Counter<'type'>;
  private readonly deadLetters: Counter<'reason'>;
  private readonly transitions: Counter<'field' | 'from' | 'to'>;
  private readonly publishDuration: Histogram;
  private readonly commitDuration: Histogram;
  private readonly passes: Counter<'pass' | 'outcome'>;
  private readonly passDuration: Histogram<'pass'>;
  private readonly lastPoll: Gauge;
  private readonly lastCommitted: Gauge;
  private readonly eventDelay: Histogram;
  private readonly watermark: Gauge;
  private readonly sweepSeen: Gauge;
  private readonly sweepRunning: Gauge;
  private readonly leader: Gauge;
  private readonly leaseEpoch: Gauge;

  constructor(opts: BridgeMetricsOptions) {
    this.registry = new Registry();
    this.registry.setDefaultLabels({ account: opts.account });
    collectDefaultMetrics({ register: this.registry });
    this.knownStatuses = new Set((opts.knownStatuses ?? DEFAULT_STATUSES).map((s) => s.toLowerCase()));
    const registers = [this.registry];

    this.upstreamRequests = new Counter({
      name: `${PREFIX}upstream_requests_total`,
      help: "HTTP requests to the upstream API by endpoint and status code ('0' = connection error).",
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.upstreamDuration = new Histogram({
      name: `${PREFIX}upstream_request_duration_seconds`,
      help: 'Duration of one upstream HTTP request, by endpoint.',
      labelNames: ['endpoint'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.upstreamThrottled = new Counter({
      name: `${PREFIX}upstream_throttled_total`,
      help: 'Upstream answers that throttled the bridge (429 or 503).',
      labelNames: ['status'],
      registers,
    });
    this.upstreamRetries = new Counter({
      name: `${PREFIX}upstream_retries_total`,
      help: 'Upstream requests retried, by endpoint and short reason.',
      labelNames: ['endpoint', 'reason'],
      registers,
    });
    this.tokenRefreshes = new Counter({
      name: `${PREFIX}token_refreshes_total`,
      help: 'Access-token fetches by outcome (ok, unauthorized, error).',
      labelNames: ['outcome'],
      registers,
    });
    this.limiterWait = new Histogram({
      name: `${PREFIX}rate_limiter_wait_seconds`,
      help: 'Time a request waited in the client-side rate limiter, by pass kind.',
      labelNames: ['pass'],
      buckets: LIMITER_BUCKETS,
      registers,
    });
    this.recordsRejected = new Counter({
      name: `${PREFIX}records_rejected_total`,
      help: 'Upstream records that failed validation, by zod issue code.',
      labelNames: ['reason'],
      registers,
    });
    this.unknownStatuses = new Counter({
      name: `${PREFIX}unknown_status_values_total`,
      help: 'Publication-status values outside the known set (accepted and counted), by field.',
      labelNames: ['field'],
      registers,
    });
    this.reviewsProcessedTotal = new Counter({
      name: `${PREFIX}reviews_processed_total`,
      help: 'Valid reviews diffed against the snapshot and committed, by pass.',
      labelNames: ['pass'],
      registers,
    });
    this.eventsPublishedTotal = new Counter({
      name: `${PREFIX}events_published_total`,
      help: 'CloudEvents acknowledged by Kafka, by event type.',
      labelNames: ['type'],
      registers,
    });
    this.deadLetters = new Counter({
      name: `${PREFIX}dead_letter_records_total`,
      help: 'Records sent to the dead-letter topic, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.transitions = new Counter({
      name: `${PREFIX}status_transitions_total`,
      help: "Publication-status transitions published, by field, from and to (lower case; 'none' = new review, 'other' = unknown value).",
      labelNames: ['field', 'from', 'to'],
      registers,
    });
    this.publishDuration = new Histogram({
      name: `${PREFIX}kafka_publish_duration_seconds`,
      help: 'Duration of one awaited Kafka send (a batch of events, acks=all).',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.commitDuration = new Histogram({
      name: `${PREFIX}redis_commit_duration_seconds`,
      help: 'Duration of one atomic Redis commit of snapshot entries and checkpoint.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.passes = new Counter({
      name: `${PREFIX}passes_total`,
      help: 'Finished passes by kind and outcome.',
      labelNames: ['pass', 'outcome'],
      registers,
    });
    this.passDuration = new Histogram({
      name: `${PREFIX}pass_duration_seconds`,
      help: 'Duration of a finished pass, by kind.',
      labelNames: ['pass'],
      buckets: PASS_BUCKETS,
      registers,
    });
    this.lastPoll = new Gauge({
      name: `${PREFIX}last_incremental_poll_timestamp_seconds`,
      help: 'Unix time of the last complete (committed) incremental poll; 0 until the first one.',
      registers,
    });
    this.lastCommitted = new Gauge({
      name: `${PREFIX}last_committed_event_timestamp_seconds`,
      help: 'Unix time at which the last event was committed; 0 until the first one.',
      registers,
    });
    this.eventDelay = new Histogram({
      name: `${PREFIX}event_delay_seconds`,
      help: "Delay from a review's updated_date (its status change) to the publication of its event.",
      buckets: EVENT_DELAY_BUCKETS,
      registers,
    });
    this.watermark = new Gauge({
      name: `${PREFIX}watermark_timestamp_seconds`,
      help: 'Watermark of incremental polling (largest committed updated_date) as Unix time; no sample while none.',
      registers,
    });
    this.watermark.remove({});
    // Computed at scrape time so that the lag keeps growing while the bridge is stuck (a stored value would not).
    const watermarkMs = (): number | null => this.watermarkMs;
    new Gauge({
      name: `${PREFIX}watermark_lag_seconds`,
      help: 'How far the watermark trails the clock, computed at scrape; no sample while there is no watermark.',
      registers,
      collect() {
        const w = watermarkMs();
        // No sample at all without a watermark (standby, initial load): prom-client would print NaN as "Nan".
        if (w === null) this.remove({});
        else this.set(Math.max(0, (Date.now() - w) / 1000));
      },
    });
    this.sweepSeen = new Gauge({
      name: `${PREFIX}sweep_reviews_seen`,
      help: 'Reviews seen so far by the running (or last) reconciliation sweep.',
      registers,
    });
    this.sweepRunning = new Gauge({
      name: `${PREFIX}sweep_running`,
      help: '1 while a reconciliation sweep (or the initial load) runs, else 0.',
      registers,
    });
    this.leader = new Gauge({
      name: `${PREFIX}leader`,
      help: '1 when this replica holds the lease of its account and polls, 0 on standby.',
      registers,
    });
    this.leaseEpoch = new Gauge({
      name: `${PREFIX}lease_epoch`,
      help: 'Epoch of the lease last held or seen by this replica (fences commits of a stale leader).',
      registers,
    });

    this.presetSeries();
  }

  // Counters with labels appear only when first incremented, and increase() cannot see a series' first sample
  // as a rise: pre-creating the bounded combinations at 0 lets alerts fire on the very first occurrence.
  private presetSeries(): void {
    for (const endpoint of ENDPOINTS) {
      for (const status of PRESET_REQUEST_STATUSES) this.upstreamRequests.inc({ endpoint, status }, 0);
    }
    for (const status of THROTTLE_STATUSES) this.upstreamThrottled.inc({ status }, 0);
    for (const outcome of TOKEN_OUTCOMES) this.tokenRefreshes.inc({ outcome }, 0);
    for (const pass of PASS_LABELS) {
      this.reviewsProcessedTotal.inc({ pass }, 0);
      for (const outcome of PASS_OUTCOMES) this.passes.inc({ pass, outcome }, 0);
    }
    for (const type of EVENT_TYPES) this.eventsPublishedTotal.inc({ type }, 0);
    for (const reason of DEAD_LETTER_REASONS) this.deadLetters.inc({ reason }, 0);
    for (const field of STATUS_FIELDS) {
      this.unknownStatuses.inc({ field }, 0);
      for (const to of this.statusVocabulary()) {
        for (const from of ['none', ...this.statusVocabulary()]) this.transitions.inc({ field, from, to }, 0);
      }
    }
  }

  private statusVocabulary(): string[] {
    return [...this.knownStatuses, 'other'];
  }

  private statusLabel(value: string): string {
    const v = value.toLowerCase();
    return this.knownStatuses.has(v) ? v : 'other';
  }

  /** Callbacks for the upstream client (every hook of UpstreamHooks). */
  upstreamHooks(): UpstreamHooks {
    const endpointLabel = (e: string): 'token' | 'reviews' => (e === 'token' ? 'token' : 'reviews');
    const passLabel = (k: string): PassKind =>
      (PASS_KINDS as readonly string[]).includes(k) ? (k as PassKind) : 'incremental';
    return {
      onRequest: (endpoint, status, durationSeconds) => {
        const e = endpointLabel(endpoint);
        this.upstreamRequests.inc({ endpoint: e, status: statusCodeLabel(status) });
        if (Number.isFinite(durationSeconds) && durationSeconds >= 0) {
          this.upstreamDuration.observe({ endpoint: e }, durationSeconds);
        }
      },
      onThrottled: (status) => {
        const s = statusCodeLabel(status);
        this.upstreamThrottled.inc({ status: THROTTLE_STATUSES.includes(s) ? s : 'other' });
      },
      onRetry: (endpoint, reason) => {
        this.upstreamRetries.inc({ endpoint: endpointLabel(endpoint), reason: this.retryReasons.label(reason) });
      },
      onTokenRefresh: (outcome) => {
        const o = (TOKEN_OUTCOMES as readonly string[]).includes(outcome) ? outcome : 'error';
        this.tokenRefreshes.inc({ outcome: o });
      },
      onLimiterWait: (kind, seconds) => {
        if (Number.isFinite(seconds) && seconds >= 0) this.limiterWait.observe({ pass: passLabel(kind) }, seconds);
      },
      onReject: (reason) => {
        this.recordsRejected.inc({ reason: rejectReasonLabel(reason) });
      },
      onUnknownStatus: (field) => {
        const f = (STATUS_FIELDS as readonly string[]).includes(field) ? field : 'other';
        this.unknownStatuses.inc({ field: f });
      },
    };
  }

  /** Counts valid reviews of a committed page. */
  reviewsProcessed(pass: PassLabel, n: number): void {
    if (n > 0) this.reviewsProcessedTotal.inc({ pass: this.pass(pass) }, n);
  }

  /** Counts events of one type acknowledged by Kafka. */
  eventsPublished(type: EventType, n: number): void {
    if (n > 0) this.eventsPublishedTotal.inc({ type: EVENT_TYPES.includes(type) ? type : 'review.updated' }, n);
  }

  /** Counts one record sent to the dead-letter topic; the free-form reason is reduced to a short enum. */
  deadLetter(reason: string): void {
    this.deadLetters.inc({ reason: deadLetterReasonLabel(reason) });
  }

  /** Counts one published status transition; unknown values become 'other', a new review's from is 'none'. */
  statusTransition(field: StatusFieldLabel, from: string | null, to: string): void {
    this.transitions.inc({
      field: STATUS_FIELDS.includes(field) ? field : 'client_publication_status',
      from: from === null ? 'none' : this.statusLabel(from),
      to: this.statusLabel(to),
    });
  }

  /** Observes one awaited Kafka send (a batch). */
  observePublish(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.publishDuration.observe(seconds);
  }

  /** Observes one Redis commit. */
  observeCommit(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.commitDuration.observe(seconds);
  }

  /** Counts a finished pass and observes its duration. */
  passFinished(pass: PassLabel, outcome: PassOutcome, seconds: number): void {
    const p = this.pass(pass);
    this.passes.inc({ pass: p, outcome: PASS_OUTCOMES.includes(outcome) ? outcome : 'error' });
    if (Number.isFinite(seconds) && seconds >= 0) this.passDuration.observe({ pass: p }, seconds);
  }

  /** Records the time of the last complete incremental poll (the feed-freshness alert watches it). */
  incrementalPollCompleted(at: Date): void {
    this.lastPoll.set(at.getTime() / 1000);
  }

  /** Records the time of the last committed event. */
  eventsCommitted(at: Date): void {
    this.lastCommitted.set(at.getTime() / 1000);
  }

  /** Observes the delay from a review's updated_date to the publication of its event. */
  observeEventDelay(seconds: number): void {
    // Clock skew between upstream and us can make it slightly negative: count it as immediate.
    if (Number.isFinite(seconds)) this.eventDelay.observe(Math.max(0, seconds));
  }

  /** Exports the watermark (ms since epoch; null when none yet); its lag is computed at each scrape. */
  setWatermark(msEpoch: number | null): void {
    this.watermarkMs = msEpoch !== null && Number.isFinite(msEpoch) ? msEpoch : null;
    if (this.watermarkMs === null) this.watermark.remove({});
    else this.watermark.set(this.watermarkMs / 1000);
  }

  /** Reports progress of the reconciliation sweep (or initial load). */
  sweepProgress(reviewsSeen: number, running: boolean): void {
    this.sweepSeen.set(reviewsSeen);
    this.sweepRunning.set(running ? 1 : 0);
  }

  /** Reports this replica's role and the lease epoch. */
  setLeadership(state: 'leader' | 'standby', epoch: number): void {
    this.leader.set(state === 'leader' ? 1 : 0);
    this.leaseEpoch.set(epoch);
  }

  private pass(pass: string): PassLabel {
    return (PASS_LABELS as readonly string[]).includes(pass) ? (pass as PassLabel) : 'incremental';
  }
}
