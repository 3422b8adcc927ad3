import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { BridgeMetrics } from '../../../src/ops/metrics.js';
import { DurabilityWatch } from '../../../src/redis/durability.js';
import {
  exportedNamesFromText,
  missingMetrics,
  promqlMetricNames,
  templateQueryMetricNames,
  usedMetricNames,
} from '../../helpers/dashboard-metrics.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('metric-name extraction', () => {
  it('finds metric names and skips functions, labels, keywords, durations and Grafana variables', () => {
    const expr = `
      sum by (account, field) (increase(reviews_bridge_status_transitions_total{to="rejected", from!="none"}[15m])) >= 20
      and on (account) group_left(instance)
      3 * sum without (le) (rate(foo_seconds_bucket{account=~"$account", status=~"4..|5.."}[$__rate_interval] offset 1d))
      or absent(bar_total) unless time() - max(baz:recorded) > 1e3 and histogram_quantile(0.99, x_bucket) > Inf`;
    expect(promqlMetricNames(expr).sort()).toEqual(
      ['bar_total', 'baz:recorded', 'foo_seconds_bucket', 'reviews_bridge_status_transitions_total', 'x_bucket'].sort(),
    );
    expect(promqlMetricNames('sum(rate(a_total[5m])) by (le) / on() group_right() b')).toEqual(['a_total', 'b']);
    expect(promqlMetricNames('label_replace(up, "dst", "$1", "src", "(.*)")')).toEqual(['up']);
  });

  it('reads template-variable queries', () => {
    expect(templateQueryMetricNames('label_values(reviews_bridge_leader, account)')).toEqual(['reviews_bridge_leader']);
    expect(templateQueryMetricNames('label_values(reviews_bridge_leader{job="x"}, account)')).toEqual([
      'reviews_bridge_leader',
    ]);
    expect(templateQueryMetricNames('label_values(account)')).toEqual([]);
    expect(templateQueryMetricNames('query_result(max by (account) (reviews_bridge_lease_epoch))')).toEqual([
      'reviews_bridge_lease_epoch',
    ]);
  });

  it('exported names from exposition text include histogram series and metrics without samples yet', () => {
    const text = [
      '# HELP h_seconds x',
      '# TYPE h_seconds histogram',
      'h_seconds_bucket{le="1"} 0',
      '# HELP c_total x',
      '# TYPE c_total counter',
      'g{account="a"} 1',
    ].join('\n');
    expect([...exportedNamesFromText(text)].sort()).toEqual(
      ['c_total', 'g', 'h_seconds', 'h_seconds_bucket', 'h_seconds_count', 'h_seconds_sum'].sort(),
    );
  });
});

describe('dashboard and alert rules only use metrics the bridge exports', () => {
  it('every metric named in the dashboard and in alerts.yml is registered by BridgeMetrics', async () => {
    const used = usedMetricNames(ROOT);
    // Guards the extraction itself: an empty result would make the check below pass vacuously.
    expect(used.size).toBeGreaterThan(20);
    for (const key of [
      'reviews_bridge_status_transitions_total',
      'reviews_bridge_last_incremental_poll_timestamp_seconds',
      'reviews_bridge_event_delay_seconds_bucket',
      'reviews_bridge_leader',
      'process_cpu_seconds_total',
    ]) {
      expect(used.has(key), key).toBe(true);
    }

    const metrics = new BridgeMetrics({ account: 'acme' });
    // The Redis durability watch exports its gauge from a registry of its own (one per process, not per account).
    const watch = new DurabilityWatch(
      null as never,
      { target: { kind: 'standalone', url: 'redis://x' }, waitReplicas: 0, waitTimeoutMs: 1 },
      { logger: pino({ level: 'silent' }) },
    );
    const exported = new Set([
      ...exportedNamesFromText(await metrics.registry.metrics()),
      ...exportedNamesFromText(await watch.registry.metrics()),
    ]);
    expect(missingMetrics(used, exported)).toEqual([]);
  });

  it('a misspelt metric would be reported with where it is used', () => {
    const used = new Map([['reviews_bridge_leaders', ['rule ReviewsBridgeNoLeader']]]);
    expect(missingMetrics(used, new Set(['reviews_bridge_leader']))).toEqual([
      { name: 'reviews_bridge_leaders', usedIn: ['rule ReviewsBridgeNoLeader'] },
    ]);
  });
});
