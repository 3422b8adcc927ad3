import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';

// Finds every metric name that the shipped Grafana dashboard and Prometheus alert rules query, and compares it with
// what the bridge exports. Used by the unit test (names from a fresh BridgeMetrics registry) and meant for the
// e2e test (names parsed from the /metrics text of a running bridge).

/** One PromQL expression and where it was found (for readable failures). */
export interface QueryRef {
  where: string;
  expr: string;
  /** A panel target's legend format (which line of the panel it draws). */
  legend?: string;
}

/** Repository-relative paths of the files whose queries must only use exported metrics. */
export const DEPLOY_QUERY_FILES = {
  dashboard: 'deploy/grafana/dashboards/reviews-bridge.json',
  alerts: 'deploy/prometheus/alerts.yml',
} as const;

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
]);

/** Metric names referenced by one PromQL expression (functions, labels, keywords and Grafana variables excluded). */
export function promqlMetricNames(expr: string): string[] {
  const stripped = expr
    // Strings first: they may contain braces or brackets (regex matchers such as "4..|5.." or "x{2}").
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  // Alternatives in order: Grafana variable, number or duration (e.g. 15m, 1e3), identifier.
  const token = /(\$\{?[\w.]+\}?)|(\d[\w.]*)|([a-zA-Z_:][\w:]*)/g;
  for (let m = token.exec(stripped); m !== null; m = token.exec(stripped)) {
    const ident = m[3];
    if (ident === undefined || KEYWORDS.has(ident.toLowerCase())) continue;
    const rest = stripped.slice(token.lastIndex);
    if (/^\s*\(/.test(rest)) continue; // a function or an aggregation
    names.add(ident);
  }
  return [...names];
}

/** Metric names referenced by a Grafana template-variable query (label_values, query_result). */
export function templateQueryMetricNames(query: string): string[] {
  const labelValues = /^\s*label_values\(\s*([^,)]*?)\s*,/.exec(query);
  if (labelValues) return promqlMetricNames(labelValues[1] ?? '');
  const queryResult = /^\s*query_result\((.*)\)\s*$/s.exec(query);
  if (queryResult) return promqlMetricNames(queryResult[1] ?? '');
  return [];
}

interface PanelLike {
  title?: string;
  targets?: { expr?: unknown; legendFormat?: unknown }[];
  panels?: PanelLike[];
}

/** Every PromQL expression of a Grafana dashboard: panel targets (rows included) and template variables. */
export function dashboardQueries(dashboard: unknown): { queries: QueryRef[]; templateQueries: QueryRef[] } {
  const d = dashboard as { panels?: PanelLike[]; templating?: { list?: { name?: string; query?: unknown }[] } };
  const queries: QueryRef[] = [];
  const walk = (panels: PanelLike[] | undefined): void => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) {
        if (typeof t.expr === 'string' && t.expr.trim() !== '') {
          const legend = typeof t.legendFormat === 'string' ? t.legendFormat : '';
          queries.push({ where: `dashboard panel "${p.title ?? '?'}"`, expr: t.expr, legend });
        }
      }
      walk(p.panels);
    }
  };
  walk(d.panels);
  const templateQueries: QueryRef[] = [];
  for (const v of d.templating?.list ?? []) {
    const q = v.query;
    const text =
      typeof q === 'string' ? q : typeof q === 'object' && q !== null ? (q as { query?: unknown }).query : null;
    if (typeof text === 'string' && text.trim() !== '') {
      templateQueries.push({ where: `dashboard variable "${v.name ?? '?'}"`, expr: text });
    }
  }
  return { queries, templateQueries };
}

/** Every alert and recording rule expression of a Prometheus rules file. */
export function ruleQueries(rulesYaml: string): QueryRef[] {
  const doc = parseYaml(rulesYaml) as {
    groups?: { name?: string; rules?: { alert?: string; record?: string; expr?: unknown }[] }[];
  };
  const out: QueryRef[] = [];
  for (const g of doc.groups ?? []) {
    for (const r of g.rules ?? []) {
      if (typeof r.expr === 'string') out.push({ where: `rule ${r.alert ?? r.record ?? '?'}`, expr: r.expr });
    }
  }
  return out;
}

/** Metric names used by the shipped dashboard and alert rules, each with the places that use it. */
export function usedMetricNames(root: string): Map<string, string[]> {
  const dashboard: unknown = JSON.parse(readFileSync(join(root, DEPLOY_QUERY_FILES.dashboard), 'utf8'));
  const { queries, templateQueries } = dashboardQueries(dashboard);
  const rules = ruleQueries(readFileSync(join(root, DEPLOY_QUERY_FILES.alerts), 'utf8'));
  const used = new Map<string, string[]>();
  const add = (name: string, where: string): void => {
    const list = used.get(name) ?? [];
    if (!list.includes(where)) list.push(where);
    used.set(name, list);
  };
  for (const q of [...queries, ...rules]) for (const n of promqlMetricNames(q.expr)) add(n, q.where);
  for (const q of templateQueries) for (const n of templateQueryMetricNames(q.expr)) add(n, q.where);
  return used;
}

/** Names a scrape of this text yields: sample names, plus the series implied by `# TYPE` lines of metrics with no sample yet. */
export function exportedNamesFromText(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE ([a-zA-Z_:][\w:]*) (\w+)/.exec(line);
    if (type) {
      const [, name = '', kind] = type;
      names.add(name);
      if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
      if (kind === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
      continue;
    }
    const sampleName = /^([a-zA-Z_:][\w:]*)[{\s]/.exec(line);
    if (sampleName?.[1]) names.add(sampleName[1]);
  }
  return names;
}

/** Names that have at least one sample in this exposition text (a `# TYPE` line alone does not count). */
export function sampledNamesFromText(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const sampleName = /^([a-zA-Z_:][\w:]*)[{\s]/.exec(line);
    if (sampleName?.[1]) names.add(sampleName[1]);
  }
  return names;
}

/** The used names that are not exported, with where they are used: empty when dashboard and rules are sound. */
export function missingMetrics(
  used: Map<string, string[]>,
  exported: Set<string>,
): { name: string; usedIn: string[] }[] {
  return [...used.entries()]
    .filter(([name]) => !exported.has(name))
    .map(([name, usedIn]) => ({ name, usedIn }))
    .sort((a, b) => a.name.localeCompare(b.name));
}
