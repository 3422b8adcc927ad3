import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { startApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/config.js';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import { PrivateRedis, spawnLogged, runDir } from '../test/helpers/processes.js';
import {
  benchPasses,
  cpuMeter,
  dropAccount,
  dropTopics,
  InMemorySource,
  round,
  RssSampler,
  services,
  uniqueName,
  writeResult,
  benchEnv,
  BENCH_KEY_PREFIX,
} from './lib.js';

// The bridge's pipeline without the upstream's limit.
//  1. In-memory source (JSON bodies parsed and validated per record as the upstream client does, no HTTP) feeding
//     the real passes, SnapshotStore (private redis-server), KafkaPublisher (the shared broker), BridgeMetrics and
//     Lease: a pass of new reviews (initial load, every review.created published and acknowledged) and a pass of
//     unchanged reviews (a sweep: read snapshot, diff, nothing to publish, cursor commits).
//  2. The same two passes through the whole bridge (startApp) against the simulator run as a separate process
//     with its rate limit off (HTTP, token, pager, limiter included; both processes share the 2 cores).
// Reviews/s, and CPU per thousand reviews of this process (process.cpuUsage; Kafka, Redis and the simulator
// run in other processes and are not counted).
//
// BENCH_REVIEWS (default 100000) reviews for part 1, repeated BENCH_REPEAT (default 3) times on fresh accounts
// (median reported: the machine is shared), BENCH_SIM_REVIEWS (default 50000) for part 2.

const N = Number(process.env.BENCH_REVIEWS ?? 100_000);
const N_SIM = Number(process.env.BENCH_SIM_REVIEWS ?? 50_000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 3);
const REDIS_PORT = Number(process.env.BENCH_REDIS_PORT ?? 36579);
const SIM_PORT = Number(process.env.BENCH_SIM_PORT ?? 38579);
const { kafkaBrokers } = services();

interface PassFigures {
  reviews: number;
  seconds: number;
  reviewsPerSecond: number;
  events: number;
  cpuMs: number;
  cpuMsPerThousandReviews: number;
  rssMiB: Record<string, number>;
}

async function measure(reviews: number, run: () => Promise<{ events: number }>): Promise<PassFigures> {
  const rss = new RssSampler();
  const cpu = cpuMeter();
  const t0 = performance.now();
  const { events } = await run();
  const seconds = (performance.now() - t0) / 1000;
  const c = cpu();
  return {
    reviews,
    seconds: round(seconds, 2),
    reviewsPerSecond: Math.round(reviews / seconds),
    events,
    cpuMs: c.totalMs,
    cpuMsPerThousandReviews: round(c.totalMs / (reviews / 1000), 2),
    rssMiB: rss.stop().rssMiB,
  };
}

async function inMemory(redisUrl: string): Promise<Record<string, unknown>> {
  // Warm-up on a small account so the JIT has seen every path before the measured passes.
  {
    const warm = await benchPasses(new InMemorySource({ count: 5_000, precompute: true }), { redisUrl, kafkaBrokers });
    await warm.sweep();
    await warm.sweep();
    await dropAccount(warm.redis, warm.keys);
    await warm.close();
    await dropTopics(kafkaBrokers, Object.values(warm.topics));
  }
  // Repeated on fresh accounts: the machine is shared, so single runs vary; the median is reported.
  const source = new InMemorySource({ count: N, precompute: true });
  const runs: { newReviews: PassFigures; unchangedReviews: PassFigures; loadAverage: number[] }[] = [];
  for (let r = 0; r < REPEAT; r++) {
    const bp = await benchPasses(source, { redisUrl, kafkaBrokers });
    try {
      const loadAverage = loadavg().map((l) => round(l, 2));
      const created = await measure(N, () => bp.sweep());
      const unchanged = await measure(N, () => bp.sweep());
      if (created.events !== N || unchanged.events !== 0) {
        throw new Error(`unexpected events: ${created.events}, ${unchanged.events}`);
      }
      runs.push({ newReviews: created, unchangedReviews: unchanged, loadAverage });
      console.log(
        `run ${r + 1}: new ${created.reviewsPerSecond}/s, unchanged ${unchanged.reviewsPerSecond}/s, load ${loadAverage.join(' ')}`,
      );
    } finally {
      await dropAccount(bp.redis, bp.keys);
      await bp.close();
      await dropTopics(kafkaBrokers, Object.values(bp.topics));
    }
  }
  const median = (pick: (run: (typeof runs)[number]) => PassFigures): PassFigures => {
    const sorted = [...runs].sort((a, b) => pick(a).reviewsPerSecond - pick(b).reviewsPerSecond);
    return pick(sorted[Math.floor((sorted.length - 1) / 2)]!);
  };
  return { newReviews: median((r) => r.newReviews), unchangedReviews: median((r) => r.unchangedReviews), runs };
}

async function viaSimulator(redisUrl: string): Promise<Record<string, unknown>> {
  const dir = runDir('bench-pipeline');
  const sim = spawnLogged(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli.ts',
      'simulate',
      '--port',
      String(SIM_PORT),
      '--reviews',
      String(N_SIM),
      '--rps',
      'off',
    ],
    {},
    `${dir}/simulator.log`,
  );
  try {
    const url = `http://127.0.0.1:${SIM_PORT}`;
    for (let i = 0; ; i++) {
      const up = await fetch(`${url}/_control/review-count`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (i > 300) throw new Error('simulator did not start');
      await sleep(100);
    }
    const account = uniqueName('bench-sim');
    const env = benchEnv(account, url, {
      REDIS_URL: redisUrl,
      UPSTREAM_RATE_LIMIT_RPS: '1000',
      POLL_INTERVAL_MS: '5000',
    });
    const config = loadConfig(env);
    const redis = connectRedis(redisUrl);
    const keys = accountKeys(BENCH_KEY_PREFIX, account);
    const store = new SnapshotStore(redis, keys);
    // Pass duration from the checkpoint: the sweep's startedAt (sampled while it runs) to its lastSweepAt, so
    // neither the process start-up nor the loop's wait to take a sweep request counts.
    const timedSweep = async (after: number): Promise<{ seconds: number }> => {
      let startedAt: number | null = null;
      for (;;) {
        const c = await store.checkpoint();
        if (c.sweep && c.sweep.startedAt >= after - 1_000) startedAt ??= c.sweep.startedAt;
        if (c.initialDone && c.sweep === null && (c.lastSweepAt ?? 0) > after && startedAt !== null) {
          return { seconds: (c.lastSweepAt! - startedAt) / 1000 };
        }
        await sleep(10);
      }
    };
    const app = await startApp(config, pino({ level: 'warn' }));
    try {
      let pass = { seconds: 0 };
      const created = await measure(N_SIM, async () => {
        pass = await timedSweep(Date.now());
        return { events: N_SIM };
      });
      const createdPass = {
        ...created,
        seconds: round(pass.seconds, 2),
        reviewsPerSecond: Math.round(N_SIM / pass.seconds),
      };
      const unchanged = await measure(N_SIM, async () => {
        const requested = Date.now();
        await store.requestSweep();
        pass = await timedSweep(requested);
        return { events: 0 };
      });
      const unchangedPass = {
        ...unchanged,
        seconds: round(pass.seconds, 2),
        reviewsPerSecond: Math.round(N_SIM / pass.seconds),
      };
      return {
        newReviews: {
          ...createdPass,
          note: 'seconds: the pass (checkpoint startedAt to lastSweepAt); cpu: whole window incl. start-up',
        },
        unchangedReviews: { ...unchangedPass, note: 'seconds: the pass; cpu: whole window incl. polls every 5 s' },
      };
    } finally {
      await app.stop();
      await dropAccount(redis, keys);
      await redis.quit();
      await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
    }
  } finally {
    await sim.stop();
  }
}

const redisServer = new PrivateRedis(REDIS_PORT, 'bench-redis', 'none');
redisServer.wipe();
await redisServer.start();
try {
  const memory = await inMemory(redisServer.url);
  const sim = process.env.BENCH_SKIP_SIMULATOR ? null : await viaSimulator(redisServer.url);
  const targets = {
    unchangedReviewsPerSecond: { target: 30_000, measured: (memory.unchangedReviews as PassFigures).reviewsPerSecond },
    newReviewsPerSecond: { target: 10_000, measured: (memory.newReviews as PassFigures).reviewsPerSecond },
  };
  const result = {
    setup: {
      inMemory: `${N} reviews, pages of 100, JSON parse + per-record zod validation + passes + SnapshotStore (private redis-server ${redisServer.url}, no persistence) + KafkaPublisher (acks=all, idempotent, ${kafkaBrokers.join(',')}), one process`,
      viaSimulator: `${N_SIM} reviews, bridge in this process (startApp), simulator as a child process with --rps off, UPSTREAM_RATE_LIMIT_RPS=1000`,
    },
    inMemory: memory,
    viaSimulator: sim,
    targets: Object.fromEntries(
      Object.entries(targets).map(([k, v]) => [
        k,
        { ...v, met: v.measured >= v.target, ratio: round(v.measured / v.target, 2) },
      ]),
    ),
  };
  const file = writeResult('pipeline', result);
  console.log(JSON.stringify(result, null, 2));
  console.log(`written ${file}`);
} finally {
  await redisServer.stop();
}
