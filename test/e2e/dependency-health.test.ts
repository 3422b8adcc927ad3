import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../helpers/bridge.js';
import {
  PrivateRedis,
  freePort,
  runCli,
  runDir,
  spawnBridge,
  spawnBridgeOn,
  waitFor,
  type Child,
} from '../helpers/processes.js';

// Issue 40: an operator's first hour with a dependency down. The bridge as users start it (its own process), with
// KAFKA_BROKERS pointing at a port nobody listens on: /readyz names kafka and why, and the log stays readable (a few
// lines, one of them naming the setting to check), however often kafkajs retries underneath.

const children: Child[] = [];
const redises: PrivateRedis[] = [];
let sim: Simulator | null = null;
afterAll(async () => {
  for (const c of children) if (c.alive) await c.kill();
  for (const r of redises) await r.stop();
  await sim?.close();
});

async function upstream(): Promise<string> {
  sim ??= await startSimulator({ reviewCount: 20, seed: 40, rateLimit: null });
  return sim.url;
}

/** A Redis of the test's own (its settings are changed; the shared one's never are), memory only. */
async function ownRedis(): Promise<{ server: PrivateRedis; admin: Redis }> {
  const server = new PrivateRedis(await freePort(), undefined, 'none');
  server.wipe();
  await server.start();
  redises.push(server);
  const admin = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await admin.connect();
  return { server, admin };
}

async function spawnOn(env: Record<string, string>, name: string): Promise<{ child: Child; port: number }> {
  return spawnBridgeOn(env, name, children);
}

interface Readyz {
  status: number;
  body: { status: string; checks: Record<string, unknown>; dependencies?: Record<string, Record<string, unknown>> };
}

async function readyz(port: number): Promise<Readyz> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: res.status, body: (await res.json()) as Readyz['body'] };
}

/** The log's JSON lines (pino), with their level. */
function logLines(text: string): { level: number; msg: string; line: string }[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((line) => ({ ...(JSON.parse(line) as { level: number; msg: string }), line }));
}

describe('Kafka unreachable', () => {
  it('is named by /readyz (503, kafka, unreachable, since when), in at most 10 warnings over 30 s', async () => {
    const closed = await freePort();
    const port = await freePort();
    const env = testEnv(await upstream(), {
      KAFKA_BROKERS: `127.0.0.1:${closed}`,
      LOG_LEVEL: 'info',
      HTTP_PORT: String(port),
    });
    const log = `${runDir(env.BRIDGE_ACCOUNT!)}/kafka-unreachable.log`;
    const started = Date.now();
    const child = spawnBridge(env, log);
    children.push(child);
    const named = await waitFor(
      async () => {
        const r = await readyz(port);
        return r.body.dependencies?.kafka?.status === 'failing' ? r : undefined;
      },
      20_000,
      '/readyz to name kafka',
      250,
    );
    expect(named.status).toBe(503);
    expect(named.body.status).toBe('not_ready');
    expect(named.body.dependencies!.kafka).toMatchObject({ status: 'failing', reason: 'unreachable' });
    expect(Date.parse(String(named.body.dependencies!.kafka!.since))).toBeGreaterThanOrEqual(started - 1_000);
    expect(named.body.dependencies!.kafka!.settings).toContain('KAFKA_BROKERS');
    expect(named.body.dependencies!.redis).toMatchObject({ status: 'ok' });
    // `status` (another process) reads the same from the leading replica's report in Redis.
    const status = await waitFor(
      async () => {
        const s = JSON.parse(await runCli('status', env)) as {
          dependencies: { checkedBy: string | null; report: Record<string, { status: string; reason?: string }> };
        };
        return s.dependencies.report.kafka?.status === 'failing' ? s : undefined;
      },
      20_000,
      'status to name kafka',
      500,
    );
    expect(status.dependencies.report.kafka).toMatchObject({ reason: 'unreachable' });
    expect(status.dependencies.checkedBy).not.toBeNull();
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(
      /^reviews_bridge_dependency_failing\{[^}]*dependency="kafka"[^}]*reason="unreachable"[^}]*\} 1$/m,
    );
    // The first 30 s of the process (by its own log's clock): /readyz keeps naming kafka all along.
    await waitFor(
      async () => {
        const r = await readyz(port);
        expect(r.status).toBe(503);
        expect(r.body.dependencies?.kafka?.reason).toBe('unreachable');
        return Date.now() - started >= 31_000 ? true : undefined;
      },
      45_000,
      'the first 30 s of the process',
      1_000,
    );
    const lines = logLines(child.log());
    const timeOf = (line: string) => Date.parse((JSON.parse(line) as { time: string }).time);
    const first = lines[0] ? timeOf(lines[0].line) : started;
    const window = lines.filter((l) => timeOf(l.line) < first + 30_000);
    const loud = window.filter((l) => l.level >= 40);
    console.log(`${loud.length} warning/error lines in 30 s:\n${loud.map((l) => l.line).join('\n')}`);
    expect(loud.length).toBeLessThanOrEqual(10);
    expect(loud.filter((l) => l.line.includes('KAFKA_BROKERS')).length).toBeGreaterThanOrEqual(1);
    // The libraries' stack traces stay out of the warnings.
    expect(loud.filter((l) => l.line.includes('"stack"'))).toEqual([]);
  }, 90_000);
});

describe('Redis', () => {
  it('refusing the credentials is named as auth_failed with REDIS_USERNAME and REDIS_PASSWORD_FILE', async () => {
    const { server, admin } = await ownRedis();
    await admin.call('ACL', 'SETUSER', 'bridge', 'on', '>right-password', '~*', '&*', '+@all');
    admin.disconnect();
    const dir = runDir(`redis-auth-${server.port}`);
    writeFileSync(`${dir}/password`, 'wrong-password\n');
    const env = testEnv(await upstream(), {
      REDIS_URL: server.url,
      REDIS_USERNAME: 'bridge',
      REDIS_PASSWORD_FILE: `${dir}/password`,
    });
    const { child, port } = await spawnOn(env, 'redis-auth');
    const named = await waitFor(
      async () => {
        const r = await readyz(port);
        return r.body.dependencies?.redis?.status === 'failing' ? r : undefined;
      },
      30_000,
      '/readyz to name redis',
      250,
    );
    expect(named.status).toBe(503);
    expect(named.body.dependencies!.redis).toMatchObject({ status: 'failing', reason: 'auth_failed' });
    expect(named.body.dependencies!.redis!.settings).toEqual(
      expect.arrayContaining(['REDIS_USERNAME', 'REDIS_PASSWORD_FILE']),
    );
    const warned = await waitFor(
      () => logLines(child.log()).find((l) => l.level >= 40 && l.line.includes('REDIS_PASSWORD_FILE')),
      10_000,
      'a warning naming REDIS_PASSWORD_FILE',
    );
    expect(warned.line).toContain('REDIS_USERNAME');
    expect(warned.line).not.toContain('wrong-password');
    expect(child.log()).not.toContain('wrong-password');
  }, 60_000);

  it('refusing writes (maxmemory, noeviction) is named as oom in /readyz, status and a metric, then recovers', async () => {
    const { admin, server } = await ownRedis();
    const env = testEnv(await upstream(), { REDIS_URL: server.url });
    const { child, port } = await spawnOn(env, 'redis-oom');
    await waitFor(async () => ((await readyz(port)).status === 200 ? true : undefined), 60_000, 'ready', 250);

    // Writes refused from now on: PING still answers, the bridge's commits would fail.
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    const refused = await waitFor(
      async () => {
        const r = await readyz(port);
        return r.body.dependencies?.redis?.reason === 'oom' ? r : undefined;
      },
      20_000,
      '/readyz to name redis oom',
      250,
    );
    expect(refused.status).toBe(503);
    expect(refused.body.dependencies!.redis!.status).toBe('failing');
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/^reviews_bridge_dependency_failing\{[^}]*dependency="redis"[^}]*reason="oom"[^}]*\} 1$/m);
    const status = JSON.parse(await runCli('status', env)) as {
      dependencies: { report: Record<string, { reason?: string }> };
    };
    expect(status.dependencies.report.redis).toMatchObject({ status: 'failing', reason: 'oom' });

    await admin.config('SET', 'maxmemory', '0');
    await waitFor(async () => ((await readyz(port)).status === 200 ? true : undefined), 30_000, 'ready again', 250);
    const recovered = await waitFor(
      () => logLines(child.log()).find((l) => l.msg === 'redis ok again'),
      10_000,
      'the recovery line',
    );
    expect(recovered.level).toBe(30);
    const oomLines = logLines(child.log()).filter((l) => l.level >= 40 && l.line.includes('"reason":"oom"'));
    expect(oomLines).toHaveLength(1);
    const after = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(after).toMatch(/^reviews_bridge_dependency_failing\{[^}]*dependency="redis"[^}]*reason="none"[^}]*\} 0$/m);
    admin.disconnect();
  }, 120_000);

  it('a read-only replica is named as readonly, with the settings to check', async () => {
    const primary = await ownRedis();
    const replica = await ownRedis();
    await replica.admin.call('REPLICAOF', '127.0.0.1', String(primary.server.port));
    await waitFor(
      async () => ((await replica.admin.info('replication')).includes('master_link_status:up') ? true : undefined),
      20_000,
      'the replica to follow its primary',
    );
    const env = testEnv(await upstream(), { REDIS_URL: replica.server.url });
    const { child, port } = await spawnOn(env, 'redis-readonly');
    const named = await waitFor(
      async () => {
        const r = await readyz(port);
        return r.body.dependencies?.redis?.status === 'failing' ? r : undefined;
      },
      30_000,
      '/readyz to name redis',
      250,
    );
    expect(named.status).toBe(503);
    expect(named.body.dependencies!.redis).toMatchObject({ reason: 'readonly' });
    expect(named.body.dependencies!.redis!.settings).toContain('REDIS_URL');
    const warned = await waitFor(
      () => logLines(child.log()).filter((l) => l.level >= 40 && l.line.includes('"reason":"readonly"')),
      10_000,
      'the readonly warning',
    );
    expect(warned).toHaveLength(1);
    primary.admin.disconnect();
    replica.admin.disconnect();
  }, 60_000);
});
