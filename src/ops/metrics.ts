import { AggregatorRegistry, Counter, Registry, collectDefaultMetrics } from 'prom-client';
import { METRIC_PREFIX, registerMetrics, type Instruments } from './metric-definitions.js';
import type { PassType } from '../core/domain.js';
import { EVENT_TYPES, type EventType } from '../core/events.js';
import { STATUS_FIELDS, type StatusField } from '../core/review.js';
import type { RejectKind, UpstreamHooks } from '../upstream/types.js';
import {
  QUARANTINE_REASONS,
  StatusLabels,
  passLabel,
  presetSeries,
  rejectKindLabel,
  retryReasonVocabulary,
  type QuarantineReason,
} from './metric-labels.js';
import { PollBudget, upstreamRecorders } from './upstream-metrics.js';
import { PassRecorders } from './pass-metrics.js';

export { rejectKindLabel, statusCodeLabel, type QuarantineReason, type RejectKindLabel } from './metric-labels.js';

// All metrics live on the bridge's own registry so that tests and embedders can run several bridges in one
// process without clashing on the global registry. Every label value goes through a bounding function: a label
// fed from upstream data (status strings, error reasons) must never create an unbounded number of series
// (metric-labels.ts). The metrics themselves are defined as data in metric-definitions.ts; this module holds the
// recorders (the upstream client's in upstream-metrics.ts).

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

/**
 * The bridge's Prometheus metrics: its registry and the recorders of what pages produce; the recorders of passes,
 * restores, deletions and leadership come from PassRecorders (pass-metrics.ts), labels from metric-labels.ts.
 */
export class BridgeMetrics extends PassRecorders {
  /** The registry to expose on /metrics (own registry, never the global one). */
  readonly registry: Registry;

  private readonly statuses: StatusLabels;
  private readonly retryReasons = retryReasonVocabulary();
  private watermarkMs: number | null = null;
  private readonly pollBudget: PollBudget;
  /** The last minute's polls: when, reviews read, changes found. */
  private readonly pollReads: Array<[number, number, number]> = [];
  private readonly now: () => number;
  protected readonly m: Instruments;

  constructor(opts: BridgeMetricsOptions) {
    super();
    this.registry = new Registry();
    this.registry.setDefaultLabels({ account: opts.account });
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.statuses = new StatusLabels(opts.knownStatuses);
    const now = opts.now ?? Date.now;
    this.now = now;
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
      pollReadsPerChange: (gauge) => {
        const ratio = this.readsPerChange();
        if (ratio === null) gauge.remove({});
        else gauge.set(ratio);
      },
    });
    this.m.watermark.remove({});
    presetSeries(this.m, this.statuses.vocabulary());
  }

  /** Callbacks for the upstream client (every hook of UpstreamHooks). */
  upstreamHooks(): UpstreamHooks {
    return upstreamRecorders(this.m, this.retryReasons, this.pollBudget);
  }

  /** Counts valid reviews of a committed page. */
  reviewsProcessed(pass: PassType, n: number): void {
    if (n > 0) this.m.reviewsProcessedTotal.inc({ pass: passLabel(pass) }, n);
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
      from: from === null ? 'none' : this.statuses.label(from),
      to: this.statuses.label(to),
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

  /** Records the time of the last complete incremental poll (the feed-freshness alert watches it). */
  incrementalPollCompleted(at: Date): void {
    this.m.lastPoll.set(at.getTime() / 1000);
  }

  /** Records what a committed poll read and found, for reads per change. */
  pollRead(reviews: number, changes: number): void {
    if (changes > 0) this.m.pollChanges.inc(changes);
    this.pollReads.push([this.now(), reviews, changes]);
    this.forgetPolls();
  }

  /** Reviews read by polls per change they found over the last minute; null without a change. */
  readsPerChange(): number | null {
    this.forgetPolls();
    let reads = 0;
    let changes = 0;
    for (const [, r, c] of this.pollReads) {
      reads += r;
      changes += c;
    }
    return changes > 0 ? reads / changes : null;
  }

  private forgetPolls(): void {
    const since = this.now() - 60_000;
    while (this.pollReads.length > 0 && this.pollReads[0]![0] < since) this.pollReads.shift();
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
  'checkpoint',
  'checkpoint_set',
  'reset',
  'unknown',
] as const;

/** An admin API request's route. */
export type AdminAction = (typeof ADMIN_ACTIONS)[number];

/** How an admin API request ended. */
export const ADMIN_OUTCOMES = ['ok', 'bad_request', 'unauthorized', 'not_found', 'conflict', 'error'] as const;

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
