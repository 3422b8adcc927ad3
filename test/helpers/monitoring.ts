import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ROOT, runDir, script } from './processes.js';

export { alertRules, rulesWithShorterFor, type AlertRule } from '../../scripts/monitoring-config.js';

// The monitoring stack of scripts/monitoring.sh seen from a test: a Prometheus and an Alertmanager started for one
// test, a webhook receiver that records what Alertmanager sends, the test's copy of the shipped alert rules (only
// `for` shortened), and Prometheus's HTTP API.

/** Repository-relative path of the shipped alert rules. */
export const ALERT_RULES = 'deploy/prometheus/alerts.yml';

/** The payload Alertmanager's webhook receiver sends (version 4). */
export interface WebhookPayload {
  status: 'firing' | 'resolved';
  receiver: string;
  groupLabels: Record<string, string>;
  commonLabels: Record<string, string>;
  alerts: {
    status: 'firing' | 'resolved';
    labels: Record<string, string>;
    annotations: Record<string, string>;
    startsAt: string;
  }[];
}

/** A tiny HTTP server recording every webhook payload it is sent. */
export interface WebhookReceiver {
  url: string;
  payloads: WebhookPayload[];
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts a webhook receiver on a free port of 127.0.0.1. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const payloads: WebhookPayload[] = [];
  const server = createServer((req, res) => {
    void body(req).then((text) => {
      if (req.method === 'POST') payloads.push(JSON.parse(text) as WebhookPayload);
      res.writeHead(200).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/alerts`,
    payloads,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A running monitoring stack (scripts/monitoring.sh). */
export interface Monitoring {
  prometheusUrl: string;
  alertmanagerUrl: string;
  /** The run directory (configs, logs). */
  dir: string;
  stop(): Promise<void>;
}

/** Options of {@link startMonitoring}. */
export interface MonitoringOptions {
  /** Keys the run directory .run/monitoring-NAME/. */
  name: string;
  /** host:port of every replica's /metrics. */
  targets: string[];
  webhookUrl: string;
  /** Rules file text (written to a file for the script); default the shipped rules. */
  rules?: string;
  /** Scrape and evaluation interval (default 1s). */
  interval?: string;
}

/** Starts scripts/monitoring.sh for a test; stop() stops it by pid. */
export async function startMonitoring(opts: MonitoringOptions): Promise<Monitoring> {
  const args = ['start', opts.name, '--targets', opts.targets.join(','), '--webhook', opts.webhookUrl];
  args.push('--interval', opts.interval ?? '1s');
  if (opts.rules !== undefined) {
    const file = `${runDir(`monitoring-${opts.name}`)}/alerts.yml`;
    writeFileSync(file, opts.rules);
    args.push('--rules', file);
  }
  const out = await script('monitoring.sh', args, 600_000);
  const url = (key: string): string => {
    const m = new RegExp(`^${key}=(\\S+)$`, 'm').exec(out);
    if (!m?.[1]) throw new Error(`scripts/monitoring.sh start printed no ${key}:\n${out}`);
    return m[1];
  };
  return {
    prometheusUrl: url('PROMETHEUS_URL'),
    alertmanagerUrl: url('ALERTMANAGER_URL'),
    dir: `${ROOT}.run/monitoring-${opts.name}`,
    stop: async () => {
      await script('monitoring.sh', ['stop', opts.name]);
    },
  };
}

/** One series of a Prometheus query answer. */
export interface PromSeries {
  metric: Record<string, string>;
  /** Instant queries. */
  value?: [number, string];
  /** Range queries. */
  values?: [number, string][];
}

async function promApi<T>(url: string): Promise<T> {
  const res = await fetch(url);
  const json = (await res.json()) as { status: string; data: T; error?: string };
  if (json.status !== 'success') throw new Error(`Prometheus ${url}: ${json.error ?? res.status}`);
  return json.data;
}

/** Evaluates an instant query through Prometheus's HTTP API. */
export async function promQuery(prometheusUrl: string, expr: string): Promise<PromSeries[]> {
  const data = await promApi<{ result: PromSeries[] }>(
    `${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`,
  );
  return data.result;
}

/** Evaluates a range query (start/end in seconds) through Prometheus's HTTP API. */
export async function promQueryRange(
  prometheusUrl: string,
  expr: string,
  start: number,
  end: number,
  step: string,
): Promise<PromSeries[]> {
  const q = new URLSearchParams({ query: expr, start: String(start), end: String(end), step });
  const data = await promApi<{ result: PromSeries[] }>(`${prometheusUrl}/api/v1/query_range?${q.toString()}`);
  return data.result;
}

/** An alert as Prometheus's /api/v1/alerts lists it. */
export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
}

/** The alerts Prometheus holds now (pending and firing). */
export async function promAlerts(prometheusUrl: string): Promise<PromAlert[]> {
  return (await promApi<{ alerts: PromAlert[] }>(`${prometheusUrl}/api/v1/alerts`)).alerts;
}

/** The text of the shipped rules file. */
export function shippedRules(): string {
  return readFileSync(`${ROOT}${ALERT_RULES}`, 'utf8');
}
