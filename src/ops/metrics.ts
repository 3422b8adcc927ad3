import { AggregatorRegistry, Counter, Registry, collectDefaultMetrics } from 'prom-client';
import { METRIC_PREFIX, registerMetrics, type Instruments } from './metric-definitions.js';
import { KNOWN_STATUSES, PASS_TYPES, isPassType, type PassType, type RequestPriority } from '../core/domain.js';
import { EVENT_TYPES, type EventType } from '../core/events.js';
import { STATUS_FIELDS, type StatusField } from '../core/review.js';
import { REJECT_KINDS, type RejectKind, type UpstreamHooks } from '../upstream/types.js';

// All metrics live on the bridge's own registry so that tests and embedders can run several bridges in one
// process without clashing on the global registry. Every label value goes through a bounding function: a label
// fed from upstream data (status strings, error reasons) must never create an unbounded number of series. The
// metrics themselves are defined as data in metric-definitions.ts; this module holds the recorders.

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
  /** Times the watermark lag and the poll budget's window (default Date.now; tests pass a fake). */
  now?: () => number;
}

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

/** Upstream requests of incremental polls over the last minute, as a share of the minute's rate budget. */
class PollBudget {
  private readonly times: number[] = [];
  private readonly budget: number;

  constructor(
    rateLimitRps: number,
    private readonly clock: () => number,
  ) {
    this.budget = (rateLimitRps * BUDGET_WINDOW_MS) / 1000;
  }

  /** Records one poll request now. */
  requested(now = this.clock()): void {
    this.times.push(now);
    // Bounded between scrapes too: only the last minute matters, and the limiter caps how many fit in it.
    this.forget(now);
  }

  /** The share (0..1) of the last minute's budget spent on polls. */
  share(now = this.clock()): number {
    this.forget(now);
    return Math.min(1, this.times.length / this.budget);
  }

  private forget(now: number): void {
    while (this.times.length > 0 && this.times[0]! < now - BUDGET_WINDOW_MS) this.times.shift();
  }
}

/** The bridge's Prometheus metrics: the only place label bounding is defined (the metrics: metric-definitions.ts). */
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
  private readonly pollBudget: PollBudget;
  private readonly m: Instruments;

  constructor(opts: BridgeMetricsOptions) {
    this.registry = new Registry();
    this.registry.setDefaultLabels({ account: opts.account });
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.knownStatuses = new Set((opts.knownStatuses ?? KNOWN_STATUSES).map((s) => s.toLowerCase()));
    const now = opts.now ?? Date.now;
    this.pollBudget = new PollBudget(opts.upstreamRateLimitRps ?? 10, now);
    this.m = registerMetrics(this.registry, {
      // Computed at scrape time so that the lag keeps growing while the bridge is stuck (a stored value would not).
      // No sample at all without a watermark (standby, initial load): prom-client would print NaN as "Nan".
      watermarkLag: (gauge) => {
        const w = this.watermarkMs;
        if (w === null) gauge.remove({});
        else gauge.set(Math.max(0, (now() - w) / 1000));
      },
      // Poll requests of the last minute over the budget of a minute, computed at scrape from the request times.
      pollBudgetShare: (gauge) => gauge.set(this.pollBudget.share()),
    });
    this.m.watermark.remove({});
    presetSeries(this.m, this.statusVocabulary());
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
    return upstreamRecorders(this.m, this.retryReasons, this.pollBudget);
  }

  /** Counts valid reviews of a committed page. */
  reviewsProcessed(pass: PassType, n: number): void {
    if (n > 0) this.m.reviewsProcessedTotal.inc({ pass: this.pass(pass) }, n);
  }

  /** Counts events of one type acknowledged by Kafka. */
  eventsPublished(type: EventType, n: number): void {
    if (n > 0) this.m.eventsPublishedTotal.inc({ type: EVENT_TYPES.includes(type) ? type : 'review.updated' }, n);
  }

  /** Counts one event whose free-text fields were cut to fit the Kafka message size limit (fitEvent's 'truncated'). */
  eventTruncated(type: EventType): void {
    this.m.eventsTruncatedTotal.inc({ type: EVENT_TYPES.includes(type) ? type : 'review.updated' });
  }

  /** Counts one record sent to the dead-letter topic, by its reject kind. */
  deadLetter(reason: RejectKind): void {
    this.m.deadLetters.inc({ reason: rejectKindLabel(reason) });
  }

  /** Counts one review quarantined by the pipeline (dead-lettered by reference after breaking its page). */
  recordsQuarantined(reason: QuarantineReason): void {
    this.m.quarantined.inc({ reason: QUARANTINE_REASONS.includes(reason) ? reason : 'isolated' });
  }

  /** Counts one published status transition; unknown values become 'other', a new review's from is 'none'. */
  statusTransition(field: StatusField, from: string | null, to: string): void {
    this.m.transitions.inc({
      field: STATUS_FIELDS.includes(field) ? field : 'client_publication_status',
      from: from === null ? 'none' : this.statusLabel(from),
      to: this.statusLabel(to),
    });
  }

  /** Observes one awaited Kafka send (a batch). */
  observePublish(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.m.publishDuration.observe(seconds);
  }

  /** Observes one Redis commit. */
  observeCommit(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.m.commitDuration.observe(seconds);
  }

  /** Counts a restore from the Kafka changelog, its entries and duration. */
  restoreFinished(kind: 'full' | 'tail', entries: number, seconds: number): void {
    this.m.restores.inc({ kind });
    if (entries > 0) this.m.restoreEntries.inc({ kind }, entries);
    if (Number.isFinite(seconds) && seconds >= 0) this.m.restoreDuration.observe({ kind }, seconds);
  }

  /** Counts a finished pass and observes its duration. */
  passFinished(pass: PassType, outcome: PassOutcome, seconds: number): void {
    const p = this.pass(pass);
    this.m.passes.inc({ pass: p, outcome: PASS_OUTCOMES.includes(outcome) ? outcome : 'error' });
    if (Number.isFinite(seconds) && seconds >= 0) this.m.passDuration.observe({ pass: p }, seconds);
  }

  /** Records the time of the last complete incremental poll (the feed-freshness alert watches it). */
  incrementalPollCompleted(at: Date): void {
    this.m.lastPoll.set(at.getTime() / 1000);
  }

  /** Records the time of the last committed event. */
  eventsCommitted(at: Date): void {
    this.m.lastCommitted.set(at.getTime() / 1000);
  }

  /** Observes the delay from a review's updated_date to the publication of its event. */
  observeEventDelay(seconds: number): void {
    // Clock skew between upstream and us can make it slightly negative: count it as immediate.
    if (Number.isFinite(seconds)) this.m.eventDelay.observe(Math.max(0, seconds));
  }

  /** Exports the watermark (ms since epoch; null when none yet); its lag is computed at each scrape. */
  setWatermark(msEpoch: number | null): void {
    this.watermarkMs = msEpoch !== null && Number.isFinite(msEpoch) ? msEpoch : null;
    if (this.watermarkMs === null) this.m.watermark.remove({});
    else this.m.watermark.set(this.watermarkMs / 1000);
  }

  /** Reports progress of the reconciliation sweep (or initial load). */
  sweepProgress(reviewsSeen: number, running: boolean): void {
    this.m.sweepSeen.set(reviewsSeen);
    this.m.sweepRunning.set(running ? 1 : 0);
  }

  /** Counts reviews found deleted upstream (after their review.deleted events were acknowledged). */
  reviewsDeleted(n: number): void {
    if (n > 0) this.m.reviewsDeletedTotal.inc(n);
  }

  /** Counts a sweep whose deletions the guard refused (the refused-deletion alert watches it). */
  deletionRefused(): void {
    this.m.deletionsRefused.inc();
  }

  /** Counts a complete sweep whose deletion detection was deferred, by reason. */
  deletionDeferred(reason: string): void {
    this.m.deletionDeferredTotal.inc({ reason });
  }

  /** Reports how many complete sweeps in a row deferred deletion detection (the deferral alert watches it). */
  setDeletionDeferredSweeps(n: number): void {
    this.m.deletionDeferredSweeps.set(n);
  }

  /** Reports whether the operator pause flag is set. */
  setPaused(paused: boolean): void {
    this.m.paused.set(paused ? 1 : 0);
  }

  /** Reports the fraction done of a running sweep or resync; null removes the series (nothing running). */
  passProgress(pass: PassType | 'resync', fraction: number | null): void {
    const label = pass === 'resync' ? 'resync' : this.pass(pass);
    if (fraction === null || !Number.isFinite(fraction)) this.m.progressRatio.remove({ pass: label });
    else this.m.progressRatio.set({ pass: label }, Math.min(1, Math.max(0, fraction)));
  }

  /** Reports this replica's role and the lease epoch. */
  setLeadership(state: 'leader' | 'standby', epoch: number): void {
    this.m.leader.set(state === 'leader' ? 1 : 0);
    this.m.leaseEpoch.set(epoch);
  }

  private pass(pass: string): PassType {
    return isPassType(pass) ? pass : 'incremental';
  }
}

/** The upstream client's hooks, recording into the upstream metrics with bounded labels. */
function upstreamRecorders(m: Instruments, retryReasons: BoundedVocabulary, pollBudget: PollBudget): UpstreamHooks {
  const endpointLabel = (e: string): 'token' | 'reviews' => (e === 'token' ? 'token' : 'reviews');
  const passLabel = (k: string): RequestPriority => (k === 'sweep' ? 'sweep' : 'incremental');
  return {
    onRequest: (endpoint, status, durationSeconds) => {
      const e = endpointLabel(endpoint);
      m.upstreamRequests.inc({ endpoint: e, status: statusCodeLabel(status) });
      if (Number.isFinite(durationSeconds) && durationSeconds >= 0) {
        m.upstreamDuration.observe({ endpoint: e }, durationSeconds);
      }
    },
    onThrottled: (status) => {
      const s = statusCodeLabel(status);
      m.upstreamThrottled.inc({ status: THROTTLE_STATUSES.includes(s) ? s : 'other' });
    },
    onRetry: (endpoint, reason) => {
      m.upstreamRetries.inc({ endpoint: endpointLabel(endpoint), reason: retryReasons.label(reason) });
    },
    onClockOffset: (seconds) => {
      if (Number.isFinite(seconds)) m.clockOffset.set(seconds);
    },
    onPageShrunk: (reason) => {
      m.pageShrinks.inc({ reason: reason === 'too_large' ? 'too_large' : 'status_400' });
    },
    onTokenRefresh: (outcome) => {
      const o = (TOKEN_OUTCOMES as readonly string[]).includes(outcome) ? outcome : 'error';
      m.tokenRefreshes.inc({ outcome: o });
    },
    onLimiterWait: (kind, seconds) => {
      if (kind === 'incremental') pollBudget.requested();
      if (Number.isFinite(seconds) && seconds >= 0) m.limiterWait.observe({ pass: passLabel(kind) }, seconds);
    },
    onReject: (reason) => {
      m.recordsRejected.inc({ reason: rejectKindLabel(reason) });
    },
    onUnknownStatus: (field) => {
      const f = (STATUS_FIELDS as readonly string[]).includes(field) ? field : 'other';
      m.unknownStatuses.inc({ field: f });
    },
  };
}

// Counters with labels appear only when first incremented, and increase() cannot see a series' first sample
// as a rise: pre-creating the bounded combinations at 0 lets alerts fire on the very first occurrence.
function presetSeries(m: Instruments, statuses: readonly string[]): void {
  for (const endpoint of ENDPOINTS) {
    for (const status of PRESET_REQUEST_STATUSES) m.upstreamRequests.inc({ endpoint, status }, 0);
  }
  for (const status of THROTTLE_STATUSES) m.upstreamThrottled.inc({ status }, 0);
  for (const reason of PAGE_SHRINK_REASONS) m.pageShrinks.inc({ reason }, 0);
  for (const outcome of TOKEN_OUTCOMES) m.tokenRefreshes.inc({ outcome }, 0);
  for (const pass of PASS_TYPES) {
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
  for (const field of STATUS_FIELDS) {
    m.unknownStatuses.inc({ field }, 0);
    for (const to of statuses) {
      for (const from of ['none', ...statuses]) m.transitions.inc({ field, from, to }, 0);
    }
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
      name: `${METRIC_PREFIX}admin_requests_total`,
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
