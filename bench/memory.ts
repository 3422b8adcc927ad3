import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import { startSimulator } from '../src/simulator/index.js';
import { freePort, PrivateRedis, ROOT, spawnLogged, type Child } from '../test/helpers/processes.js';
import {
  BENCH_KEY_PREFIX,
  benchEnv,
  dropAccount,
  dropTopics,
  imageNodeFlags,
  memoryFigures,
  type MemoryFigures,
  percentile,
  round,
  services,
  uniqueName,
  writeResult,
} from './lib.js';

// Memory of the bridge as users run it: the whole bridge (`run`) as its own process, started the way the container
// image starts it (the Dockerfile's ENTRYPOINT, `node dist/src/cli.js`, whose `run` caps its own heap) or from the
// sources under tsx as `npm start` does (BENCH_MEMORY_RUNTIME = build (default) | tsx | both), against the bundled simulator (no rate
// limit, in this process), a private redis-server (no persistence) and the shared Kafka broker.
//  - Pass 1: initial load of BENCH_REVIEWS (default 1,000,000) reviews with INITIAL_LOAD_MODE=suppress: every
//    review fetched over HTTP, validated, diffed and written to the snapshot (and its changelog), no events
//    (publish NOT included: a million created events would put ~1.5 GB on the shared broker).
//  - Pass 2: a sweep over the same million, unchanged.
//  - Pass 3: another process, initial load of BENCH_PUBLISH_REVIEWS (default 200,000) other reviews in 'mark'
//    mode: every review.created sent to Kafka and acknowledged.
// The bridge's RSS is read from /proc/<pid>/status every 100 ms (VmRSS) and its peak from the kernel (VmHWM, so no
// peak falls between samples); where the memory is (V8 heap spaces, external) comes from its own /metrics every
// second. BENCH_NODE_FLAGS adds Node flags (e.g. "--max-old-space-size=4096" to see what the bridge's own caps
// save; a flag given here is one `run` leaves alone).

const N = Number(process.env.BENCH_REVIEWS ?? 1_000_000);
const N_PUBLISH = Number(process.env.BENCH_PUBLISH_REVIEWS ?? 200_000);
const REDIS_PORT = Number(process.env.BENCH_REDIS_PORT ?? 36579);
const RUNTIMES =
  (process.env.BENCH_MEMORY_RUNTIME ?? 'build') === 'both'
    ? ['build', 'tsx']
    : [process.env.BENCH_MEMORY_RUNTIME ?? 'build'];
const TARGET_MIB = 256;
const { kafkaBrokers } = services();

function command(runtime: string, flags: string[]): string[] {
  if (runtime === 'build') {
    if (!existsSync(`${ROOT}/dist/src/cli.js`)) throw new Error('bench: run `npm run build` first');
    return [...flags, 'dist/src/cli.js', 'run'];
  }
  return [...flags, '--import', 'tsx', 'src/cli.ts', 'run'];
}

const statusKiB = (pid: number, field: string): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN);
};

/** Samples a child's RSS (and its breakdown through /metrics) until stopped. */
class ChildSampler {
  private readonly rss: number[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly scraper: NodeJS.Timeout;
  private atPeak: MemoryFigures | null = null;
  private peakScraped = 0;

  constructor(
    private readonly child: Child,
    private readonly port: number,
  ) {
    this.timer = setInterval(() => this.sample(), 100);
    this.scraper = setInterval(() => void this.breakdown(), 1_000);
    this.sample();
  }

  private sample(): void {
    if (this.child.alive) this.rss.push(statusKiB(this.child.pid, 'VmRSS') / 1024);
  }

  private async breakdown(): Promise<void> {
    const figures = await memoryFigures(this.port);
    if (figures && figures.rss >= this.peakScraped) {
      this.peakScraped = figures.rss;
      this.atPeak = figures;
    }
  }

  stop(): Record<string, unknown> {
    clearInterval(this.timer);
    clearInterval(this.scraper);
    this.sample();
    return {
      samples: this.rss.length,
      rssMiB: {
        first: round(this.rss[0]!),
        p50: round(percentile(this.rss, 50)),
        max: round(Math.max(...this.rss)),
        last: round(this.rss[this.rss.length - 1]!),
      },
      breakdownAtLargestScrapeMiB: this.atPeak,
    };
  }
}

/** One bridge process over one fresh account of `count` reviews; `body` drives it and names its passes. */
async function bridgeRun(
  runtime: string,
  flags: string[],
  redisUrl: string,
  count: number,
  mode: 'suppress' | 'mark',
  body: (ctx: {
    store: SnapshotStore;
    bucketPattern: string;
    pass: (name: string, reviews: number, start: () => Promise<void>) => Promise<void>;
  }) => Promise<void>,
): Promise<{ passes: Record<string, unknown>; peakRssMiB: number; startedRssMiB: number; store?: unknown }> {
  const sim = await startSimulator({ reviewCount: count, seed: 11, rateLimit: null });
  const account = uniqueName('bench-mem');
  const port = await freePort();
  const env = benchEnv(account, sim.url, {
    REDIS_URL: redisUrl,
    INITIAL_LOAD_MODE: mode,
    UPSTREAM_RATE_LIMIT_RPS: '1000',
    UPSTREAM_RATE_LIMIT_BURST: '10',
    HTTP_PORT: String(port),
    NODE_OPTIONS: '',
  });
  const redis = connectRedis(redisUrl);
  const keys = accountKeys(BENCH_KEY_PREFIX, account);
  const store = new SnapshotStore(redis, keys);
  const child = spawnLogged(process.execPath, command(runtime, flags), env, `${ROOT}/.run/bench-memory-${runtime}.log`);
  const passes: Record<string, unknown> = {};

  try {
    // Started: its ops server answers.
    for (let i = 0; (await memoryFigures(port)) === null; i++) {
      if (!child.alive || i > 600) throw new Error(`bench: the bridge did not start (see ${child.logFile})`);
      await sleep(100);
    }
    const startedRssMiB = round(statusKiB(child.pid, 'VmRSS') / 1024);
    // A pass ends when the checkpoint records a sweep finished after it began.
    const pass = async (name: string, reviews: number, start: () => Promise<void>) => {
      const sampler = new ChildSampler(child, port);
      const t0 = Date.now();
      await start();
      for (;;) {
        const c = await store.checkpoint();
        if (c.initialDone && c.sweep === null && (c.lastSweepAt ?? 0) > t0) break;
        if (!child.alive) throw new Error(`bench: the bridge exited (see ${child.logFile})`);
        await sleep(200);
      }
      const seconds = (Date.now() - t0) / 1000;
      passes[name] = {
        reviews,
        seconds: round(seconds),
        reviewsPerSecond: Math.round(reviews / seconds),
        ...sampler.stop(),
      };
      console.log(runtime, name, JSON.stringify(passes[name]));
    };
    await body({ store, bucketPattern: keys.bucketPattern, pass });
    const peakRssMiB = round(statusKiB(child.pid, 'VmHWM') / 1024);
    return { passes, peakRssMiB, startedRssMiB };
  } finally {
    await child.stop(30_000);
    await sim.close();
    await dropAccount(redis, keys);
    await redis.quit();
    await dropTopics(
      kafkaBrokers,
      Object.entries(env)
        .filter(([name]) => name.startsWith('KAFKA_TOPIC_'))
        .map(([, topic]) => topic),
    );
  }
}

/** Snapshot size in Redis: MEMORY USAGE over the account's bucket keys, per review, and the buckets' encodings. */
async function snapshotSize(store: SnapshotStore, pattern: string, redisUrl: string): Promise<Record<string, unknown>> {
  const redis = connectRedis(redisUrl);
  try {
    const size = await store.size();
    let bucketBytes = 0;
    let buckets = 0;
    const encodings: Record<string, number> = {};
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', '0').object('ENCODING', key);
      const results = (await pipeline.exec()) ?? [];
      for (let i = 0; i < results.length; i += 2) {
        const [err, bytes] = results[i]!;
        const [err2, enc] = results[i + 1]!;
        if (err || err2) throw err ?? err2;
        bucketBytes += Number(bytes);
        buckets += 1;
        encodings[String(enc)] = (encodings[String(enc)] ?? 0) + 1;
      }
    } while (cursor !== '0');
    return {
      reviews: size,
      bucketKeys: buckets,
      // Buckets hold 128 entries; Redis keeps a hash as a compact listpack only while every value is <= 64 bytes.
      bucketEncodings: encodings,
      bytesPerReviewMemoryUsage: round(bucketBytes / size, 1),
      totalMiB: round(bucketBytes / 2 ** 20, 1),
    };
  } finally {
    await redis.quit();
  }
}

const redisServer = new PrivateRedis(REDIS_PORT, 'bench-redis', 'none');
redisServer.wipe();
await redisServer.start();
try {
  const flags = imageNodeFlags();
  const runtimes: Record<string, unknown> = {};
  let snapshot: Record<string, unknown> | null = null;
  let overallPeak = 0;
  for (const runtime of RUNTIMES) {
    const million = await bridgeRun(
      runtime,
      flags,
      redisServer.url,
      N,
      'suppress',
      async ({ store, bucketPattern, pass }) => {
        await pass('initialLoadSuppressed', N, async () => {});
        snapshot ??= await snapshotSize(store, bucketPattern, redisServer.url);
        await pass('sweepUnchanged', N, () => store.requestSweep());
      },
    );
    const published = await bridgeRun(runtime, flags, redisServer.url, N_PUBLISH, 'mark', async ({ pass }) => {
      await pass('initialLoadPublished', N_PUBLISH, async () => {});
    });
    const peak = Math.max(million.peakRssMiB, published.peakRssMiB);
    overallPeak = Math.max(overallPeak, peak);
    runtimes[runtime] = {
      command: `node ${command(runtime, flags).join(' ')}`,
      rssAtStartMiB: million.startedRssMiB,
      passes: { ...million.passes, ...published.passes },
      peakRssMiB: {
        [`${N} reviews (load + sweep)`]: million.peakRssMiB,
        [`${N_PUBLISH} published`]: published.peakRssMiB,
      },
      met: peak < TARGET_MIB,
    };
  }
  const result = {
    setup: `the bridge as its own process (${RUNTIMES.join(', ')}), Node flags [${flags.join(' ')}] (plus the caps run adds where none is given); bundled simulator without rate limit (pages of 100 over HTTP); private redis-server ${redisServer.url}; shared Kafka ${kafkaBrokers.join(',')}`,
    runtimes,
    snapshot,
    targets: {
      rssMiB: { target: `peak RSS (VmHWM) < ${TARGET_MIB}`, measuredMax: overallPeak, met: overallPeak < TARGET_MIB },
    },
    met: overallPeak < TARGET_MIB,
  };
  const file = writeResult(process.env.BENCH_RESULT_NAME ?? 'memory', result);
  console.log(JSON.stringify(result.targets, null, 2));
  console.log(`written ${file}`);
} finally {
  await redisServer.stop();
}
