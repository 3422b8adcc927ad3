import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Validator } from '@seriousme/openapi-schema-validator';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app/app.js';
import { loadConfig } from '../../src/config/config.js';
import type { AccountStatus } from '../../src/core/account-status.js';
import { SAFE_LOG_OPTIONS } from '../../src/ops/logger.js';
import {
  eventually,
  pausedHeartbeats,
  simulatorForTest,
  startTestBridge,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';

// The admin HTTP API of issue 21 against a running bridge (real Kafka, real Redis, the simulator): authentication
// and token rotation, the OpenAPI document, status, and the actions reaching the leader through Redis from any
// replica — pause stops upstream traffic within a poll interval, resume goes on with nothing lost, sweep and resync
// report their progress through GET.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const dir = mkdtempSync(join(tmpdir(), 'rb-admin-e2e-'));
const ALICE = 'alice-admin-token-0123456789abcdef';
const BOB = 'bob-admin-token-fedcba9876543210';

/** A token file with these lines; returns its path. */
function tokenFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown>;
}

/** One admin request; `token` null sends no Authorization header. */
async function call(
  base: string,
  path: string,
  {
    token = ALICE as string | null,
    method = 'GET',
    body,
  }: { token?: string | null; method?: string; body?: unknown } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: left empty
  }
  return { status: res.status, headers: res.headers, text, json };
}

const statusOf = async (base: string, account: string, token = ALICE) =>
  (await call(base, `/v1/accounts/${account}`, { token })).json as unknown as AccountStatus;

/** A bridge with the admin API on and its log lines captured. */
async function bridgeWithLog(
  env: Record<string, string>,
): Promise<{ app: App; lines: () => Record<string, unknown>[] }> {
  const text: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      text.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ level: 'info', ...SAFE_LOG_OPTIONS }, sink);
  const app = await startApp(loadConfig(env), logger);
  cleanups.push(() => app.stop());
  const lines = () =>
    text
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { app, lines };
}

describe('admin API', () => {
  it('refuses requests without a valid token, validates bodies, serves a valid OpenAPI document, rotates tokens', async () => {
    const sim = await simulatorForTest({ reviewCount: 50 });
    const tokens = tokenFile('tokens-1', `# operators\nalice:${ALICE}\n`);
    const env = testEnv(sim.url, { ADMIN_PORT: '0', ADMIN_TOKEN_FILE: tokens });
    const account = env.BRIDGE_ACCOUNT!;
    const { app, lines } = await bridgeWithLog(env);
    const base = app.admin!.url;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(base).not.toBe(app.ops.url);

    // No token, a wrong one, another scheme, any path: 401 with nothing to learn from.
    for (const [path, token, method] of [
      ['/v1/accounts', null, 'GET'],
      ['/v1/accounts', 'not-the-token-at-all-0000', 'GET'],
      [`/v1/accounts/${account}/pause`, null, 'POST'],
      ['/v1/accounts/no-such-account', null, 'GET'],
      ['/no/such/path', null, 'GET'],
      ['/openapi.json', `${ALICE}x`, 'GET'],
    ] as const) {
      const r = await call(base, path, { token, method });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
      expect(r.json).toEqual({ error: 'unauthorized' });
    }
    const basic = await fetch(`${base}/v1/accounts`, { headers: { authorization: `Basic ${ALICE}` } });
    expect(basic.status).toBe(401);
    expect((await statusOf(base, account)).paused).toBe(false); // nothing above reached Redis

    // The OpenAPI document validates.
    const doc = await call(base, '/openapi.json');
    expect(doc.status).toBe(200);
    const validation = await new Validator().validate(doc.json);
    expect(validation.errors ?? []).toEqual([]);
    expect(validation.valid).toBe(true);

    // The list and one account; an unknown account is 404 for GET and for every action.
    await eventually(async () => ((await statusOf(base, account)).initialLoadDone ? true : undefined), 60_000, 'load');
    const list = await call(base, '/v1/accounts');
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ accounts: 1, unled: [], byAccount: [{ account, leader: app.replica }] });
    const status = await statusOf(base, account);
    expect(status).toMatchObject({ account, leader: app.replica, snapshotReviews: 50, paused: false, progress: null });
    expect(status.epoch).toBeGreaterThan(0);
    expect(status.watermarkLagSeconds).toBeGreaterThanOrEqual(0);
    for (const [method, path] of [
      ['GET', '/v1/accounts/no-such-account'],
      ['POST', '/v1/accounts/no-such-account/pause'],
      ['POST', '/v1/accounts/no-such-account/resync'],
    ]) {
      const r = await call(base, path!, { method, body: method === 'POST' ? { all: true } : undefined });
      expect(r.status, path).toBe(404);
    }
    expect((await call(base, '/v2/nothing')).status).toBe(404);
    const wrongMethod = await call(base, `/v1/accounts/${account}/pause`);
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');

    // Bad bodies: 400 naming the field; nothing is recorded.
    const resync = `/v1/accounts/${account}/resync`;
    const bad = async (body: unknown) => (await call(base, resync, { method: 'POST', body })).json;
    expect(await bad({ ids: [1, 'x'] })).toMatchObject({ error: 'bad request', field: 'ids[1]' });
    expect(await bad({ since: 'yesterday' })).toMatchObject({ field: 'since' });
    expect(await bad({ ids: [1], all: true })).toMatchObject({ field: 'body' });
    expect(await bad({ every: true })).toMatchObject({ field: 'every', message: 'unknown field' });
    expect(await bad('{"ids": [1,')).toMatchObject({ field: 'body', message: 'not valid JSON' });
    const badStatus = await call(base, resync, { method: 'POST', body: { ids: [-1] } });
    expect(badStatus.status).toBe(400);
    const pauseWithBody = await call(base, `/v1/accounts/${account}/pause`, { method: 'POST', body: { now: 1 } });
    expect(pauseWithBody.status).toBe(400);
    expect(pauseWithBody.json).toMatchObject({ field: 'now' });
    expect((await statusOf(base, account)).resyncRequested).toBeNull();
    expect((await statusOf(base, account)).paused).toBe(false);

    // Rotation: the file rewritten in place, then replaced by a rename (as a Kubernetes Secret is), no restart.
    writeFileSync(tokens, `bob:${BOB}\n`);
    expect((await call(base, '/v1/accounts')).status).toBe(401);
    expect((await call(base, '/v1/accounts', { token: BOB })).status).toBe(200);
    const next = tokenFile('tokens-next', `alice:${ALICE}\nbob:${BOB}\n`);
    renameSync(next, tokens);
    expect((await call(base, '/v1/accounts')).status).toBe(200);
    // A file made invalid refuses everyone until it is fixed (an old token must not outlive its revocation).
    writeFileSync(tokens, 'short\n');
    expect((await call(base, '/v1/accounts')).status).toBe(401);
    expect((await call(base, '/v1/accounts', { token: BOB })).status).toBe(401);
    writeFileSync(tokens, ALICE);
    expect((await call(base, '/v1/accounts')).status).toBe(200);

    // One accepted action: logged once with the token's name, counted; no token in any log line.
    const paused = await call(base, `/v1/accounts/${account}/pause`, { method: 'POST' });
    expect(paused.status).toBe(200);
    expect(paused.json).toMatchObject({ account, paused: true });
    const actions = lines().filter((l) => l.msg === 'admin action');
    expect(actions).toEqual([expect.objectContaining({ tokenName: 'default', action: 'pause', account })]);
    const log = lines()
      .map((l) => JSON.stringify(l))
      .join('\n');
    expect(log).not.toContain(ALICE);
    expect(log).not.toContain(BOB);
    expect(log).toContain('admin token file changed');
    expect(log).toContain('admin request refused');

    const metrics = await (await fetch(`${app.ops.url}/metrics`)).text();
    const count = (action: string, outcome: string) =>
      Number(
        new RegExp(
          `^reviews_bridge_admin_requests_total\\{action="${action}",outcome="${outcome}"\\} (\\d+)$`,
          'm',
        ).exec(metrics)?.[1] ?? Number.NaN,
      );
    expect(count('pause', 'ok')).toBe(1);
    expect(count('resync', 'bad_request')).toBe(6);
    expect(count('list', 'unauthorized')).toBeGreaterThanOrEqual(3);
    expect(count('status', 'not_found')).toBe(1);
    expect(count('openapi', 'ok')).toBe(1);
  });

  it('from a standby replica: pause stops upstream traffic within a poll interval, resume loses nothing; sweep and resync report progress', async () => {
    const sim = await simulatorForTest({ reviewCount: 1_500, seed: 21 });
    const tokens = tokenFile('tokens-2', `ops:${ALICE}\n`);
    const pollIntervalMs = 1_000;
    const env = testEnv(sim.url, {
      ADMIN_PORT: '0',
      ADMIN_TOKEN_FILE: tokens,
      POLL_INTERVAL_MS: String(pollIntervalMs),
      UPSTREAM_PAGE_SIZE: '50',
      INITIAL_LOAD_MODE: 'suppress',
      HEARTBEAT_INTERVAL_MS: String(pollIntervalMs),
    });
    const account = env.BRIDGE_ACCOUNT!;
    const first: TestBridge = await startTestBridge(env);
    cleanups.push(() => first.stop());
    await eventually(async () => ((await first.store.checkpoint()).initialDone ? true : undefined), 60_000, 'load');
    const second: TestBridge = await startTestBridge(env);
    cleanups.push(() => second.stop());
    await eventually(async () => (second.app.loop.health().role === 'standby' ? true : undefined), 10_000, 'standby');
    expect(first.app.loop.health().role).toBe('leader');
    // Every action below goes through the replica that does not lead the account.
    const base = second.app.admin!.url;
    expect((await statusOf(base, account)).leader).toBe(first.app.replica);

    // Pause: the leader stops within one poll interval and makes no request while paused.
    const pausedGauge = async () =>
      /^reviews_bridge_paused\{[^}]*\} 1$/m.test(await first.app.metrics.registry.metrics()) ? true : undefined;
    const requestedAt = Date.now();
    const paused = await call(base, `/v1/accounts/${account}/pause`, { method: 'POST' });
    expect(paused.status).toBe(200);
    await eventually(pausedGauge, 5_000, 'the leader to see the pause');
    const noticedAfterMs = Date.now() - requestedAt;
    console.log(`[admin] the leader saw the pause ${noticedAfterMs} ms after the request to the standby`);
    expect(noticedAfterMs).toBeLessThan(pollIntervalMs + 500);
    const atPause = sim.control.stats().requests;
    const to = sim.control.get(7)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    sim.control.setStatus(7, { client: to });
    const created = sim.control.createReview() as { id: number };
    // No request at all over three turns of the paused leader's loop (each a poll interval, each sending a
    // heartbeat that says paused), all after the changes above.
    await pausedHeartbeats(first, 3);
    expect(sim.control.stats().requests).toBe(atPause);
    const whilePaused = await statusOf(base, account);
    expect(whilePaused).toMatchObject({ paused: true });
    expect(Date.parse(whilePaused.pausedSince!)).toBeGreaterThanOrEqual(requestedAt - 1_000);

    // Resume: the changes made while paused arrive.
    const resumed = await call(base, `/v1/accounts/${account}/resume`, { method: 'POST' });
    expect(resumed.json).toMatchObject({ account, paused: false, wasPaused: true });
    const changed = await readAll([first.topics.statusChanged], { untilCount: 1, timeoutMs: 20_000 });
    expect(changed.map((m) => m.key)).toEqual(['7']);
    const news = await readAll([first.topics.created], { untilCount: 1, timeoutMs: 20_000 });
    expect(news.map((m) => m.key)).toEqual([String(created.id)]);
    expect(sim.control.stats().requests).toBeGreaterThan(atPause);

    // Sweep: progress with an ETA through GET while it runs, then its completion.
    // Slower pages, so that the passes run for a few seconds (the leader records a resync's progress every second).
    sim.control.setFaults({ latencyMs: 100 });
    const sweep = await call(base, `/v1/accounts/${account}/sweep`, { method: 'POST' });
    expect(sweep.status).toBe(202);
    expect(sweep.json).toMatchObject({ account, requested: true, leader: first.app.replica });
    const sweepAt = Date.parse(String(sweep.json.requestedAt));
    const running = await eventually(
      async () => {
        const p = (await statusOf(base, account)).progress;
        return p?.kind === 'sweep' && p.seen > 0 && p.eta !== null ? p : undefined;
      },
      30_000,
      'sweep progress',
    );
    expect(running.estimatedTotal).toBeGreaterThanOrEqual(1_501);
    expect(running.percent).toBeGreaterThan(0);
    expect(running.percent).toBeLessThan(100);
    await eventually(
      async () => {
        const s = await statusOf(base, account);
        return s.progress === null && s.lastSweepAt !== null && Date.parse(s.lastSweepAt) >= sweepAt ? s : undefined;
      },
      60_000,
      'the sweep to complete',
    );

    // Resync of everything: followed by its request id, running then finished.
    const resync = await call(base, `/v1/accounts/${account}/resync`, { method: 'POST', body: { all: true } });
    expect(resync.status).toBe(202);
    const id = String(resync.json.id);
    expect(resync.json).toMatchObject({ requested: true, scope: { kind: 'all' } });
    const resyncing = await eventually(
      async () => {
        const p = (await statusOf(base, account)).progress;
        return p?.kind === 'resync' && p.requestId === id && p.seen > 0 ? p : undefined;
      },
      30_000,
      'resync progress',
    );
    expect(resyncing.percent).not.toBeNull();
    const done = await eventually(
      async () => {
        const s = await statusOf(base, account);
        return s.lastPass?.requestId === id && s.resyncRequested === null ? s : undefined;
      },
      60_000,
      'the resync to finish',
    );
    expect(done.lastPass).toMatchObject({ kind: 'resync', seen: 1_501 });
    expect(done.resyncRequested).toBeNull();
    sim.control.setFaults({ latencyMs: 0 });
  });
});
