import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../helpers/bridge.js';
import { freePort, runCliFull, spawnBridgeOn, waitFor, type Child } from '../helpers/processes.js';

// Issue 50: an operator's second week. Every state is named by the dependency that is in it, with only the settings
// in use; a problem is not hidden behind another; a typo in a setting's name is said; a stop is quick and quiet
// whatever is down. The bridge and its command line as users run them (their own processes).

let sim: Simulator | null = null;
const servers: Server[] = [];
const sockets: Socket[] = [];
const children: Child[] = [];
afterAll(async () => {
  for (const c of children) if (c.alive) await c.kill();
  for (const s of sockets) s.destroy();
  for (const s of servers) await new Promise((resolve) => s.close(resolve));
  await sim?.close();
});

async function upstream(): Promise<string> {
  sim ??= await startSimulator({ reviewCount: 20, seed: 50, rateLimit: null });
  return sim.url;
}

/** A port that accepts connections and never answers (a wrong address that is something else, not Redis). */
async function silentPort(): Promise<number> {
  const server = createServer((socket) => sockets.push(socket));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('`status` with Redis not answering', () => {
  it.each([
    ['down (nothing listens)', async () => `redis://127.0.0.1:${await freePort()}`, 'unreachable'],
    ['a wrong REDIS_URL (a server that never answers)', async () => `redis://127.0.0.1:${await silentPort()}`, null],
  ])('Redis %s: one line naming Redis and REDIS_URL only, exit 1', async (_what, url, reason) => {
    const env = testEnv(await upstream(), { REDIS_URL: await url() });
    const started = Date.now();
    // The command's own bound is 4 s; the runner's limit is only there so that a hang fails instead of waiting.
    const result = await runCliFull('status', env, 60_000);
    console.log(`status answered in ${Date.now() - started} ms (exit ${result.code})`);
    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^reviews-bridge status: Redis ${reason ?? '\\w+'}: check REDIS_URL( \\(|$)`));
    expect(lines[0]).not.toMatch(/REDIS_SENTINELS|REDIS_CLUSTER_NODES|max retries/);
  });
});

async function spawnOn(env: Record<string, string>, name: string): Promise<{ child: Child; port: number }> {
  return spawnBridgeOn(env, name, children);
}

type Dependencies = Record<string, { status: string; reason?: string; settings?: string[] }>;

async function readyz(
  port: number,
): Promise<{ status: number; body: { checks: Record<string, unknown>; dependencies?: Dependencies } }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return {
    status: res.status,
    body: (await res.json()) as { checks: Record<string, unknown>; dependencies?: Dependencies },
  };
}

/** The log's JSON lines (pino). */
function logLines(text: string): { level: number; msg: string; [field: string]: unknown }[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string });
}

describe('Kafka, Redis and the upstream secret all wrong at once', () => {
  it('/readyz names all three (Redis with REDIS_URL only), a typo is warned of, and SIGTERM stops quickly at info', async () => {
    const env = testEnv(await upstream(), {
      KAFKA_BROKERS: `127.0.0.1:${await freePort()}`,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      UPSTREAM_CLIENT_SECRET: 'not-the-secret',
      // A typo next to the real setting: ignored, and said.
      KAFKA_BROKER: 'x',
    });
    const { child, port } = await spawnOn(env, 'all-wrong');
    const named = await waitFor(
      async () => {
        const r = await readyz(port).catch(() => undefined);
        const d = r?.body.dependencies;
        return d?.kafka?.status === 'failing' && d.redis?.status === 'failing' && d.upstream?.status === 'failing'
          ? r
          : undefined;
      },
      60_000,
      '/readyz to name kafka, redis and the upstream',
      500,
    );
    expect(named!.status).toBe(503);
    const d = named!.body.dependencies!;
    expect(d.kafka).toMatchObject({ reason: 'unreachable', settings: ['KAFKA_BROKERS'] });
    expect(d.redis).toMatchObject({ reason: 'unreachable', settings: ['REDIS_URL'] });
    expect(d.upstream).toMatchObject({ reason: 'auth_failed' });
    expect(d.upstream!.settings!.some((s) => s.startsWith('UPSTREAM_CLIENT_SECRET'))).toBe(true);
    expect(named!.body.checks.upstream_credentials).toBe(false);
    const typo = logLines(child.log()).filter((l) => l.setting === 'KAFKA_BROKER');
    expect(typo).toEqual([
      expect.objectContaining({
        level: 40,
        meant: 'KAFKA_BROKERS',
        msg: expect.stringContaining('did you mean KAFKA_BROKERS?'),
      }),
    ]);

    // SIGTERM with every dependency down: a clean stop at info (nothing could commit), well inside the grace period.
    const signalled = Date.now();
    const exit = await child.stop(60_000);
    console.log(`stopped ${Date.now() - signalled} ms after SIGTERM`);
    expect(exit).toEqual({ code: 0, signal: null });
    const after = logLines(child.log()).slice(logLines(child.log()).findIndex((l) => l.msg === 'shutting down'));
    expect(after.map((l) => [l.level, l.msg])).toEqual([
      [30, 'shutting down'],
      [30, 'stopped cleanly'],
    ]);
  }, 120_000);

  it('`run` without KAFKA_BROKERS but with KAFKA_BROKER: the typo is named next to the missing setting, exit 2', async () => {
    const env = testEnv(await upstream(), { KAFKA_BROKER: '127.0.0.1:9092' });
    delete env.KAFKA_BROKERS;
    const result = await runCliFull('run', { ...env, KAFKA_BROKERS: '' }, 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'reviews-bridge: warning: KAFKA_BROKER is not a setting of the bridge and is ignored (did you mean KAFKA_BROKERS?)',
      expect.stringMatching(/^reviews-bridge: invalid configuration: KAFKA_BROKERS: /),
    ]);
  });
});

describe('refused credentials', () => {
  it('a leader and its checks ask for a token at most 8 times in 30 s, and /readyz names the upstream', async () => {
    const env = testEnv(await upstream(), { UPSTREAM_CLIENT_SECRET: 'not-the-secret' });
    const refusedSoFar = () => sim!.control.stats().byStatus['401'] ?? 0;
    const before = refusedSoFar();
    const { port } = await spawnOn(env, 'refused');
    await waitFor(async () => (refusedSoFar() > before ? true : undefined), 60_000, 'the first token request', 100);
    const first = Date.now();
    const atFirst = refusedSoFar();
    const r = await waitFor(
      async () => {
        const answer = await readyz(port).catch(() => undefined);
        return Date.now() - first >= 30_000 && answer?.body.dependencies?.upstream?.status === 'failing'
          ? answer
          : undefined;
      },
      90_000,
      '30 s of refusals',
      1_000,
    );
    const inWindow = refusedSoFar() - atFirst + 1;
    console.log(`${inWindow} refused token requests in the first ${Date.now() - first} ms`);
    expect(inWindow).toBeLessThanOrEqual(8);
    expect(r!.body.dependencies!.upstream).toMatchObject({ reason: 'auth_failed' });
  }, 150_000);
});
