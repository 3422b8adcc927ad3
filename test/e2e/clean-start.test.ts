import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { testEnv, upstreamRequests } from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { runDir, spawnBridge, waitFor, type Child } from '../helpers/processes.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';

// The bridge as users start it (its own Node 24 process), through the initial load, polls and a clean stop: no
// warning from the runtime or a dependency may appear (kafkajs' TimeoutNegativeWarning, kafkajs#1751, is patched
// by patches/kafkajs+2.2.4.patch), because warnings that always appear teach operators to ignore warnings.

const children: Child[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of children) if (c.alive) await c.kill();
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

/**
 * Watches the idle process over six of its polls (the warnings looked for come from kafkajs timers of an idle
 * client: its own polls, not a time), stops it cleanly and returns its log, which must hold no warning.
 */
async function stopAfterIdlePolls(sim: Awaited<ReturnType<typeof startSimulator>>, child: Child, log: string) {
  await upstreamRequests(sim, 6);
  const exit = await child.stop(20_000);
  expect(exit.code).toBe(0);
  const output = readFileSync(log, 'utf8');
  expect(output.match(/.*Warning.*/g) ?? []).toEqual([]);
  return output;
}

describe('a clean start on Node 24', () => {
  it('prints no process warning while it loads, polls and stops', async () => {
    const sim = await startSimulator({ reviewCount: 300, seed: 5, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, { POLL_INTERVAL_MS: '500', LOG_LEVEL: 'info' });
    const log = `${runDir(env.BRIDGE_ACCOUNT!)}/bridge.log`;
    const child = spawnBridge(env, log);
    children.push(child);
    // Until the initial load is published, then a few idle polls (kafkajs' idle request queues).
    await waitFor(
      async () => {
        const created = await readAll([env.KAFKA_TOPIC_CREATED!], { timeoutMs: 10_000 });
        return created.length >= 300 ? true : undefined;
      },
      120_000,
      'the initial load to be published',
      500,
    );
    const output = await stopAfterIdlePolls(sim, child, log);
    expect(output).toContain('leading');
  });

  it('prints no process warning with OpenTelemetry on either, and its spans arrive', async () => {
    const otlp = await startOtlpReceiver();
    cleanups.push(() => otlp.close());
    const sim = await startSimulator({ reviewCount: 150, seed: 6, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, {
      POLL_INTERVAL_MS: '500',
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    const log = `${runDir(env.BRIDGE_ACCOUNT!)}/bridge.log`;
    const child = spawnBridge(env, log);
    children.push(child);
    await waitFor(
      async () => (otlp.spans.some((s) => s.name === 'pass initial') ? true : undefined),
      120_000,
      'the initial load span to reach the receiver',
      500,
    );
    const output = await stopAfterIdlePolls(sim, child, log);
    expect(output).toContain('tracing on');
    expect(otlp.refused).toEqual([]);
    expect(new Set(otlp.spans.map((s) => s.service))).toEqual(new Set(['reviews-bridge']));
    expect(otlp.spans.some((s) => s.name === 'pass incremental')).toBe(true);
  });
});
