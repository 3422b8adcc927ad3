import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { METRICS, METRIC_PREFIX, registerMetrics, type MetricDefinition } from '../../../src/ops/metric-definitions.js';
import { BridgeMetrics } from '../../../src/ops/metrics.js';

// The metrics table is the definition: what BridgeMetrics registers is exactly its entries, no more, no less.

interface Registered {
  name: string;
  help: string;
  type: string;
  labelNames?: readonly string[];
}

const definitions = Object.values(METRICS) as MetricDefinition[];

describe('metric definitions', () => {
  it('gives every metric its own name, and every histogram its buckets', () => {
    expect(new Set(definitions.map((d) => d.name)).size).toBe(definitions.length);
    for (const d of definitions) expect(d.type !== 'histogram' || (d.buckets?.length ?? 0) > 0).toBe(true);
  });

  it('registers each entry with its name, type, help and labels', () => {
    const registry = new Registry();
    registerMetrics(registry);
    const registered = registry.getMetricsAsArray() as unknown as Registered[];
    expect(registered.map((m) => m.name)).toEqual(definitions.map((d) => `${METRIC_PREFIX}${d.name}`));
    registered.forEach((m, i) => {
      const d = definitions[i]!;
      expect([m.type, m.help, [...(m.labelNames ?? [])]]).toEqual([d.type, d.help, [...(d.labels ?? [])]]);
    });
  });

  it('is all that BridgeMetrics registers besides the process metrics', () => {
    const metrics = new BridgeMetrics({ account: 'a', processMetrics: false });
    const names = (metrics.registry.getMetricsAsArray() as unknown as Registered[]).map((m) => m.name);
    expect(names).toEqual(definitions.map((d) => `${METRIC_PREFIX}${d.name}`));
  });

  it('computes a gauge given a collector at scrape time', async () => {
    const registry = new Registry();
    let scrapes = 0;
    registerMetrics(registry, { pollBudgetShare: (gauge) => gauge.set(++scrapes / 10) });
    await registry.metrics();
    expect(await registry.metrics()).toMatch(/^reviews_bridge_poll_budget_share 0\.2$/m);
  });
});
