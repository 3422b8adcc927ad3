import { spawn } from 'node:child_process';
import { loadConfig } from '../../src/config/config.js';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseHolder } from '../../src/redis/lease.js';
import { accountKeys, connectRedis } from '../../src/redis/connection.js';
import { startSimulator } from '../../src/simulator/index.js';
import { eventually, startTestBridge, testEnv } from '../helpers/bridge.js';
import { exportedNamesFromText, missingMetrics, usedMetricNames } from '../helpers/dashboard-metrics.js';
import { readAll } from '../helpers/kafka.js';

const ROOT = new URL('../..', import.meta.url).pathname;

// Running the bridge: health endpoints, graceful shutdown of the real process, two replicas behind the lease.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

describe('operations', () => {
  it('serves /healthz, /readyz and /metrics with the named checks', async () => {
    const sim = await startSimulator({ reviewCount: 50, rateLimit: null });
    cleanups.push(() => sim.close());
    const b = await startTestBridge(testEnv(sim.url));
    cleanups.push(() => b.stop());
    const url = b.app.ops.url;
    const ready = await eventually(
      async () => {
        const res = await fetch(`${url}/readyz`);
        return res.status === 200 ? ((await res.json()) as { checks: Record<string, unknown> }) : undefined;
      },
      30_000,
      'readiness',
    );
    expect(ready.checks).toMatchObject({
      redis: true,
      kafka: true,
      upstream_credentials: true,
      role: 'leader',
      paused: false,
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain('reviews_bridge_leader');
    expect(metrics).toMatch(/reviews_bridge_upstream_requests_total\{[^}]*endpoint="reviews"[^}]*status="200"/);
    // Every metric the dashboard and the alert rules use is exported by the running bridge.
    expect(missingMetrics(usedMetricNames(ROOT), exportedNamesFromText(metrics))).toEqual([]);
  });

  it('reports not ready when the upstream refuses its credentials', async () => {
    const sim = await startSimulator({ reviewCount: 10, rateLimit: null });
    cleanups.push(() => sim.close());
    const b = await startTestBridge(testEnv(sim.url, { UPSTREAM_CLIENT_SECRET: 'wrong-secret' }));
    cleanups.push(() => b.stop());
    const body = await eventually(
      async () => {
        const res = await fetch(`${b.app.ops.url}/readyz`);
        const json = (await res.json()) as { checks: Record<string, unknown> };
        return res.status === 503 && json.checks.upstream_credentials === false ? json : undefined;
      },
      30_000,
      'not ready',
    );
    expect(JSON.stringify(body)).not.toContain('wrong-secret');
    expect((await b.store.checkpoint()).initialDone).toBe(false);
  });

  it('shuts down on SIGTERM: exit 0, lease released, nothing lost', async () => {
    const sim = await startSimulator({ reviewCount: 300, rateLimit: null });
    cleanups.push(() => sim.close());
    const port = await freePort();
    const env = testEnv(sim.url, { HTTP_PORT: String(port), LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '15000' });
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'run'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const exited = once(child, 'exit');
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const redis = connectRedis(loadConfig(env).redis);
    cleanups.push(async () => void (await redis.quit()));
    const keys = accountKeys(env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);
    await eventually(async () => ((await leaseHolder(redis, keys)) ? true : undefined), 30_000, 'leadership');
    await eventually(
      async () => ((await redis.hget(keys.checkpoint, 'initial_done')) === '1' ? true : undefined),
      30_000,
      'initial load',
    );
    sim.control.setStatus(7, { client: 'REJECTED' });
    await readAll([env.KAFKA_TOPIC_STATUS_CHANGED!], { untilCount: 1, timeoutMs: 20_000 });

    const t0 = Date.now();
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code, log.slice(-2000)).toBe(0);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(log).toContain('stopped cleanly');
    // Started without heap flags, `run` re-executed itself in place with its caps (src/app/node-flags.ts): one start,
    // under the child's pid (the signal above reached it), with a heap limit far below Node 24's default (~4 GiB).
    const started = log
      .split('\n')
      .filter((line) => line.includes('"bridge started"'))
      .map((line) => JSON.parse(line) as { pid?: number; heapLimitMiB?: number });
    expect(started).toHaveLength(1);
    expect(started[0]!.pid).toBe(child.pid);
    expect(started[0]!.heapLimitMiB).toBeLessThan(512);
    expect(await leaseHolder(redis, keys)).toBeNull();
    expect(log).not.toContain('demo-secret');
  });

  it('two replicas: one leads, the other takes over when it stops, no change lost', async () => {
    const sim = await startSimulator({ reviewCount: 100, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, { LEASE_TTL_MS: '2000' });
    const a = await startTestBridge(env);
    cleanups.push(() => a.stop());
    await eventually(async () => ((await a.store.checkpoint()).initialDone ? true : undefined), 30_000, 'initial load');
    const b = await startTestBridge(env);
    cleanups.push(() => b.stop());
    await eventually(async () => (b.app.loop.health().role === 'standby' ? true : undefined), 10_000, 'b to stand by');
    expect(a.app.loop.health().role).toBe('leader');
    expect(b.app.loop.health().role).toBe('standby');

    sim.control.setStatus(3, { client: 'REJECTED' });
    await readAll([env.KAFKA_TOPIC_STATUS_CHANGED!], { untilCount: 1, timeoutMs: 10_000 });
    await a.stop();
    sim.control.setStatus(4, { pwr: 'REJECTED' });
    await eventually(async () => (b.app.loop.health().role === 'leader' ? true : undefined), 10_000, 'takeover');
    const changed = await readAll([env.KAFKA_TOPIC_STATUS_CHANGED!], { untilCount: 2, idleMs: 500, timeoutMs: 15_000 });
    expect(changed.map((m) => m.key).sort()).toEqual(['3', '4']);
    const created = await readAll([env.KAFKA_TOPIC_CREATED!], { idleMs: 500, timeoutMs: 10_000 });
    expect(created).toHaveLength(100);
  });
});
