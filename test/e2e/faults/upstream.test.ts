import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../../src/simulator/index.js';
import { intBetween, mulberry32 } from '../../../src/simulator/prng.js';
import { pollsCommitted, startTestBridge, testEnv, upstreamRequests, type TestBridge } from '../../helpers/bridge.js';
import {
  CheckpointMonitor,
  Oracle,
  readTopics,
  requestSweep,
  settle,
  summary,
  violations,
} from '../../helpers/oracle.js';
import { waitFor } from '../../helpers/processes.js';
import { redisAddress } from '../../helpers/topologies.js';

// Upstream faults while the history runs: (d) a storm of injected 5xx answers, truncated bodies and a throttle far
// below what the bridge is configured for (503 first, then 429 with Retry-After); (e) every issued token revoked
// again and again, also mid-pass. The bridge must ride them out with nothing lost or invented.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Run {
  sim: Simulator;
  bridge: TestBridge;
  oracle: Oracle;
  monitor: CheckpointMonitor;
  env: Record<string, string>;
  topics: { created: string; statusChanged: string; updated: string; deadLetter: string };
}

async function start(seed: number, sim: SimulatorOptions, overrides: Record<string, string>): Promise<Run> {
  const simulator = await startSimulator({ reviewCount: 400, seed, ...sim });
  cleanups.push(() => simulator.close());
  const env = testEnv(simulator.url, overrides);
  const monitor = new CheckpointMonitor(redisAddress(env), env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);
  cleanups.push(() => monitor.stop());
  const bridge = await startTestBridge(env);
  cleanups.push(() => bridge.stop());
  return {
    sim: simulator,
    bridge,
    oracle: new Oracle(simulator.control, seed),
    monitor,
    env,
    topics: {
      created: env.KAFKA_TOPIC_CREATED!,
      statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
      updated: env.KAFKA_TOPIC_UPDATED!,
      deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
    },
  };
}

/**
 * Settles, reads every topic back and asserts the oracle's verdict. `deadLettered`: reviews the upstream serves
 * poisoned, which must never be published (a record can only cost itself): they are not counted as lost.
 */
async function judge(
  run: Run,
  name: string,
  historyEnd: number,
  extra: Record<string, unknown>,
  deadLettered: ReadonlySet<string> = new Set(),
) {
  const { env, monitor, oracle, topics } = run;
  await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!, historyEnd, 120_000);
  const report = await monitor.stop();
  const verdict = await oracle.verify(
    await readTopics(Object.values(topics)),
    topics,
    `urn:reviews-bridge:${env.BRIDGE_ACCOUNT}`,
  );
  const exempt = verdict.lost.created.filter((f) => deadLettered.has(f.review));
  expect(exempt).toHaveLength(deadLettered.size);
  verdict.lost.created = verdict.lost.created.filter((f) => !deadLettered.has(f.review));
  console.log(
    summary(name, verdict, {
      ...extra,
      'settled after the history ended (ms)': Date.now() - historyEnd,
      checkpoint: report,
      simulator: run.sim.control.stats(),
    }),
  );
  expect(violations(verdict, { tolerateDetectionDrift: true })).toEqual([]);
  expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
  expect(report.regressions).toEqual([]);
  return verdict;
}

describe('fault: upstream', () => {
  it('(d) a storm of 5xx, truncated bodies and a low throttle (503, then 429): nothing lost', async () => {
    const run = await start(
      51,
      {
        rateLimit: { rps: 4, burst: 4, status: 503 },
        // 503 is left to the throttle: injected at random too, it reads as throttling and the adaptive limiter
        // halves its rate at every one, down to its floor (rps/100), so the run crawls (seen: ~2 requests/s).
        faults: { errorRate: 0.3, errorStatuses: [500, 502, 504], truncateRate: 0.1 },
      },
      // The bridge believes it may send 20 requests/s: it has to learn the real limit from the answers.
      { UPSTREAM_RATE_LIMIT_RPS: '20', POLL_INTERVAL_MS: '500' },
    );
    const history = run.oracle.runHistory({
      durationMs: 20_000,
      pauseMs: [30, 150],
      passRunning: () => run.monitor.sweepRunning,
      onStep: async (step) => {
        if (step % 80 === 0)
          await requestSweep(redisAddress(run.env), run.env.REDIS_KEY_PREFIX!, run.env.BRIDGE_ACCOUNT!);
      },
    });
    // The first storm lasts the bridge's next 20 upstream requests (about ten seconds: the 4 requests/s throttle and
    // the injected errors hold it near 2 requests/s), then a harsher one.
    await upstreamRequests(run.sim, 20, undefined, 60_000);
    // Then lower still, answered 429 with Retry-After: whatever rate the bridge has settled on, it is too high.
    run.sim.control.setRateLimit({ rps: 2, burst: 2, status: 429, retryAfterSeconds: 1 });
    const stats = await history;
    // The storm subsides to the upstream's normal limit (10 requests/s, 429): errors and truncation stay on. At a
    // throttle of 2 requests/s the adaptive limiter sits near its floor and incremental polls (every 500 ms) take
    // the whole budget, so a sweep would crawl; that is by design (sweeps yield to polls), not what is tested here.
    run.sim.control.setRateLimit({ rps: 10, status: 429 });
    const historyEnd = Date.now();
    await judge(run, 'upstream storm: errorRate 0.3, truncateRate 0.1, throttle 4 requests/s', historyEnd, {
      history: stats,
    });
    const sim = run.sim.control.stats();
    expect(sim.throttled).toBeGreaterThan(0);
    expect(sim.byStatus['500'] ?? 0).toBeGreaterThan(0);
    // Which of the two throttles the bridge runs into depends on how fast it pages: on a replicated Redis (each
    // commit waits for a replica) it can stay under the first one.
    expect((sim.byStatus['503'] ?? 0) + (sim.byStatus['429'] ?? 0)).toBeGreaterThan(0);
  });

  it('(f) poisoned records appear in the listing mid-history: every other change is delivered, nothing lost', async () => {
    const run = await start(53, { rateLimit: null }, { UPSTREAM_RATE_LIMIT_RPS: '20', POLL_INTERVAL_MS: '500' });
    const { env, monitor } = run;
    const history = run.oracle.runHistory({
      durationMs: 20_000,
      pauseMs: [30, 150],
      passRunning: () => monitor.sweepRunning,
    });
    await waitFor(() => (monitor.last.initial_done === '1' ? true : undefined), 60_000, 'the initial load', 20);
    // Each kind of absurd record of issue 9, twice over the run, one of them during a sweep.
    const poisoned = run.sim.control.addPoisonReviews();
    // The second batch comes once the bridge has polled past the first (two polls committed after it), with a sweep.
    await pollsCommitted(run.bridge, 2);
    await requestSweep(redisAddress(env), env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);
    poisoned.push(...run.sim.control.addPoisonReviews());
    const stats = await history;
    const historyEnd = Date.now();
    const ids = new Set(poisoned.map((p) => String(p.id)));
    await judge(
      run,
      'poisoned records mixed into the history',
      historyEnd,
      { history: stats, poisoned: ids.size },
      ids,
    );
    const dead = await readTopics([env.KAFKA_TOPIC_DEAD_LETTER!]);
    const deadIds = new Set(dead.map((m) => m.key));
    for (const p of poisoned) expect(deadIds.has(String(p.id)), `dead letter of poisoned review ${p.id}`).toBe(true);
  });

  it('(e) tokens revoked again and again, also mid-pass: nothing lost', async () => {
    const run = await start(
      52,
      { rateLimit: null, tokenTtlSeconds: 3600 },
      { UPSTREAM_RATE_LIMIT_RPS: '20', UPSTREAM_PAGE_SIZE: '10', POLL_INTERVAL_MS: '400' },
    );
    const { env, monitor } = run;
    const history = run.oracle.runHistory({
      durationMs: 25_000,
      pauseMs: [30, 150],
      passRunning: () => monitor.sweepRunning,
    });
    const revocations: string[] = [];
    // First revocation in the middle of the initial load, then in sweeps and between polls.
    await waitFor(
      () => (monitor.last.sweep_kind === 'initial' && Number(monitor.last.sweep_seen) >= 50 ? true : undefined),
      60_000,
      'the initial load to be under way',
      20,
    );
    // Until the history ends, a revocation after a seeded random number of the bridge's upstream requests (2 to
    // 12: inside a page run or between polls), with a sweep asked for before every other one.
    let historyDone = false;
    void history.then(
      () => (historyDone = true),
      () => (historyDone = true),
    );
    const random = mulberry32(52);
    for (let i = 0; !historyDone; i++) {
      if (i % 2 === 1) await requestSweep(redisAddress(env), env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);
      await upstreamRequests(run.sim, intBetween(random, 2, 12));
      revocations.push(monitor.last.sweep_kind || 'polling');
      run.sim.control.revokeTokens();
    }
    const stats = await history;
    const historyEnd = Date.now();
    await judge(run, 'tokens revoked', historyEnd, {
      revocations: revocations.length,
      'revoked during': revocations.join(','),
      history: stats,
    });
    const sim = run.sim.control.stats();
    expect(sim.byStatus['401'] ?? 0).toBeGreaterThan(0);
    expect(sim.tokensIssued).toBeGreaterThan(revocations.length / 2);
  });
});
