import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { KNOWN_STATUSES, PASS_TYPES, isPassType, type PassType, type RequestPriority } from '../core/domain.js';
import { EVENT_TYPES, type EventType } from '../core/events.js';
import { STATUS_FIELDS, type StatusField } from '../core/review.js';
import { REJECT_KINDS, type RejectKind, type UpstreamHooks } from '../upstream/types.js';

// All metrics live on the bridge's own registry so that tests and embedders can run several bridges in one
// process without clashing on the global registry. Every label value goes through a bounding function: a label
// fed from upstream data (status strings, error reasons) must never create an unbounded number of series.

/** Outcome of one pass. */
export type PassOutcome = 'ok' | 'error' | 'aborted';

/** Label of a reject or dead-letter reason: a reject kind, or 'other' for anything outside the closed set. */
export type RejectKindLabel = RejectKind | 'other';

/** Why a review was quarantined: Kafka refused its record, or the rest of its page went through without it. */
export type QuarantineReason = 'record_refused' | 'isolated';

/** Options of {@link BridgeMetrics}. */
export interface BridgeMetricsOptions {
  /** Source account: the default label `account` of every series. */
  account: string;
  /** The configured upstream request rate (requests/s): the budget that `poll_budget_share` divides by. */
  upstreamRateLimitRps?: number;
  /** Status values that get their own label value (compared case-insensitively); others become 'other'. */
  knownStatuses?: string[];
  /**
   * Whether this registry also collects the process's metrics (CPU, memory, event loop): true for the only
   * account of a process; with several, the process registry of the fleet collects them once.
   */
  processMetrics?: boolean;
}

const PREFIX = 'reviews_bridge_';
const PASS_OUTCOMES: readonly PassOutcome[] = ['ok', 'error', 'aborted'];
const TOKEN_OUTCOMES = ['ok', 'unauthorized', 'error'] as const;
const ENDPOINTS = ['token', 'reviews'] as const;
const REJECT_KIND_LABELS: readonly RejectKindLabel[] = [...REJECT_KINDS, 'other'];
const BUDGET_WINDOW_MS = 60_000;
const QUARANTINE_REASONS: readonly QuarantineReason[] = ['record_refused', 'isolated'];
const THROTTLE_STATUSES = ['429', '503'];
// Pre-created so that rate()/increase() see the step from 0 to 1 of the first auth failure or throttle.
const PRESET_REQUEST_STATUSES = ['200', '401', '402', '403', '404', '429', '503'];
const PAGE_SHRINK_REASONS = ['too_large', 'status_400'] as const;
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

/** The label of a reject kind; a value outside the closed set (possible only through untyped callers) is 'other'. */
export function rejectKindLabel(kind: string): RejectKindLabel {
  return (REJECT_KINDS as readonly string[]).includes(kind) ? (kind as RejectKind) : 'other';
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
  private readonly pageShrinks: Counter<'reason'>;
  private readonly restores: Counter<'kind'>;
  private readonly clockOffset: Gauge;
  private readonly restoreEntries: Counter<'kind'>;
  private readonly restoreDuration: Histogram<'kind'>;
  private readonly tokenRefreshes: Counter<'outcome'>;
  private readonly limiterWait: Histogram<'pass'>;
  private readonly recordsRejected: Counter<'reason'>;
  private readonly unknownStatuses: Counter<'field'>;
  private readonly reviewsProcessedTotal: Counter<'pass'>;
  private readonly eventsPublishedTotal: Counter<'type'>;
  private readonly eventsTruncatedTotal: Counter<'type'>;
  private readonly deadLetters: Counter<'reason'>;
  private readonly quarantined: Counter<'reason'>;
  private readonly pollRequestTimes: number[] = [];
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
  private readonly reviewsDeletedTotal: Counter;
  private readonly deletionsRefused: Counter;
  private readonly deletionDeferredTotal: Counter<'reason'>;
  private readonly deletionDeferredSweeps: Gauge;
  private readonly paused: Gauge;
  private readonly progressRatio: Gauge<'pass'>;

  constructor(opts: BridgeMetricsOptions) {
    this.registry = new Registry();
    this.registry.setDefaultLabels({ account: opts.account });
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.knownStatuses = new Set((opts.knownStatuses ?? KNOWN_STATUSES).map((s) => s.toLowerCase()));
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
    this.clockOffset = new Gauge({
      name: `${PREFIX}upstream_clock_offset_seconds`,
      help: "Estimated upstream clock minus the bridge's (from the Date headers of its answers; positive: the upstream is ahead). Watermarks use the upstream's time, so an offset costs nothing, but a large one says a clock is wrong.",
      registers,
    });
    this.restores = new Counter({
      name: `${PREFIX}restores_total`,
      help: 'Restores of the Redis snapshot from the Kafka changelog that wrote something: full (Redis empty, foreign or forced) or tail (commits Redis had missed).',
      labelNames: ['kind'],
      registers,
    });
    this.restoreEntries = new Counter({
      name: `${PREFIX}restore_entries_total`,
      help: 'Snapshot entries (and deletion markers) written to Redis by restores from the Kafka changelog.',
      labelNames: ['kind'],
      registers,
    });
    this.restoreDuration = new Histogram({
      name: `${PREFIX}restore_duration_seconds`,
      help: 'Duration of restores from the Kafka changelog that wrote something.',
      labelNames: ['kind'],
      buckets: [0.5, 1, 2, 5, 10, 20, 60, 120, 300],
      registers,
    });
    this.pageShrinks = new Counter({
      name: `${PREFIX}upstream_page_shrinks_total`,
      help: 'Listing pages refused (body over the cap: too_large, or 400: status_400) and asked for again with half the limit.',
      labelNames: ['reason'],
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
      help: 'Upstream records that failed validation, by reject kind (schema, too_large, date_out_of_range, ...).',
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
    this.eventsTruncatedTotal = new Counter({
      name: `${PREFIX}events_truncated_total`,
      help: 'Events over the Kafka message size limit published with free-text fields cut (data.truncated_fields), by type.',
      labelNames: ['type'],
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
      help: 'Records sent to the dead-letter topic, by reject kind.',
      labelNames: ['reason'],
      registers,
    });
    this.quarantined = new Counter({
      name: `${PREFIX}records_quarantined_total`,
      help: "Reviews dead-lettered by reference because they kept failing their page ('record_refused': Kafka refused the record; 'isolated': the rest of the page went through).",
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
    // Poll requests of the last minute over the budget of a minute, computed at scrape from the request times.
    const budget = ((opts.upstreamRateLimitRps ?? 10) * BUDGET_WINDOW_MS) / 1000;
    const pollTimes = this.pollRequestTimes;
    new Gauge({
      name: `${PREFIX}poll_budget_share`,
      help: 'Share of the upstream rate budget spent on incremental polls over the last minute (0..1).',
      registers,
      collect() {
        const since = Date.now() - BUDGET_WINDOW_MS;
        while (pollTimes.length > 0 && pollTimes[0]! < since) pollTimes.shift();
        this.set(Math.min(1, pollTimes.length / budget));
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

    this.reviewsDeletedTotal = new Counter({
      name: `${PREFIX}reviews_deleted_total`,
      help: 'Reviews found deleted upstream by a complete sweep (review.deleted published, snapshot entry removed).',
      registers,
    });
    this.deletionsRefused = new Counter({
      name: `${PREFIX}deletions_refused_total`,
      help: 'Complete sweeps whose deletions were refused because too many reviews were missing (DELETE_MAX_FRACTION).',
      registers,
    });
    this.deletionDeferredTotal = new Counter({
      name: `${PREFIX}deletion_detection_deferred_total`,
      help: 'Complete sweeps whose deletion detection was deferred, by reason (records whose id cannot be read).',
      labelNames: ['reason'],
      registers,
    });
    this.deletionDeferredSweeps = new Gauge({
      name: `${PREFIX}deletion_detection_deferred_sweeps`,
      help: 'Complete sweeps in a row whose deletion detection was deferred (0: the last one detected deletions).',
      registers,
    });
    this.paused = new Gauge({
      name: `${PREFIX}paused`,
      help: '1 while an operator has paused the bridge (reviews-bridge pause): no upstream requests.',
      registers,
    });
    this.progressRatio = new Gauge({
      name: `${PREFIX}pass_progress_ratio`,
      help: 'Fraction done (0..1) of the running sweep, initial load or resync, from reviews seen / estimated total.',
      labelNames: ['pass'],
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
    for (const reason of PAGE_SHRINK_REASONS) this.pageShrinks.inc({ reason }, 0);
    for (const outcome of TOKEN_OUTCOMES) this.tokenRefreshes.inc({ outcome }, 0);
    for (const pass of PASS_TYPES) {
      this.reviewsProcessedTotal.inc({ pass }, 0);
      for (const outcome of PASS_OUTCOMES) this.passes.inc({ pass, outcome }, 0);
    }
    for (const type of EVENT_TYPES) {
      this.eventsPublishedTotal.inc({ type }, 0);
      this.eventsTruncatedTotal.inc({ type }, 0);
    }
    for (const reason of REJECT_KIND_LABELS) {
      this.deadLetters.inc({ reason }, 0);
      this.recordsRejected.inc({ reason }, 0);
    }
    for (const reason of QUARANTINE_REASONS) this.quarantined.inc({ reason }, 0);
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
    const passLabel = (k: string): RequestPriority => (k === 'sweep' ? 'sweep' : 'incremental');
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
      onClockOffset: (seconds) => {
        if (Number.isFinite(seconds)) this.clockOffset.set(seconds);
      },
      onPageShrunk: (reason) => {
        this.pageShrinks.inc({ reason: reason === 'too_large' ? 'too_large' : 'status_400' });
      },
      onTokenRefresh: (outcome) => {
        const o = (TOKEN_OUTCOMES as readonly string[]).includes(outcome) ? outcome : 'error';
        this.tokenRefreshes.inc({ outcome: o });
      },
      onLimiterWait: (kind, seconds) => {
        if (kind === 'incremental') this.pollRequested();
        if (Number.isFinite(seconds) && seconds >= 0) this.limiterWait.observe({ pass: passLabel(kind) }, seconds);
      },
      onReject: (reason) => {
        this.recordsRejected.inc({ reason: rejectKindLabel(reason) });
      },
      onUnknownStatus: (field) => {
        const f = (STATUS_FIELDS as readonly string[]).includes(field) ? field : 'other';
        this.unknownStatuses.inc({ field: f });
      },
    };
  }

  private pollRequested(): void {
    const now = Date.now();
    const times = this.pollRequestTimes;
    times.push(now);
    // Bounded between scrapes too: only the last minute matters, and the limiter caps how many fit in it.
    while (times.length > 0 && times[0]! < now - BUDGET_WINDOW_MS) times.shift();
  }

  /** Counts valid reviews of a committed page. */
  reviewsProcessed(pass: PassType, n: number): void {
    if (n > 0) this.reviewsProcessedTotal.inc({ pass: this.pass(pass) }, n);
  }

  /** Counts events of one type acknowledged by Kafka. */
  eventsPublished(type: EventType, n: number): void {
    if (n > 0) this.eventsPublishedTotal.inc({ type: EVENT_TYPES.includes(type) ? type : 'review.updated' }, n);
  }

  /** Counts one event whose free-text fields were cut to fit the Kafka message size limit (fitEvent's 'truncated'). */
  eventTruncated(type: EventType): void {
    this.eventsTruncatedTotal.inc({ type: EVENT_TYPES.includes(type) ? type : 'review.updated' });
  }

  /** Counts one record sent to the dead-letter topic, by its reject kind. */
  deadLetter(reason: RejectKind): void {
    this.deadLetters.inc({ reason: rejectKindLabel(reason) });
  }

  /** Counts one review quarantined by the pipeline (dead-lettered by reference after breaking its page). */
  recordsQuarantined(reason: QuarantineReason): void {
    this.quarantined.inc({ reason: QUARANTINE_REASONS.includes(reason) ? reason : 'isolated' });
  }

  /** Counts one published status transition; unknown values become 'other', a new review's from is 'none'. */
  statusTransition(field: StatusField, from: string | null, to: string): void {
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

  /** Counts a restore from the Kafka changelog, its entries and duration. */
  restoreFinished(kind: 'full' | 'tail', entries: number, seconds: number): void {
    this.restores.inc({ kind });
    if (entries > 0) this.restoreEntries.inc({ kind }, entries);
    if (Number.isFinite(seconds) && seconds >= 0) this.restoreDuration.observe({ kind }, seconds);
  }

  /** Counts a finished pass and observes its duration. */
  passFinished(pass: PassType, outcome: PassOutcome, seconds: number): void {
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

  /** Counts reviews found deleted upstream (after their review.deleted events were acknowledged). */
  reviewsDeleted(n: number): void {
    if (n > 0) this.reviewsDeletedTotal.inc(n);
  }

  /** Counts a sweep whose deletions the guard refused (the refused-deletion alert watches it). */
  deletionRefused(): void {
    this.deletionsRefused.inc();
  }

  /** Counts a complete sweep whose deletion detection was deferred, by reason. */
  deletionDeferred(reason: string): void {
    this.deletionDeferredTotal.inc({ reason });
  }

  /** Reports how many complete sweeps in a row deferred deletion detection (the deferral alert watches it). */
  setDeletionDeferredSweeps(n: number): void {
    this.deletionDeferredSweeps.set(n);
  }

  /** Reports whether the operator pause flag is set. */
  setPaused(paused: boolean): void {
    this.paused.set(paused ? 1 : 0);
  }

  /** Reports the fraction done of a running sweep or resync; null removes the series (nothing running). */
  passProgress(pass: PassType | 'resync', fraction: number | null): void {
    const label = pass === 'resync' ? 'resync' : this.pass(pass);
    if (fraction === null || !Number.isFinite(fraction)) this.progressRatio.remove({ pass: label });
    else this.progressRatio.set({ pass: label }, Math.min(1, Math.max(0, fraction)));
  }

  /** Reports this replica's role and the lease epoch. */
  setLeadership(state: 'leader' | 'standby', epoch: number): void {
    this.leader.set(state === 'leader' ? 1 : 0);
    this.leaseEpoch.set(epoch);
  }

  private pass(pass: string): PassType {
    return isPassType(pass) ? pass : 'incremental';
  }
}

/** What the ops server exposes at /metrics: a registry, or the merge of several. */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/**
 * The exposition of several registries as one (the accounts of a process and its own): series of one name from
 * every registry under one HELP/TYPE, told apart by their `account` label. prom-client's Registry.merge refuses
 * names that repeat, and plain concatenation would repeat HELP/TYPE lines, which Prometheus rejects; the
 * aggregator built for cluster workers merges by name and keeps series with different labels apart.
 */
export function mergedMetrics(registries: () => readonly Registry[]): MetricsSource {
  return {
    contentType: Registry.PROMETHEUS_CONTENT_TYPE,
    async metrics() {
      const all = registries();
      if (all.length === 1) return all[0]!.metrics();
      const json = await Promise.all(all.map((r) => r.getMetricsAsJSON()));
      return AggregatorRegistry.aggregate(json).metrics();
    },
  };
}

/** What an admin API request asked for (a closed set: the route, never the path as sent). */
export const ADMIN_ACTIONS = [
  'openapi',
  'list',
  'status',
  'pause',
  'resume',
  'sweep',
  'resync',
  'restore',
  'unknown',
] as const;

/** An admin API request's route. */
export type AdminAction = (typeof ADMIN_ACTIONS)[number];

/** How an admin API request ended. */
export const ADMIN_OUTCOMES = ['ok', 'bad_request', 'unauthorized', 'not_found', 'error'] as const;

/** How an admin API request ended. */
export type AdminOutcome = (typeof ADMIN_OUTCOMES)[number];

/** The admin API's metrics (src/admin/): a registry of their own, on /metrics when the admin API is on. */
export class AdminMetrics {
  /** Merged into the ops server's /metrics. */
  readonly registry = new Registry();
  private readonly requests: Counter<'action' | 'outcome'>;

  constructor() {
    this.requests = new Counter({
      name: `${PREFIX}admin_requests_total`,
      help: 'Admin API requests by route (action) and outcome (ok, bad_request, unauthorized, not_found, error).',
      labelNames: ['action', 'outcome'],
      registers: [this.registry],
    });
    for (const action of ADMIN_ACTIONS) for (const outcome of ADMIN_OUTCOMES) this.requests.inc({ action, outcome }, 0);
  }

  /** Counts one admin request. */
  request(action: AdminAction, outcome: AdminOutcome): void {
    this.requests.inc({
      action: ADMIN_ACTIONS.includes(action) ? action : 'unknown',
      outcome: ADMIN_OUTCOMES.includes(outcome) ? outcome : 'error',
    });
  }
}
