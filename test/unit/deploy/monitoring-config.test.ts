import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  SHIPPED_PROMETHEUS,
  alertRules,
  alertmanagerConfig,
  durationSeconds,
  prometheusConfig,
  rulesWithShorterFor,
} from '../../../scripts/monitoring-config.js';

// The configuration scripts/monitoring.sh derives: Prometheus's from the shipped file, Alertmanager's, and the
// rules copy with shorter `for` durations that the live alert test and the demo load.

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const shippedPrometheus = readFileSync(`${ROOT}${SHIPPED_PROMETHEUS}`, 'utf8');
const shippedRules = readFileSync(`${ROOT}deploy/prometheus/alerts.yml`, 'utf8');

interface Job {
  job_name: string;
  metrics_path?: string;
  static_configs?: { targets: string[] }[];
  dns_sd_configs?: unknown;
}

describe('prometheusConfig', () => {
  const setup = {
    targets: ['127.0.0.1:9464', '127.0.0.1:9465'],
    alertmanager: '127.0.0.1:9093',
    self: '127.0.0.1:9090',
    interval: '1s',
    rulesFile: 'alerts.yml',
  };

  it("keeps the shipped jobs and their settings, with the caller's targets, intervals and Alertmanager", () => {
    const shipped = parseYaml(shippedPrometheus) as { scrape_configs: Job[] };
    const out = parseYaml(prometheusConfig(shippedPrometheus, setup)) as {
      global: Record<string, string>;
      rule_files: string[];
      scrape_configs: Job[];
      alerting: unknown;
    };
    expect(out.global).toEqual({ scrape_interval: '1s', evaluation_interval: '1s' });
    expect(out.rule_files).toEqual(['alerts.yml']);
    expect(out.scrape_configs.map((j) => j.job_name)).toEqual(shipped.scrape_configs.map((j) => j.job_name));
    const bridge = out.scrape_configs.find((j) => j.job_name === 'reviews-bridge')!;
    expect(bridge.dns_sd_configs).toBeUndefined();
    expect(bridge.static_configs).toEqual([{ targets: setup.targets }]);
    expect(bridge.metrics_path).toBe(shipped.scrape_configs.find((j) => j.job_name === 'reviews-bridge')!.metrics_path);
    expect(out.scrape_configs.find((j) => j.job_name === 'prometheus')!.static_configs).toEqual([
      { targets: ['127.0.0.1:9090'] },
    ]);
    expect(out.alerting).toEqual({ alertmanagers: [{ static_configs: [{ targets: ['127.0.0.1:9093'] }] }] });
  });

  it('refuses no targets, a bad interval, and a shipped file without the bridge job', () => {
    expect(() => prometheusConfig(shippedPrometheus, { ...setup, targets: [] })).toThrow(/--targets/);
    expect(() => prometheusConfig(shippedPrometheus, { ...setup, interval: 'fast' })).toThrow(/--interval 'fast'/);
    expect(() => prometheusConfig('scrape_configs: [{job_name: other}]\n', setup)).toThrow(/'reviews-bridge'/);
  });
});

describe('alertmanagerConfig', () => {
  it('routes every alert to the webhook, one group per alert, account and field', () => {
    const out = parseYaml(alertmanagerConfig('http://127.0.0.1:8099/alerts', '2s')) as {
      route: { receiver: string; group_by: string[]; group_wait: string };
      receivers: { name: string; webhook_configs: { url: string }[] }[];
    };
    expect(out.route.group_by).toEqual(['alertname', 'account', 'field']);
    expect(out.route.group_wait).toBe('2s');
    expect(out.receivers).toEqual([
      { name: out.route.receiver, webhook_configs: [{ url: 'http://127.0.0.1:8099/alerts', send_resolved: true }] },
    ]);
    expect(() => alertmanagerConfig('not a url', '2s')).toThrow(/--webhook/);
  });
});

describe('rulesWithShorterFor', () => {
  it('changes only the `for` of the named alerts; every other field of every rule is the shipped one', () => {
    const before = alertRules(shippedRules);
    const after = alertRules(rulesWithShorterFor(shippedRules, { ReviewsBridgeRejectedSpike: '2s' }));
    expect([...after.keys()]).toEqual([...before.keys()]);
    for (const [name, rule] of after) {
      if (name === 'ReviewsBridgeRejectedSpike') expect(rule).toEqual({ ...before.get(name), for: '2s' });
      else expect(rule).toEqual(before.get(name));
    }
  });

  it("'*' caps every longer `for` and leaves shorter ones and rules without one alone", () => {
    const before = alertRules(shippedRules);
    const after = alertRules(rulesWithShorterFor(shippedRules, { '*': '3m' }));
    for (const [name, rule] of after) {
      const was = before.get(name)!.for;
      const want = was === undefined ? undefined : durationSeconds(was) > 180 ? '3m' : was;
      expect(rule.for, name).toBe(want);
    }
  });

  it('edits an expression only by an exact substring that occurs once, and refuses unknown alerts', () => {
    const edited = alertRules(
      rulesWithShorterFor(shippedRules, {}, { ReviewsBridgeFeedStale: { from: '> 300', to: '> 20' } }),
    );
    const expr = alertRules(shippedRules).get('ReviewsBridgeFeedStale')!.expr;
    expect(edited.get('ReviewsBridgeFeedStale')!.expr).toBe(expr.replace('> 300', '> 20'));
    expect(() => rulesWithShorterFor(shippedRules, {}, { ReviewsBridgeFeedStale: { from: '> 301', to: '' } })).toThrow(
      /occurs 0 times/,
    );
    expect(() => rulesWithShorterFor(shippedRules, { ReviewsBridgeNoSuchAlert: '1s' })).toThrow(
      /ReviewsBridgeNoSuchAlert/,
    );
  });

  it('reads durations of one unit', () => {
    expect([durationSeconds('500ms'), durationSeconds('5m'), durationSeconds('2h'), durationSeconds('1d')]).toEqual([
      0.5, 300, 7200, 86_400,
    ]);
    expect(() => durationSeconds('1h30m')).toThrow(/one-unit/);
  });
});
