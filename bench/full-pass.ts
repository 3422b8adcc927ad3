import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { startApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/config.js';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { startSimulator } from '../src/simulator/index.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import {
  BENCH_KEY_PREFIX,
  benchEnv,
  dropAccount,
  dropTopics,
  round,
  services,
  uniqueName,
  writeResult,
} from './lib.js';

// A full pass at the upstream's own limit: the simulator with its default throttle (10 requests/s, burst 10, 503),
// BENCH_FULL_REVIEWS (default 30,000) reviews, the real bridge (startApp) on the shared Kafka and Redis with its
// defaults (pages of 100, POLL_INTERVAL_MS 5000). Two passes per configuration: the initial load (every
// review.created published) and a reconciliation sweep of the unchanged reviews (incremental polls every 5 s
// share the budget). Reviews/s as a fraction of the 1,000 reviews/s ceiling (10 requests/s x 100), and the
// requests the simulator throttled. Configurations: BENCH_FULL_RPS (default "9.6,10"), the bridge's
// UPSTREAM_RATE_LIMIT_RPS (9.6 is its default).

const N = Number(process.env.BENCH_FULL_REVIEWS ?? 30_000);
const RATES = (process.env.BENCH_FULL_RPS ?? '9.6,10').split(',').map(Number);
const CEILING = 1_000;
const { kafkaBrokers, redisUrl } = services();

interface PassResult {
  reviews: number;
  seconds: number;
  reviewsPerSecond: number;
  fractionOfCeiling: number;
  requests: number;
  throttled: number;
  throttledFraction: number;
  byStatus: Record<string, number>;
}

async function runConfiguration(rps: number): Promise<Record<string, PassResult>> {
  const sim = await startSimulator({ reviewCount: N, seed: 7 });
  const account = uniqueName('bench-full');
  const env = benchEnv(account, sim.url, { UPSTREAM_RATE_LIMIT_RPS: String(rps) });
  const config = loadConfig(env);
  const redis = connectRedis(redisUrl);
  const keys = accountKeys(BENCH_KEY_PREFIX, account);
  const store = new SnapshotStore(redis, keys);

  // Pass duration from the checkpoint (the sweep's startedAt, sampled while it runs, to its lastSweepAt).
  const timedSweep = async (after: number): Promise<number> => {
    let startedAt: number | null = null;
    for (;;) {
      const c = await store.checkpoint();
      if (c.sweep && c.sweep.startedAt >= after - 1_000) startedAt ??= c.sweep.startedAt;
      if (c.initialDone && c.sweep === null && (c.lastSweepAt ?? 0) > after && startedAt !== null) {
        return (c.lastSweepAt! - startedAt) / 1000;
      }
      await sleep(20);
    }
  };
  const figures = (seconds: number): PassResult => {
    const s = sim.control.stats();
    return {
      reviews: N,
      seconds: round(seconds, 2),
      reviewsPerSecond: Math.round(N / seconds),
      fractionOfCeiling: round(N / seconds / CEILING, 3),
      requests: s.requests,
      throttled: s.throttled,
      throttledFraction: round(s.throttled / Math.max(1, s.requests), 4),
      byStatus: s.byStatus,
    };
  };

  const app = await startApp(config, pino({ level: 'warn' }));
  try {
    const initial = figures(await timedSweep(Date.now()));
    console.log(`rps ${rps} initial load`, JSON.stringify(initial));
    // Let the loop's first polls go by, then a sweep of the unchanged reviews.
    await sleep(1_000);
    sim.control.resetStats();
    const requested = Date.now();
    await store.requestSweep();
    const sweep = figures(await timedSweep(requested));
    console.log(`rps ${rps} sweep (unchanged)`, JSON.stringify(sweep));
    return { initialLoad: initial, sweepUnchanged: sweep };
  } finally {
    await app.stop();
    await sim.close();
    await dropAccount(redis, keys);
    await redis.quit();
    await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
  }
}

const configurations: Record<string, Record<string, PassResult>> = {};
for (const rps of RATES) configurations[`UPSTREAM_RATE_LIMIT_RPS=${rps}`] = await runConfiguration(rps);
const best = Object.values(configurations).flatMap((c) => Object.values(c));
const result = {
  setup: `${N} reviews; simulator default throttle (10 requests/s, burst 10, 503); bridge via startApp, pages of 100, shared Kafka ${kafkaBrokers.join(',')} and Redis ${redisUrl}`,
  ceilingReviewsPerSecond: CEILING,
  configurations,
  target: 'at least 95% of 1,000 reviews/s with under 1% of requests throttled',
  targetMet: Object.fromEntries(
    Object.entries(configurations).map(([name, passes]) => [
      name,
      Object.fromEntries(
        Object.entries(passes).map(([pass, r]) => [pass, r.fractionOfCeiling >= 0.95 && r.throttledFraction < 0.01]),
      ),
    ]),
  ),
  bestFractionOfCeiling: Math.max(...best.map((r) => r.fractionOfCeiling)),
};
const file = writeResult('full-pass', result);
console.log(JSON.stringify(result.targetMet, null, 2));
console.log(`written ${file}`);
