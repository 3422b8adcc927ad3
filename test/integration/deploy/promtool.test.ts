import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { dashboardQueries, DEPLOY_QUERY_FILES } from '../../helpers/dashboard-metrics.js';

// Runs Prometheus' own tooling on the shipped rules, their unit tests, the compose scrape config and every query
// of the Grafana dashboard. scripts/promtool.sh fetches promtool from Debian's package on first use.

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SCRIPT = join(ROOT, 'scripts/promtool.sh');
const run = promisify(execFile);

async function promtool(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(SCRIPT, args, { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

let scratch = '';
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'promtool-test-'));
  // The first call may download and unpack promtool; later ones reuse it.
  const found = await promtool('--path');
  expect(found.code, found.output).toBe(0);
}, 300_000);
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('promtool', () => {
  it('check rules: alerts.yml is valid', async () => {
    const r = await promtool('check', 'rules', 'deploy/prometheus/alerts.yml');
    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('test rules: every alert fires and stays silent where alerts.test.yml says', async () => {
    const r = await promtool('test', 'rules', 'deploy/prometheus/alerts.test.yml');
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain('SUCCESS');
  }, 180_000); // the baseline cases evaluate more than a day of samples

  it('every alert of alerts.yml has unit tests with a firing and a silent case', () => {
    const rules = readFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), 'utf8');
    const tests = readFileSync(join(ROOT, 'deploy/prometheus/alerts.test.yml'), 'utf8');
    const alerts = [...rules.matchAll(/^\s*- alert: (\w+)/gm)].map((m) => m[1] ?? '');
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    // Cases are "alertname: X" followed by "exp_alerts: []" (silent) or a list (firing).
    const cases = [...tests.matchAll(/alertname: (\w+)\n\s+exp_alerts:( \[\])?/g)].map((m) => ({
      alert: m[1] ?? '',
      fires: m[2] === undefined,
    }));
    for (const a of alerts) {
      expect(
        cases.some((c) => c.alert === a && c.fires),
        `${a} has no firing case`,
      ).toBe(true);
      expect(
        cases.some((c) => c.alert === a && !c.fires),
        `${a} has no silent case`,
      ).toBe(true);
    }
  });

  it('check config: the compose scrape configuration and its rule files are valid', async () => {
    const r = await promtool('check', 'config', 'deploy/prometheus/prometheus.yml');
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain('is valid prometheus config file syntax');
  });

  it('every dashboard query is valid PromQL', async () => {
    const dashboard: unknown = JSON.parse(readFileSync(join(ROOT, DEPLOY_QUERY_FILES.dashboard), 'utf8'));
    const { queries } = dashboardQueries(dashboard);
    expect(queries.length).toBeGreaterThan(20);
    // Grafana variables replaced as Grafana would before sending the query.
    const rules = queries.map((q, i) => ({
      record: `dashboard:query_${i}`,
      expr: q.expr.replaceAll('$__rate_interval', '5m').replaceAll('$account', '.*'),
    }));
    for (const r of rules) expect(r.expr, 'unknown Grafana variable').not.toMatch(/\$/);
    const file = join(scratch, 'dashboard-queries.yml');
    writeFileSync(file, stringifyYaml({ groups: [{ name: 'dashboard', rules }] }));
    const r = await promtool('check', 'rules', file);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });
});
