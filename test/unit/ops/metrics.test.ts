import { PASS_TYPES } from '../../../src/core/domain.js';
import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { validateRecords } from '../../../src/upstream/validate.js';
import { BridgeMetrics, mergedMetrics, rejectKindLabel, statusCodeLabel } from '../../../src/ops/metrics.js';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { EventType } from '../../../src/core/events.js';

type Labels = Record<string, string | number>;

interface Sample {
  value: number;
  labels: Record<string, string | number | undefined>;
  metricName?: string;
}
interface MetricJson {
  name: string;
  type: string;
  values: Sample[];
}

// Reads the registry as data (no text parsing); the cast names the fields prom-client's JSON really carries.
async function metricsJson(m: BridgeMetrics): Promise<MetricJson[]> {
  return (await m.registry.getMetricsAsJSON()) as unknown as MetricJson[];
}

async function metric(m: BridgeMetrics, name: string): Promise<MetricJson> {
  const found = (await metricsJson(m)).find((x) => x.name === name);
  if (!found) throw new Error(`metric ${name} is not registered`);
  return found;
}

// One sample matching the given labels on those keys (a histogram's _bucket/_sum/_count by its full name).
async function sample(m: BridgeMetrics, name: string, labels: Labels = {}): Promise<number | undefined> {
  const data = await metric(m, name.replace(/_(bucket|sum|count)$/, ''));
  const found = data.values.find(
    (v) =>
      (v.metricName ?? data.name) === name &&
      Object.entries(labels).every(([k, want]) => String(v.labels[k]) === String(want)),
  );
  return found?.value;
}

async function seriesCount(m: BridgeMetrics, name: string): Promise<number> {
  return (await metric(m, name)).values.length;
}

const P = 'reviews_bridge_';

describe('mergedMetrics', () => {
  it('exposes the accounts of a process under one HELP/TYPE per metric, series apart by account', async () => {
    const a = new BridgeMetrics({ account: 'a', processMetrics: false });
    const b = new BridgeMetrics({ account: 'b', processMetrics: false });
    const processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
    a.passFinished('incremental', 'ok', 0.2);
    b.passFinished('incremental', 'ok', 0.2);
    b.passFinished('incremental', 'ok', 0.2);
    const text = await mergedMetrics(() => [processRegistry, a.registry, b.registry]).metrics();
    expect(text.match(/^# HELP reviews_bridge_passes_total /gm)).toHaveLength(1);
    expect(text.match(/^# TYPE reviews_bridge_passes_total /gm)).toHaveLength(1);
    expect(text).toMatch(
      /^reviews_bridge_passes_total\{[^}]*pass="incremental"[^}]*outcome="ok"[^}]*account="a"\} 1$/m,
    );
    expect(text).toMatch(
      /^reviews_bridge_passes_total\{[^}]*pass="incremental"[^}]*outcome="ok"[^}]*account="b"\} 2$/m,
    );
    // The process's own metrics once, without an account label.
    expect(text.match(/^process_cpu_user_seconds_total /gm)).toHaveLength(1);
    expect(a.registry.getSingleMetric('process_cpu_user_seconds_total')).toBeUndefined();
  });
});

describe('BridgeMetrics', () => {
  it('uses its own registry with the account default label and default process metrics', async () => {
    const a = new BridgeMetrics({ account: 'acme' });
    const b = new BridgeMetrics({ account: 'other' });
    expect(a.registry).not.toBe(b.registry);
    const text = await a.registry.metrics();
    expect(text).toMatch(/^process_cpu_seconds_total\{account="acme"\}/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds\{account="acme"\}/m);
    expect(text).toMatch(/^reviews_bridge_leader\{account="acme"\} 0$/m);
  });

  it('poll_budget_share is the poll requests of the last minute over the budget of a minute', async () => {
    const m = new BridgeMetrics({ account: 'acme', upstreamRateLimitRps: 10 });
    const hooks = m.upstreamHooks();
    for (let i = 0; i < 60; i++) hooks.onLimiterWait?.('incremental', 0);
    for (let i = 0; i < 300; i++) hooks.onLimiterWait?.('sweep', 0);
    // 60 poll requests of a budget of 600 a minute; sweep requests do not count.
    expect(await m.registry.metrics()).toMatch(/^reviews_bridge_poll_budget_share\{account="acme"\} 0\.1$/m);
  });

  it('registry text contains every documented metric name', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    const text = await m.registry.metrics();
    const names = [
      'upstream_requests_total',
      'upstream_request_duration_seconds',
      'upstream_throttled_total',
      'upstream_retries_total',
      'token_refreshes_total',
      'rate_limiter_wait_seconds',
      'records_rejected_total',
      'unknown_status_values_total',
      'reviews_processed_total',
      'events_published_total',
      'dead_letter_records_total',
      'status_transitions_total',
      'kafka_publish_duration_seconds',
      'redis_commit_duration_seconds',
      'passes_total',
      'pass_duration_seconds',
      'last_incremental_poll_timestamp_seconds',
      'last_committed_event_timestamp_seconds',
      'event_delay_seconds',
      'watermark_timestamp_seconds',
      'watermark_lag_seconds',
      'sweep_reviews_seen',
      'sweep_running',
      'leader',
      'lease_epoch',
      'reviews_deleted_total',
      'deletions_refused_total',
      'paused',
      'pass_progress_ratio',
    ];
    for (const n of names) expect(text).toContain(`# TYPE ${P}${n} `);
    // Prometheus naming: counters end in _total, durations are in seconds.
    for (const { name, type } of await metricsJson(m)) {
      if (!name.startsWith(P)) continue;
      if (type === 'counter') expect(name).toMatch(/_total$/);
      if (type === 'histogram') expect(name).toMatch(/_seconds$/);
    }
  });

  it('upstream hooks move the right series', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    const h = m.upstreamHooks();
    h.onRequest?.('reviews', 200, 0.12);
    h.onRequest?.('reviews', 200, 0.2);
    h.onRequest?.('token', 0, 0.01);
    h.onRequest?.('reviews', 503, 0.3);
    h.onThrottled?.(503, 2);
    h.onThrottled?.(429, null);
    h.onRetry?.('reviews', 'status_503');
    h.onRetry?.('reviews', 'timeout');
    h.onTokenRefresh?.('ok');
    h.onTokenRefresh?.('unauthorized');
    h.onLimiterWait?.('incremental', 0.05);
    h.onLimiterWait?.('sweep', 1.5);
    h.onReject?.('schema');
    h.onReject?.('something nobody expected' as 'schema');
    h.onUnknownStatus?.('pwr_publication_status');

    expect(await sample(m, `${P}upstream_requests_total`, { endpoint: 'reviews', status: '200' })).toBe(2);
    expect(await sample(m, `${P}upstream_requests_total`, { endpoint: 'token', status: '0' })).toBe(1);
    expect(await sample(m, `${P}upstream_requests_total`, { endpoint: 'reviews', status: '503' })).toBe(1);
    expect(await sample(m, `${P}upstream_request_duration_seconds_count`, { endpoint: 'reviews' })).toBe(3);
    expect(await sample(m, `${P}upstream_request_duration_seconds_sum`, { endpoint: 'reviews' })).toBeCloseTo(0.62);
    expect(await sample(m, `${P}upstream_throttled_total`, { status: '503' })).toBe(1);
    expect(await sample(m, `${P}upstream_throttled_total`, { status: '429' })).toBe(1);
    expect(await sample(m, `${P}upstream_retries_total`, { endpoint: 'reviews', reason: 'status_503' })).toBe(1);
    expect(await sample(m, `${P}upstream_retries_total`, { endpoint: 'reviews', reason: 'timeout' })).toBe(1);
    expect(await sample(m, `${P}token_refreshes_total`, { outcome: 'ok' })).toBe(1);
    expect(await sample(m, `${P}token_refreshes_total`, { outcome: 'unauthorized' })).toBe(1);
    expect(await sample(m, `${P}token_refreshes_total`, { outcome: 'error' })).toBe(0);
    expect(await sample(m, `${P}rate_limiter_wait_seconds_count`, { pass: 'incremental' })).toBe(1);
    expect(await sample(m, `${P}rate_limiter_wait_seconds_sum`, { pass: 'sweep' })).toBe(1.5);
    expect(await sample(m, `${P}records_rejected_total`, { reason: 'schema' })).toBe(1);
    expect(await sample(m, `${P}records_rejected_total`, { reason: 'other' })).toBe(1);
    expect(await sample(m, `${P}records_rejected_total`, { reason: 'too_large' })).toBe(0);
    expect(await sample(m, `${P}unknown_status_values_total`, { field: 'pwr_publication_status' })).toBe(1);
    expect(await sample(m, `${P}unknown_status_values_total`, { field: 'client_publication_status' })).toBe(0);
  });

  it('core methods move the right series', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    m.reviewsProcessed('incremental', 100);
    m.reviewsProcessed('sweep', 40);
    m.reviewsProcessed('initial', 7);
    m.reviewsProcessed('sweep', 0);
    m.eventsPublished('review.created', 3);
    m.eventsPublished('review.status_changed', 2);
    m.eventTruncated('review.updated');
    m.deadLetter('schema');
    m.deadLetter('too_large');
    m.deadLetter('kafka said no' as 'schema');
    m.observePublish(0.02);
    m.observeCommit(0.003);
    m.passFinished('incremental', 'ok', 1.2);
    m.passFinished('sweep', 'aborted', 600);
    m.passFinished('incremental', 'error', 0.4);
    m.observeEventDelay(4);
    m.observeEventDelay(-1);

    expect(await sample(m, `${P}reviews_processed_total`, { pass: 'incremental' })).toBe(100);
    expect(await sample(m, `${P}reviews_processed_total`, { pass: 'sweep' })).toBe(40);
    expect(await sample(m, `${P}reviews_processed_total`, { pass: 'initial' })).toBe(7);
    expect(await sample(m, `${P}events_published_total`, { type: 'review.created' })).toBe(3);
    expect(await sample(m, `${P}events_published_total`, { type: 'review.status_changed' })).toBe(2);
    expect(await sample(m, `${P}events_published_total`, { type: 'review.updated' })).toBe(0);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'schema' })).toBe(1);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'too_large' })).toBe(1);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'other' })).toBe(1);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'date_out_of_range' })).toBe(0);
    expect(await sample(m, `${P}events_truncated_total`, { type: 'review.updated' })).toBe(1);
    expect(await sample(m, `${P}events_truncated_total`, { type: 'review.created' })).toBe(0);
    expect(await sample(m, `${P}kafka_publish_duration_seconds_count`)).toBe(1);
    expect(await sample(m, `${P}redis_commit_duration_seconds_sum`)).toBe(0.003);
    expect(await sample(m, `${P}passes_total`, { pass: 'incremental', outcome: 'ok' })).toBe(1);
    expect(await sample(m, `${P}passes_total`, { pass: 'incremental', outcome: 'error' })).toBe(1);
    expect(await sample(m, `${P}passes_total`, { pass: 'sweep', outcome: 'aborted' })).toBe(1);
    expect(await sample(m, `${P}pass_duration_seconds_count`, { pass: 'incremental' })).toBe(2);
    expect(await sample(m, `${P}pass_duration_seconds_bucket`, { pass: 'sweep', le: 900 })).toBe(1);
    expect(await sample(m, `${P}pass_duration_seconds_bucket`, { pass: 'sweep', le: 300 })).toBe(0);
    expect(await sample(m, `${P}event_delay_seconds_count`)).toBe(2);
    // A negative delay (clock skew) counts as immediate.
    expect(await sample(m, `${P}event_delay_seconds_bucket`, { le: 0.5 })).toBe(1);
    expect(await sample(m, `${P}event_delay_seconds_bucket`, { le: 86400 })).toBe(2);
  });

  it('event delay buckets span half a second to a day', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    const les = (await metric(m, `${P}event_delay_seconds`)).values
      .map((v) => v.labels.le)
      .filter((le) => le !== '+Inf' && le !== undefined);
    expect(Math.min(...les.map(Number))).toBe(0.5);
    expect(Math.max(...les.map(Number))).toBe(86400);
  });

  it('status transitions: lower case, unknown values become other, a new review comes from none', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    m.statusTransition('client_publication_status', 'PENDING', 'REJECTED');
    m.statusTransition('client_publication_status', 'pending', 'rejected');
    m.statusTransition('pwr_publication_status', null, 'APPROVED');
    m.statusTransition('pwr_publication_status', 'QUARANTINED', 'SOMETHING_NEW');

    const t = `${P}status_transitions_total`;
    expect(await sample(m, t, { field: 'client_publication_status', from: 'pending', to: 'rejected' })).toBe(2);
    expect(await sample(m, t, { field: 'pwr_publication_status', from: 'none', to: 'approved' })).toBe(1);
    expect(await sample(m, t, { field: 'pwr_publication_status', from: 'other', to: 'other' })).toBe(1);
    // Pre-created at zero so that increase() sees the first transition to rejected.
    expect(await sample(m, t, { field: 'pwr_publication_status', from: 'approved', to: 'rejected' })).toBe(0);
  });

  it('honours a custom set of known statuses', async () => {
    const m = new BridgeMetrics({ account: 'acme', knownStatuses: ['PENDING', 'APPROVED', 'REJECTED', 'ON_HOLD'] });
    m.statusTransition('client_publication_status', 'ON_HOLD', 'REJECTED');
    expect(
      await sample(m, `${P}status_transitions_total`, {
        field: 'client_publication_status',
        from: 'on_hold',
        to: 'rejected',
      }),
    ).toBe(1);
  });

  it('no label value is unbounded: 1000 random strings create a bounded number of series', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    const h = m.upstreamHooks();
    const before = {
      transitions: await seriesCount(m, `${P}status_transitions_total`),
      deadLetters: await seriesCount(m, `${P}dead_letter_records_total`),
      rejects: await seriesCount(m, `${P}records_rejected_total`),
    };
    const rand = (): string => randomBytes(1 + ((randomBytes(1)[0] ?? 0) % 12)).toString('hex');
    for (let i = 0; i < 1000; i++) {
      m.statusTransition('client_publication_status', rand(), rand());
      m.statusTransition('pwr_publication_status', i % 2 ? null : rand(), rand().toUpperCase());
      m.deadLetter(rand() as 'schema');
      h.onReject?.(rand() as 'schema');
      h.onRetry?.('reviews', `r${rand()}`);
      h.onRetry?.('token', rand());
      h.onRequest?.('reviews', Math.floor(Math.random() * 100_000) - 50_000, 0.1);
      h.onThrottled?.(Math.floor(Math.random() * 1000), null);
      h.onUnknownStatus?.(rand());
      h.onLimiterWait?.(rand() as 'sweep', 0.1);
      m.eventsPublished(rand() as EventType, 1);
      m.passFinished(rand() as 'sweep', rand() as 'ok', 1);
      m.reviewsProcessed(rand() as 'sweep', 1);
    }
    // 3 known statuses + 'other' as "to", the same plus 'none' as "from", two fields: all pre-created.
    expect(before.transitions).toBe(2 * 4 * 5);
    expect(await seriesCount(m, `${P}status_transitions_total`)).toBe(before.transitions);
    expect(await seriesCount(m, `${P}dead_letter_records_total`)).toBe(before.deadLetters);
    expect(await seriesCount(m, `${P}records_rejected_total`)).toBe(before.rejects);
    expect(await seriesCount(m, `${P}upstream_retries_total`)).toBeLessThanOrEqual(2 * 21);
    // HTTP codes 100-599, '0' and 'other', two endpoints.
    expect(await seriesCount(m, `${P}upstream_requests_total`)).toBeLessThanOrEqual(2 * 502);
    expect(await seriesCount(m, `${P}upstream_throttled_total`)).toBeLessThanOrEqual(3);
    expect(await seriesCount(m, `${P}unknown_status_values_total`)).toBeLessThanOrEqual(3);
    expect(await seriesCount(m, `${P}events_published_total`)).toBe(3);
    expect(await seriesCount(m, `${P}passes_total`)).toBe(PASS_TYPES.length * 3);
    expect(await seriesCount(m, `${P}reviews_processed_total`)).toBe(PASS_TYPES.length);
    // Every label value anywhere is short and from a safe alphabet.
    for (const { values } of await metricsJson(m)) {
      for (const v of values) {
        for (const value of Object.values(v.labels)) expect(String(value)).toMatch(/^[a-z0-9_.+]{1,40}$|^\+Inf$/i);
      }
    }
  });

  it('timestamps, watermark, sweep and leadership gauges', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    expect(await sample(m, `${P}last_incremental_poll_timestamp_seconds`)).toBe(0);
    // No watermark yet: no sample rather than 0 (a lie) or NaN (which prom-client prints as "Nan").
    expect(await sample(m, `${P}watermark_timestamp_seconds`)).toBeUndefined();
    expect(await sample(m, `${P}watermark_lag_seconds`)).toBeUndefined();
    expect(await m.registry.metrics()).not.toMatch(/^reviews_bridge_.* nan$/im);

    m.incrementalPollCompleted(new Date('2026-01-01T00:00:10Z'));
    m.eventsCommitted(new Date('2026-01-01T00:00:11.500Z'));
    expect(await sample(m, `${P}last_incremental_poll_timestamp_seconds`)).toBe(1767225610);
    expect(await sample(m, `${P}last_committed_event_timestamp_seconds`)).toBe(1767225611.5);

    const wm = Date.now() - 90_000;
    m.setWatermark(wm);
    expect(await sample(m, `${P}watermark_timestamp_seconds`)).toBe(wm / 1000);
    const lag = await sample(m, `${P}watermark_lag_seconds`);
    expect(lag).toBeGreaterThanOrEqual(90);
    expect(lag).toBeLessThan(100);
    m.setWatermark(null);
    expect(await sample(m, `${P}watermark_timestamp_seconds`)).toBeUndefined();
    expect(await sample(m, `${P}watermark_lag_seconds`)).toBeUndefined();

    m.sweepProgress(1234, true);
    expect(await sample(m, `${P}sweep_reviews_seen`)).toBe(1234);
    expect(await sample(m, `${P}sweep_running`)).toBe(1);
    m.sweepProgress(5000, false);
    expect(await sample(m, `${P}sweep_running`)).toBe(0);

    m.setLeadership('leader', 7);
    expect(await sample(m, `${P}leader`)).toBe(1);
    expect(await sample(m, `${P}lease_epoch`)).toBe(7);
    m.setLeadership('standby', 8);
    expect(await sample(m, `${P}leader`)).toBe(0);
    expect(await sample(m, `${P}lease_epoch`)).toBe(8);
  });

  it('deletion, pause and progress series', async () => {
    const m = new BridgeMetrics({ account: 'acme' });
    // Present at 0 from the start, so alerts see the first rise.
    expect(await sample(m, `${P}deletions_refused_total`)).toBe(0);
    expect(await sample(m, `${P}reviews_deleted_total`)).toBe(0);
    expect(await sample(m, `${P}paused`)).toBe(0);
    m.reviewsDeleted(3);
    m.reviewsDeleted(0);
    m.deletionRefused();
    m.setPaused(true);
    expect(await sample(m, `${P}reviews_deleted_total`)).toBe(3);
    expect(await sample(m, `${P}deletions_refused_total`)).toBe(1);
    expect(await sample(m, `${P}paused`)).toBe(1);
    m.setPaused(false);
    expect(await sample(m, `${P}paused`)).toBe(0);

    expect(await seriesCount(m, `${P}pass_progress_ratio`)).toBe(0);
    m.passProgress('sweep', 0.25);
    m.passProgress('resync', 1.7);
    expect(await sample(m, `${P}pass_progress_ratio`, { pass: 'sweep' })).toBe(0.25);
    expect(await sample(m, `${P}pass_progress_ratio`, { pass: 'resync' })).toBe(1);
    m.passProgress('sweep', null);
    m.passProgress('resync', Number.NaN);
    expect(await seriesCount(m, `${P}pass_progress_ratio`)).toBe(0);
  });

  it('the watermark lag keeps growing between updates (computed at scrape)', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: 1_700_000_000_000 });
    try {
      const m = new BridgeMetrics({ account: 'acme' });
      m.setWatermark(Date.now() - 10_000);
      const first = await sample(m, `${P}watermark_lag_seconds`);
      vi.setSystemTime(Date.now() + 30_000);
      const second = await sample(m, `${P}watermark_lag_seconds`);
      expect([first, second]).toEqual([10, 40]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('counts a dead letter by the kind its check decided, never by words in its detail', async () => {
    // The former labeller ran a regex over the reason text: a schema failure at a field path containing "size"
    // became too_large. The kind travels typed from the check to the label now.
    const m = new BridgeMetrics({ account: 'acme' });
    const { rejects } = validateRecords(
      [{ id: 7, updated_date: 1_700_000_000_000, client_publication_status: 'A', pwr_publication_status: 1 }],
      m.upstreamHooks(),
    );
    const reject = { ...rejects[0]!, detail: 'image_size:invalid_type' };
    m.deadLetter(reject.reason);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'schema' })).toBe(1);
    expect(await sample(m, `${P}dead_letter_records_total`, { reason: 'too_large' })).toBe(0);
    expect(await sample(m, `${P}records_rejected_total`, { reason: 'schema' })).toBe(1);
  });

  it('label helpers', () => {
    expect(statusCodeLabel(0)).toBe('0');
    expect(statusCodeLabel(404)).toBe('404');
    expect(statusCodeLabel(99)).toBe('other');
    expect(statusCodeLabel(600)).toBe('other');
    expect(statusCodeLabel(200.5)).toBe('other');
    expect(rejectKindLabel('too_large')).toBe('too_large');
    expect(rejectKindLabel('schema')).toBe('schema');
    // Kinds are never read out of text: a field path naming "size" or a zod code is not a kind.
    expect(rejectKindLabel('page_size:invalid_type')).toBe('other');
    expect(rejectKindLabel('record too large')).toBe('other');
    expect(rejectKindLabel('reviewer@example.com is weird')).toBe('other');
  });
});
