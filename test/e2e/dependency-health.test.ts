import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../helpers/bridge.js';
import { freePort, runDir, spawnBridge, waitFor, type Child } from '../helpers/processes.js';

// Issue 40: an operator's first hour with a dependency down. The bridge as users start it (its own process), with
// KAFKA_BROKERS pointing at a port nobody listens on: /readyz names kafka and why, and the log stays readable (a few
// lines, one of them naming the setting to check), however often kafkajs retries underneath.

const children: Child[] = [];
let sim: Simulator | null = null;
afterAll(async () => {
  for (const c of children) if (c.alive) await c.kill();
  await sim?.close();
});

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
    sim = await startSimulator({ reviewCount: 20, seed: 40, rateLimit: null });
    const closed = await freePort();
    const port = await freePort();
    const env = testEnv(sim.url, {
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
