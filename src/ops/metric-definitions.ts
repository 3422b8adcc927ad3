import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

// The bridge's metrics as data: one entry per metric (name, help, type, labels, buckets), registered by
// registerMetrics and recorded through BridgeMetrics (metrics.ts). Adding a metric is one entry here plus the
// recorder that feeds it; docs/reference/metrics.md is generated from what is registered (`npm run docs`).

/** Prefix of every metric name of the bridge. */
export const METRIC_PREFIX = 'reviews_bridge_';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const LIMITER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PASS_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14_400, 28_800, 86_400];
// From half a second (a change caught by the next poll) to a day (a sweep catching what polls missed).
const EVENT_DELAY_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400];

/** One metric as data: its name without the prefix, its help text, type, label names and histogram buckets. */
export interface MetricDefinition {
  type: 'counter' | 'gauge' | 'histogram';
  name: string;
  help: string;
  labels?: readonly string[];
  buckets?: readonly number[];
}

/** Every metric of the bridge, in registration order (the order of /metrics). */
export const METRICS = {
  upstreamRequests: {
    type: 'counter',
    name: 'upstream_requests_total',
    help: "HTTP requests to the upstream API by endpoint and status code ('0' = connection error).",
    labels: ['endpoint', 'status'],
  },
  upstreamDuration: {
    type: 'histogram',
    name: 'upstream_request_duration_seconds',
    help: 'Duration of one upstream HTTP request, by endpoint.',
    labels: ['endpoint'],
    buckets: LATENCY_BUCKETS,
  },
  upstreamThrottled: {
    type: 'counter',
    name: 'upstream_throttled_total',
    help: 'Upstream answers that throttled the bridge (429 or 503).',
    labels: ['status'],
  },
  upstreamRetries: {
    type: 'counter',
    name: 'upstream_retries_total',
    help: 'Upstream requests retried, by endpoint and short reason.',
    labels: ['endpoint', 'reason'],
  },
  clockOffset: {
    type: 'gauge',
    name: 'upstream_clock_offset_seconds',
    help: "Estimated upstream clock minus the bridge's (from the Date headers of its answers; positive: the upstream is ahead). Watermarks use the upstream's time, so an offset costs nothing, but a large one says a clock is wrong.",
  },
  restores: {
    type: 'counter',
    name: 'restores_total',
    help: 'Restores of the Redis snapshot from the Kafka changelog that wrote something: full (Redis empty, foreign or forced) or tail (commits Redis had missed).',
    labels: ['kind'],
  },
  restoreEntries: {
    type: 'counter',
    name: 'restore_entries_total',
    help: 'Snapshot entries (and deletion markers) written to Redis by restores from the Kafka changelog.',
    labels: ['kind'],
  },
  restoreDuration: {
    type: 'histogram',
    name: 'restore_duration_seconds',
    help: 'Duration of restores from the Kafka changelog that wrote something.',
    labels: ['kind'],
    buckets: [0.5, 1, 2, 5, 10, 20, 60, 120, 300],
  },
  pageShrinks: {
    type: 'counter',
    name: 'upstream_page_shrinks_total',
    help: 'Listing pages refused (body over the cap: too_large, or 400: status_400) and asked for again with half the limit.',
    labels: ['reason'],
  },
  tokenRefreshes: {
    type: 'counter',
    name: 'token_refreshes_total',
    help: 'Access-token fetches by outcome (ok, unauthorized, error).',
    labels: ['outcome'],
  },
  limiterWait: {
    type: 'histogram',
    name: 'rate_limiter_wait_seconds',
    help: 'Time a request waited in the client-side rate limiter, by pass kind.',
    labels: ['pass'],
    buckets: LIMITER_BUCKETS,
  },
  recordsRejected: {
    type: 'counter',
    name: 'records_rejected_total',
    help: 'Upstream records that failed validation, by reject kind (schema, too_large, date_out_of_range, ...).',
    labels: ['reason'],
  },
  unknownStatuses: {
    type: 'counter',
    name: 'unknown_status_values_total',
    help: 'Publication-status values outside the known set (accepted and counted), by field.',
    labels: ['field'],
  },
  reviewsProcessedTotal: {
    type: 'counter',
    name: 'reviews_processed_total',
    help: 'Valid reviews diffed against the snapshot and committed, by pass.',
    labels: ['pass'],
  },
  eventsTruncatedTotal: {
    type: 'counter',
    name: 'events_truncated_total',
    help: 'Events over the Kafka message size limit published with free-text fields cut (data.truncated_fields), by type.',
    labels: ['type'],
  },
  eventsPublishedTotal: {
    type: 'counter',
    name: 'events_published_total',
    help: 'CloudEvents acknowledged by Kafka, by event type.',
    labels: ['type'],
  },
  deadLetters: {
    type: 'counter',
    name: 'dead_letter_records_total',
    help: 'Records sent to the dead-letter topic, by reject kind.',
    labels: ['reason'],
  },
  quarantined: {
    type: 'counter',
    name: 'records_quarantined_total',
    help: "Reviews dead-lettered by reference because they kept failing their page ('record_refused': Kafka refused the record; 'isolated': the rest of the page went through).",
    labels: ['reason'],
  },
  transitions: {
    type: 'counter',
    name: 'status_transitions_total',
    help: "Publication-status transitions published, by field, from and to (lower case; 'none' = new review, 'other' = unknown value).",
    labels: ['field', 'from', 'to'],
  },
  publishDuration: {
    type: 'histogram',
    name: 'kafka_publish_duration_seconds',
    help: 'Duration of one awaited Kafka send (a batch of events, acks=all).',
    buckets: LATENCY_BUCKETS,
  },
  commitDuration: {
    type: 'histogram',
    name: 'redis_commit_duration_seconds',
    help: 'Duration of one atomic Redis commit of snapshot entries and checkpoint.',
    buckets: LATENCY_BUCKETS,
  },
  passes: {
    type: 'counter',
    name: 'passes_total',
    help: 'Finished passes by kind and outcome.',
    labels: ['pass', 'outcome'],
  },
  passDuration: {
    type: 'histogram',
    name: 'pass_duration_seconds',
    help: 'Duration of a finished pass, by kind.',
    labels: ['pass'],
    buckets: PASS_BUCKETS,
  },
  lastPoll: {
    type: 'gauge',
    name: 'last_incremental_poll_timestamp_seconds',
    help: 'Unix time of the last complete (committed) incremental poll; 0 until the first one.',
  },
  lastCommitted: {
    type: 'gauge',
    name: 'last_committed_event_timestamp_seconds',
    help: 'Unix time at which the last event was committed; 0 until the first one.',
  },
  eventDelay: {
    type: 'histogram',
    name: 'event_delay_seconds',
    help: "Delay from a review's updated_date (its status change) to the publication of its event.",
    buckets: EVENT_DELAY_BUCKETS,
  },
  watermark: {
    type: 'gauge',
    name: 'watermark_timestamp_seconds',
    help: 'Watermark of incremental polling (largest committed updated_date) as Unix time; no sample while none.',
  },
  watermarkLag: {
    type: 'gauge',
    name: 'watermark_lag_seconds',
    help: 'How far the watermark trails the clock, computed at scrape; no sample while there is no watermark.',
  },
  pollBudgetShare: {
    type: 'gauge',
    name: 'poll_budget_share',
    help: 'Share of the upstream rate budget spent on incremental polls over the last minute (0..1).',
  },
  pollLookback: {
    type: 'gauge',
    name: 'poll_lookback_seconds',
    help: 'How far before the watermark incremental polls start: twice the latest lateness seen in the last hour, between the floor and POLL_OVERLAP_MS, and no more than a quarter of an interval of the rate budget reads.',
  },
  lateChanges: {
    type: 'counter',
    name: 'late_changes_total',
    help: 'Changes that became visible after time polls had covered: found by a poll within its lookback (found_by=poll), by a trailing read of tier n (found_by=trailing_n), or later by a sweep (found_by=sweep: the feed was late by more than its bound).',
    labels: ['found_by'],
  },
  latenessSeen: {
    type: 'gauge',
    name: 'lateness_seen_seconds',
    help: 'The lateness of the latest late change found, by finder (poll, trailing_n, sweep): how long after covered time it showed (at least).',
    labels: ['found_by'],
  },
  trailingWindow: {
    type: 'gauge',
    name: 'trailing_window_seconds',
    help: "The window the last trailing read of each tier read (before the upstream's present): the lateness it covers plus the time since the tier's read before.",
    labels: ['tier'],
  },
  trailingBound: {
    type: 'gauge',
    name: 'trailing_bound_seconds',
    help: "The bound each tier holds now for a late change within its coverage: its last read's (time since the tier's read before plus the read's own), or the wait since its last read began while that is longer (a tier short of budget).",
    labels: ['tier'],
  },
  trailingShare: {
    type: 'gauge',
    name: 'trailing_share_rps',
    help: "Each trailing tier's share of the upstream requests/s the polls leave: max-min fair, so no tier gets less than min(its need, the budget / tiers) whatever the others ask.",
    labels: ['tier'],
  },
  trailingRequests: {
    type: 'counter',
    name: 'trailing_requests_total',
    help: "Upstream requests of each trailing tier's reads (pages, the last empty answer included): over time and the rate budget, the share each tier took.",
    labels: ['tier'],
  },
  freshnessBound: {
    type: 'gauge',
    name: 'freshness_bound_seconds',
    help: 'The bound that holds now for a change that shows up to POLL_OVERLAP_MS late (the widest trailing tier); above FRESHNESS_BOUND_MS when the rate budget cannot carry the trailing reads. No sample while none ran.',
  },
  pollChanges: {
    type: 'counter',
    name: 'poll_changes_total',
    help: 'Reviews with an event found by incremental polls (reviews_processed_total{pass="incremental"} over this: reads per change).',
  },
  pollReadsPerChange: {
    type: 'gauge',
    name: 'poll_reads_per_change',
    help: 'Reviews read by incremental polls per change they found over the last minute; no sample without a change.',
  },
  pollsOverrun: {
    type: 'counter',
    name: 'polls_overrun_total',
    help: 'Incremental polls that took longer than POLL_INTERVAL_MS (logged once per episode).',
  },
  sweepSeen: {
    type: 'gauge',
    name: 'sweep_reviews_seen',
    help: 'Reviews seen so far by the running (or last) reconciliation sweep.',
  },
  sweepRunning: {
    type: 'gauge',
    name: 'sweep_running',
    help: '1 while a reconciliation sweep (or the initial load) runs, else 0.',
  },
  leader: {
    type: 'gauge',
    name: 'leader',
    help: '1 when this replica holds the lease of its account and polls, 0 on standby.',
  },
  leadershipRefused: {
    type: 'gauge',
    name: 'leadership_refused',
    help: "1 while this replica's leadership of its account is refused before acting on Kafka (another installation's state or topics, a changelog topic that does not fit), by the setting the refusal names; the lease is given up meanwhile.",
    labels: ['setting'],
  },
  leaseEpoch: {
    type: 'gauge',
    name: 'lease_epoch',
    help: 'Epoch of the lease last held or seen by this replica (fences commits of a stale leader).',
  },
  reviewsDeletedTotal: {
    type: 'counter',
    name: 'reviews_deleted_total',
    help: 'Reviews found deleted upstream by a complete sweep (review.deleted published, snapshot entry removed).',
  },
  deletionsRefused: {
    type: 'counter',
    name: 'deletions_refused_total',
    help: 'Complete sweeps whose deletions were refused because too many reviews were missing (DELETE_MAX_FRACTION).',
  },
  deletionDeferredTotal: {
    type: 'counter',
    name: 'deletion_detection_deferred_total',
    help: 'Complete sweeps that left deletions undecided, by reason (records whose id cannot be read).',
    labels: ['reason'],
  },
  deletionDeferredSweeps: {
    type: 'gauge',
    name: 'deletion_detection_deferred_sweeps',
    help: 'Complete sweeps in a row that left deletions undecided (0: the last one decided every missing review).',
  },
  paused: {
    type: 'gauge',
    name: 'paused',
    help: '1 while an operator has paused the bridge (reviews-bridge pause): no upstream requests.',
  },
  snapshotEvicting: {
    type: 'gauge',
    name: 'snapshot_evicting',
    help: "1 while Redis keeps evicting the account's snapshot (its last restore saw evictions or lost keys: maxmemory too small under an evicting policy): nothing is published for the account until a restore holds.",
  },
  topicDurabilityUnmet: {
    type: 'gauge',
    name: 'kafka_topic_durability_unmet',
    help: "1 for an existing topic with fewer replicas or a lower min.insync.replicas than KAFKA_REPLICATION_FACTOR (or, unset, the brokers' defaults) asks; read when the leadership connects.",
    labels: ['topic'],
  },
  progressRatio: {
    type: 'gauge',
    name: 'pass_progress_ratio',
    help: 'Fraction done (0..1) of the running sweep, initial load or resync, from reviews seen / estimated total.',
    labels: ['pass'],
  },
} as const satisfies Record<string, MetricDefinition>;

/** The key of a metric in {@link METRICS}. */
export type MetricKey = keyof typeof METRICS;

type LabelsOf<D> = D extends { labels: readonly (infer L extends string)[] } ? L : string;
type InstrumentOf<D extends MetricDefinition> = D['type'] extends 'counter'
  ? Counter<LabelsOf<D>>
  : D['type'] extends 'gauge'
    ? Gauge<LabelsOf<D>>
    : Histogram<LabelsOf<D>>;

/** The registered prom-client instrument of every metric, typed by its labels. */
export type Instruments = { [K in MetricKey]: InstrumentOf<(typeof METRICS)[K]> };

/** A gauge computed at scrape time (it sets or removes its own value). */
export type GaugeCollector = (gauge: Gauge) => void;

/** Registers every metric of {@link METRICS} on `registry`; gauges named in `collectors` are computed at scrape. */
export function registerMetrics(
  registry: Registry,
  collectors: Partial<Record<MetricKey, GaugeCollector>> = {},
): Instruments {
  const instruments: Record<string, Counter | Gauge | Histogram> = {};
  for (const [key, def] of Object.entries(METRICS) as [MetricKey, MetricDefinition][]) {
    const common = {
      name: `${METRIC_PREFIX}${def.name}`,
      help: def.help,
      registers: [registry],
      ...(def.labels ? { labelNames: [...def.labels] } : {}),
    };
    const collector = collectors[key];
    if (def.type === 'counter') instruments[key] = new Counter(common);
    else if (def.type === 'histogram')
      instruments[key] = new Histogram({ ...common, buckets: [...(def.buckets ?? [])] });
    else
      instruments[key] = new Gauge({
        ...common,
        ...(collector
          ? {
              collect() {
                collector(this);
              },
            }
          : {}),
      });
  }
  return instruments as Instruments;
}
