import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeMetrics } from '../../../src/ops/metrics.js';
import { startOpsServer, type OpsServer, type ReadinessResult } from '../../../src/ops/http-server.js';
import { waitFor } from '../../helpers/processes.js';

// Real HTTP over loopback; no Redis or Kafka needed: the checks are injected as the core would pass them.

const servers: OpsServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(
  overrides: {
    liveness?: () => { ok: boolean; detail?: Record<string, unknown> };
    readiness?: () => Promise<ReadinessResult>;
    readinessCacheMs?: number;
    readinessTimeoutMs?: number;
  } = {},
): Promise<{ server: OpsServer; metrics: BridgeMetrics }> {
  const metrics = new BridgeMetrics({ account: 'acme' });
  const server = await startOpsServer({
    host: '127.0.0.1',
    port: 0,
    metrics: metrics.registry,
    liveness: overrides.liveness ?? (() => ({ ok: true })),
    readiness:
      overrides.readiness ??
      (async () => ({ ok: true, checks: { redis: true, kafka: true, upstream_credentials: true, role: 'leader' } })),
    ...(overrides.readinessCacheMs !== undefined ? { readinessCacheMs: overrides.readinessCacheMs } : {}),
    ...(overrides.readinessTimeoutMs !== undefined ? { readinessTimeoutMs: overrides.readinessTimeoutMs } : {}),
  });
  servers.push(server);
  return { server, metrics };
}

describe('ops server', () => {
  it('serves Prometheus text on /metrics with the right content type', async () => {
    const { server, metrics } = await start();
    metrics.setLeadership('leader', 3);
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const body = await res.text();
    expect(body).toMatch(/^reviews_bridge_leader\{account="acme"\} 1$/m);
    expect(body).toMatch(/^reviews_bridge_lease_epoch\{account="acme"\} 3$/m);
    expect(body).toContain('# TYPE process_cpu_seconds_total counter');
  });

  it('/healthz is 200 when alive and 503 with detail when the loop is stuck', async () => {
    let alive = true;
    const { server } = await start({
      liveness: () => (alive ? { ok: true } : { ok: false, detail: { lastTickAgeSeconds: 120 } }),
    });
    const ok = await fetch(`${server.url}/healthz`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await ok.json()).toEqual({ status: 'ok' });

    alive = false;
    const fail = await fetch(`${server.url}/healthz`);
    expect(fail.status).toBe(503);
    expect(await fail.json()).toEqual({ status: 'fail', detail: { lastTickAgeSeconds: 120 } });
  });

  it('/healthz answers 503 when the liveness callback throws', async () => {
    const { server } = await start({
      liveness: () => {
        throw Object.assign(new Error('redis://user:hunter2@10.0.0.1 refused'), { code: 'ECONNREFUSED' });
      },
    });
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(503);
    // The kind of the error, never its text.
    expect(await res.json()).toEqual({ status: 'fail', detail: { error: 'Error:ECONNREFUSED' } });
  });

  it('/readyz reports named checks with 200 or 503', async () => {
    let result: ReadinessResult = {
      ok: true,
      checks: { redis: true, kafka: true, upstream_credentials: true, role: 'standby' },
    };
    const { server } = await start({ readiness: async () => result, readinessCacheMs: 0 });
    const ready = await fetch(`${server.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: result.checks });

    result = {
      ok: false,
      checks: { redis: true, kafka: 'connection refused', upstream_credentials: true, role: 'leader' },
    };
    const notReady = await fetch(`${server.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ status: 'not_ready', checks: result.checks });
  });

  it('/readyz caches the result briefly and shares one evaluation between concurrent probes', async () => {
    let calls = 0;
    const { server } = await start({
      readiness: async () => {
        calls++;
        // fixed wait: a slow readiness check, so that the four probes arrive while its one evaluation is under way
        // (the server offers no event for "a probe is waiting"); the assertion does not depend on the time it takes.
        await new Promise((r) => setTimeout(r, 50));
        return { ok: true, checks: { redis: true } };
      },
      readinessCacheMs: 60_000,
    });
    const answers = await Promise.all([1, 2, 3, 4].map(() => fetch(`${server.url}/readyz`)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    await fetch(`${server.url}/readyz`);
    expect(calls).toBe(1);
  });

  it('/readyz is 503 when the check throws or hangs', async () => {
    const { server: throwing } = await start({
      readiness: async () => {
        throw new Error('redis down');
      },
    });
    const res = await fetch(`${throwing.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'not_ready', checks: { readiness: 'Error' } });

    const { server: hanging } = await start({
      readiness: () => new Promise<ReadinessResult>(() => undefined),
      readinessTimeoutMs: 100,
    });
    const started = Date.now();
    const slow = await fetch(`${hanging.url}/readyz`);
    expect(slow.status).toBe(503);
    expect(await slow.json()).toEqual({ status: 'not_ready', checks: { readiness: 'timeout' } });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a slow readiness check is shared by later probes instead of being started again', async () => {
    let calls = 0;
    let finish: (r: ReadinessResult) => void = () => undefined;
    const { server } = await start({
      readiness: () => {
        calls++;
        return new Promise<ReadinessResult>((resolve) => {
          finish = resolve;
        });
      },
      readinessTimeoutMs: 50,
      readinessCacheMs: 60_000,
    });
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    expect(calls).toBe(1);
    finish({ ok: true, checks: { redis: true } });
    // The late answer lands in the cache: probes turn 200 without a second evaluation.
    const res = await waitFor(
      async () => {
        const answer = await fetch(`${server.url}/readyz`);
        return answer.status === 200 ? answer : undefined;
      },
      5_000,
      'the late readiness answer',
      5,
    );
    expect(res.status).toBe(200);
    expect(calls).toBe(1);
  });

  it('404 for other paths, 405 for other methods, HEAD without body, query strings ignored', async () => {
    const { server } = await start();
    expect((await fetch(`${server.url}/`)).status).toBe(404);
    expect((await fetch(`${server.url}/metricsx`)).status).toBe(404);
    expect((await fetch(`${server.url}/healthz?verbose=1`)).status).toBe(200);
    const post = await fetch(`${server.url}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const head = await fetch(`${server.url}/healthz`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('close() returns promptly even with a keep-alive connection open', async () => {
    const { server } = await start();
    const url = new URL(`${server.url}/healthz`);
    // A keep-alive request whose socket stays open after the answer, as a scraper's would.
    await new Promise<void>((resolve, reject) => {
      const req = request(
        { host: url.hostname, port: url.port, path: url.pathname, headers: { connection: 'keep-alive' } },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end();
    });
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(1000);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
  });

  it('fails to start on a port in use', async () => {
    const { server } = await start();
    const port = Number(new URL(server.url).port);
    const metrics = new BridgeMetrics({ account: 'acme' });
    await expect(
      startOpsServer({
        host: '127.0.0.1',
        port,
        metrics: metrics.registry,
        liveness: () => ({ ok: true }),
        readiness: async () => ({ ok: true, checks: {} }),
      }),
    ).rejects.toThrow(/EADDRINUSE/);
  });
});
