import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify } from 'yaml';

// The configuration files of the monitoring stack scripts/monitoring.sh runs: Prometheus's derived from the shipped
// deploy/prometheus/prometheus.yml (same jobs and rule file, the bridge's targets given instead of the compose
// stack's DNS names, the intervals of the caller), an Alertmanager that sends every alert to one webhook, and a
// copy of the alert rules with shorter `for` durations for tests and the demo (derived, so it cannot drift).
// Pure functions (the e2e test derives its rules the same way), plus a small command line for the script.

/** Repository-relative path of the shipped Prometheus configuration the stack derives its own from. */
export const SHIPPED_PROMETHEUS = 'deploy/prometheus/prometheus.yml';

/** What the stack's Prometheus needs that the shipped configuration cannot know. */
export interface PrometheusSetup {
  /** host:port of every bridge replica's /metrics. */
  targets: readonly string[];
  /** host:port of the Alertmanager. */
  alertmanager: string;
  /** host:port of this Prometheus (its own job scrapes itself). */
  self: string;
  /** Scrape and rule-evaluation interval, a Prometheus duration (the shipped file says 15s). */
  interval: string;
  /** Rule file, relative to the configuration file's directory. */
  rulesFile: string;
}

interface ScrapeConfig {
  job_name?: string;
  static_configs?: { targets: string[] }[];
  dns_sd_configs?: unknown;
  scrape_interval?: string;
  [key: string]: unknown;
}

const DURATION = /^\d+(ms|s|m|h)$/;

/** Prometheus's configuration: the shipped one with the bridge's and its own targets, the intervals and an Alertmanager. */
export function prometheusConfig(shippedYaml: string, setup: PrometheusSetup): string {
  if (setup.targets.length === 0) throw new Error('monitoring: no scrape target given (--targets host:port,...)');
  if (!DURATION.test(setup.interval)) throw new Error(`monitoring: --interval '${setup.interval}' is not a duration`);
  const config = parseYaml(shippedYaml) as {
    global?: Record<string, unknown>;
    rule_files?: string[];
    scrape_configs?: ScrapeConfig[];
  };
  const jobs = config.scrape_configs ?? [];
  const job = (name: string): ScrapeConfig => {
    const found = jobs.find((j) => j.job_name === name);
    if (!found) throw new Error(`monitoring: ${SHIPPED_PROMETHEUS} has no scrape job '${name}'`);
    return found;
  };
  const bridge = job('reviews-bridge');
  // The compose stack finds replicas by DNS name; here the caller names them. Everything else of the job stays.
  delete bridge.dns_sd_configs;
  bridge.static_configs = [{ targets: [...setup.targets] }];
  job('prometheus').static_configs = [{ targets: [setup.self] }];
  const out = {
    ...config,
    global: { ...config.global, scrape_interval: setup.interval, evaluation_interval: setup.interval },
    rule_files: [setup.rulesFile],
    alerting: { alertmanagers: [{ static_configs: [{ targets: [setup.alertmanager] }] }] },
  };
  return `# Written by scripts/monitoring.sh from ${SHIPPED_PROMETHEUS}: the bridge's targets and the intervals given.\n${stringify(out)}`;
}

/** Alertmanager's configuration: every alert to one webhook, grouped per alert and account, sent within `interval`. */
export function alertmanagerConfig(webhookUrl: string, interval: string): string {
  if (!/^https?:\/\/[^\s]+$/.test(webhookUrl)) throw new Error(`monitoring: --webhook '${webhookUrl}' is not a URL`);
  if (!DURATION.test(interval)) throw new Error(`monitoring: --interval '${interval}' is not a duration`);
  const config = {
    route: {
      receiver: 'webhook',
      // One notification per alert, account and field: what a pager shows as one incident.
      group_by: ['alertname', 'account', 'field'],
      group_wait: interval,
      group_interval: interval,
      repeat_interval: '4h',
    },
    receivers: [{ name: 'webhook', webhook_configs: [{ url: webhookUrl, send_resolved: true }] }],
  };
  return `# Written by scripts/monitoring.sh: every alert to the caller's webhook.\n${stringify(config)}`;
}

/** One alert rule as written in a rules file. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

interface RulesFile {
  groups: { name: string; rules: (AlertRule | { record: string })[] }[];
}

/** The alert rules of a rules file's text, by name. */
export function alertRules(yaml: string): Map<string, AlertRule> {
  const doc = parseYaml(yaml) as RulesFile;
  const out = new Map<string, AlertRule>();
  for (const g of doc.groups) for (const r of g.rules) if ('alert' in r) out.set(r.alert, r);
  return out;
}

/** Seconds of a Prometheus duration of one unit (5m, 2h, 1d). */
export function durationSeconds(d: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(d);
  if (!m) throw new Error(`not a one-unit duration: '${d}'`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit;
}

/**
 * A copy of a rules file with the `for` of the named alerts replaced ('*': every alert that has a `for` longer than
 * the given one), every other byte of every rule kept; and, only where a test cannot wait for a threshold written
 * into an expression, one exact substring of that expression replaced (`exprEdits`: it must occur exactly once).
 */
export function rulesWithShorterFor(
  yaml: string,
  forOf: Record<string, string>,
  exprEdits: Record<string, { from: string; to: string }> = {},
): string {
  const doc = parseYaml(yaml) as RulesFile;
  const seen = new Set<string>();
  const every = forOf['*'];
  for (const g of doc.groups) {
    for (const r of g.rules) {
      if (!('alert' in r)) continue;
      const shorter = forOf[r.alert];
      if (shorter !== undefined) {
        r.for = shorter;
        seen.add(r.alert);
      } else if (every !== undefined && r.for !== undefined && durationSeconds(r.for) > durationSeconds(every)) {
        r.for = every;
      }
      const edit = exprEdits[r.alert];
      if (edit) {
        const count = r.expr.split(edit.from).length - 1;
        if (count !== 1) throw new Error(`${r.alert}: '${edit.from}' occurs ${count} times in its expression`);
        r.expr = r.expr.replace(edit.from, edit.to);
      }
    }
  }
  const missing = Object.keys(forOf).filter((a) => a !== '*' && !seen.has(a));
  if (missing.length > 0) throw new Error(`no such alert in the rules: ${missing.join(', ')}`);
  return stringify(doc, { lineWidth: 0 });
}

function main(argv: string[]): void {
  const [kind, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      shipped: { type: 'string' },
      targets: { type: 'string', default: '' },
      alertmanager: { type: 'string', default: '' },
      self: { type: 'string', default: '' },
      interval: { type: 'string', default: '15s' },
      rules: { type: 'string', default: 'alerts.yml' },
      webhook: { type: 'string', default: '' },
      'for-at-most': { type: 'string', default: '' },
    },
  });
  if (kind === 'prometheus') {
    const shipped = readFileSync(values.shipped ?? SHIPPED_PROMETHEUS, 'utf8');
    const targets = values.targets.split(',').filter((t) => t.trim() !== '');
    process.stdout.write(
      prometheusConfig(shipped, {
        targets,
        alertmanager: values.alertmanager,
        self: values.self,
        interval: values.interval,
        rulesFile: values.rules,
      }),
    );
  } else if (kind === 'alertmanager') {
    process.stdout.write(alertmanagerConfig(values.webhook, values.interval));
  } else if (kind === 'rules') {
    const yaml = readFileSync(values.rules, 'utf8');
    const cap = values['for-at-most'];
    process.stdout.write(cap === '' ? yaml : rulesWithShorterFor(yaml, { '*': cap }));
  } else {
    throw new Error('usage: monitoring-config.ts prometheus|alertmanager|rules [options]');
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
}
