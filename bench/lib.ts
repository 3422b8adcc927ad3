import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import v8 from 'node:v8';
import { pino } from 'pino';
import type { BridgeConfig } from '../src/config/config.js';
import { Lease } from '../src/redis/lease.js';
import { BridgeMetrics } from '../src/ops/metrics.js';
import { Passes } from '../src/bridge/passes/index.js';
import { LeaseKeeper } from '../src/bridge/lease-keeper.js';
import { KafkaPublisher } from '../src/kafka/publisher.js';
import { accountKeys, connectRedis, type BridgeRedis } from '../src/redis/connection.js';
import { generateBaseReview } from '../src/simulator/data.js';
import { fingerprintKeySource } from '../src/redis/fingerprint-key.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import type { ListOptions, Page, ReviewSource } from '../src/upstream/types.js';
import { listingRecords, validateRecords } from '../src/upstream/validate.js';

// Shared pieces of the benchmarks: where the services are, the machine, result files, samplers, an in-memory
// review source and the passes wired to real Redis and Kafka without the HTTP upstream.

/** Kafka and Redis of the run: the environment (source .run/services.env) or the project's default ports. */
export function services(): { kafkaBrokers: string[]; redisUrl: string } {
  return {
    kafkaBrokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:39092').split(',').map((b) => b.trim()),
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:36379',
  };
}

/** Key prefix of every benchmark account in Redis. */
export const BENCH_KEY_PREFIX = 'rbbench';

/**
 * The environment of a whole-bridge benchmark run (startApp against an upstream URL): its own account and topics
 * on the shared services, the demo credentials, no scheduled sweeps, quiet logs; overrides win.
 */
export function benchEnv(
  account: string,
  upstreamUrl: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  const { kafkaBrokers, redisUrl } = services();
  return {
    BRIDGE_ACCOUNT: account,
    UPSTREAM_BASE_URL: upstreamUrl,
    UPSTREAM_CLIENT_ID: 'demo-client',
    UPSTREAM_CLIENT_SECRET: 'demo-secret',
    KAFKA_BROKERS: kafkaBrokers.join(','),
    KAFKA_TOPIC_CREATED: `${account}.created`,
    KAFKA_TOPIC_STATUS_CHANGED: `${account}.status_changed`,
    KAFKA_TOPIC_UPDATED: `${account}.updated`,
    KAFKA_TOPIC_DEAD_LETTER: `${account}.dead_letter`,
    KAFKA_TOPIC_STATE: `${account}.state`,
    KAFKA_TOPIC_DELETED: `${account}.deleted`,
    KAFKA_TOPIC_HEARTBEAT: `${account}.heartbeat`,
    KAFKA_TOPIC_CHANGELOG: `${account}.changelog`,
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: BENCH_KEY_PREFIX,
    SWEEP_INTERVAL_MS: '0',
    HTTP_HOST: '127.0.0.1',
    FINGERPRINT_KEY_GENERATE: 'true',
    HTTP_PORT: '0',
    LOG_LEVEL: 'warn',
    ...overrides,
  };
}

const loadNow = () => loadavg().map((l) => Math.round(l * 100) / 100);
/** The machine's load when the benchmark started (this module is loaded first thing). */
const loadAtStart = loadNow();

/** What the figures were measured on: the runtime, the machine and its load at the start and at the end. */
export function machine(): Record<string, unknown> {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    v8: process.versions.v8,
    execArgv: process.execArgv,
    nodeOptions: process.env.NODE_OPTIONS ?? '',
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: loadNow(),
  };
}

/** A name no other run uses (account, topics). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/**
 * The project's root: this file is bench/lib.ts under tsx, or .run/bench-dist/bench/lib.js when
 * scripts/bench-compiled.sh runs a benchmark on the compiled build.
 */
export const PROJECT_ROOT = new URL(
  import.meta.url.includes('/.run/bench-dist/') ? '../../../' : '../',
  import.meta.url,
);

/** Writes bench/results/<name>.json and returns its path. */
export function writeResult(name: string, data: Record<string, unknown>): string {
  const dir = new URL('bench/results/', PROJECT_ROOT);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`${name}.json`, dir);
  writeFileSync(
    file,
    `${JSON.stringify({ benchmark: name, at: new Date().toISOString(), machine: machine(), ...data }, null, 2)}\n`,
  );
  return file.pathname;
}

/** The p-th percentile (0..100) of numbers, nearest-rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/** Rounds for printing and JSON. */
export const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** Samples process.memoryUsage() every intervalMs. */
export class RssSampler {
  private readonly rss: number[] = [];
  private readonly heap: number[] = [];
  private readonly timer: NodeJS.Timeout;
  /** The breakdown at the sample of the largest RSS: where the memory was when it peaked. */
  private atPeak: Record<string, number> = {};
  private peak = 0;

  constructor(intervalMs = 100) {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.sample();
  }

  private sample(): void {
    const m = process.memoryUsage();
    this.rss.push(m.rss);
    this.heap.push(m.heapUsed);
    if (m.rss > this.peak) {
      this.peak = m.rss;
      this.atPeak = memoryBreakdown(m);
    }
  }

  /** Stops and summarises (MiB). */
  stop(): {
    samples: number;
    rssMiB: Record<string, number>;
    heapUsedMiB: Record<string, number>;
    atPeakMiB: Record<string, number>;
  } {
    clearInterval(this.timer);
    this.sample();
    const mib = (v: number) => round(v / 2 ** 20);
    const stats = (list: number[]) => ({
      first: mib(list[0]!),
      p50: mib(percentile(list, 50)),
      max: mib(Math.max(...list)),
      last: mib(list[list.length - 1]!),
    });
    return { samples: this.rss.length, rssMiB: stats(this.rss), heapUsedMiB: stats(this.heap), atPeakMiB: this.atPeak };
  }
}

/**
 * Where a process's memory is (MiB): RSS, the V8 heap (committed and used, and the committed size of its young
 * generation, `new_space`, and of its code space), memory outside the heap (external, of which array buffers).
 */
export function memoryBreakdown(m: NodeJS.MemoryUsage = process.memoryUsage()): Record<string, number> {
  const mib = (v: number) => round(v / 2 ** 20);
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size]));
  return {
    rss: mib(m.rss),
    heapTotal: mib(m.heapTotal),
    heapUsed: mib(m.heapUsed),
    newSpace: mib(spaces.new_space ?? 0),
    oldSpace: mib(spaces.old_space ?? 0),
    codeSpace: mib((spaces.code_space ?? 0) + (spaces.code_large_object_space ?? 0)),
    largeObjectSpace: mib(spaces.large_object_space ?? 0),
    external: mib(m.external),
    arrayBuffers: mib(m.arrayBuffers),
  };
}

/** CPU time of this process between start and stop. */
export function cpuMeter(): () => { userMs: number; systemMs: number; totalMs: number } {
  const start = process.cpuUsage();
  return () => {
    const d = process.cpuUsage(start);
    return {
      userMs: round(d.user / 1000),
      systemMs: round(d.system / 1000),
      totalMs: round((d.user + d.system) / 1000),
    };
  };
}

/** The machine's busy and total CPU jiffies so far (all cores), from /proc/stat. */
function cpuJiffies(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  const total = fields.reduce((sum, v) => sum + v, 0);
  return { busy: total - idle, total };
}

/**
 * Waits until the whole machine has been mostly idle (busy below `busyShare` of all cores) for one second, or
 * `maxMs` passed; returns the wait. Between measured runs: the broker's work of the previous run (deleting its
 * topics, cleaning logs) otherwise lands on the same two cores as the next run, and its CPU time grows with that.
 */
export async function settle(busyShare = 0.15, maxMs = 30_000): Promise<number> {
  const t0 = performance.now();
  let last = cpuJiffies();
  while (performance.now() - t0 < maxMs) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const now = cpuJiffies();
    const share = (now.busy - last.busy) / Math.max(1, now.total - last.total);
    last = now;
    if (share < busyShare) break;
  }
  return Math.round(performance.now() - t0);
}

// The probe's JSON: a review as the simulator makes it.
const PROBE_REVIEW = JSON.stringify(generateBaseReview(1, 1));

/**
 * This thread's speed now: milliseconds of a fixed piece of work (JSON parse and serialise of a review, integer
 * arithmetic), the least of `tries`. On a shared virtual machine the same work can take twice as long from one
 * minute to the next (seen here with nothing else running in the guest) and the guest counts that as CPU time, so
 * a CPU figure means little without the speed it was measured at.
 */
export function speedProbe(tries = 3): number {
  let best = Infinity;
  for (let t = 0; t < tries; t++) {
    const t0 = performance.now();
    // No string builtins in the arithmetic: their speed depends on V8's protectors, which the code under test
    // may change (a String subclass anywhere slows charCodeAt several times), and the probe must not follow them.
    let h = 0;
    for (let i = 0; i < 400; i++) {
      h ^= JSON.stringify(JSON.parse(PROBE_REVIEW)).length;
      for (let c = 0; c < 400; c++) h = Math.imul(h ^ c, 0x01000193);
    }
    best = Math.min(best, performance.now() - t0);
    if (h === 0.5) console.log(h); // keeps the loop's result alive
  }
  return best;
}

/** Options of the in-memory source. */
export interface InMemorySourceOptions {
  /** Reviews 1..count. */
  count: number;
  pageSize?: number;
  /** The record of a review; default: the simulator's generated review of seed 1. */
  record?: (id: number) => Record<string, unknown>;
  /**
   * Serialise every page once up front, so that a pass costs JSON.parse + validation (what the upstream client
   * does with a body) but not the generation. Otherwise pages are generated lazily (flat memory for millions).
   */
  precompute?: boolean;
}

/**
 * A ReviewSource without HTTP: pages of a listing held in memory (or generated on demand), parsed from JSON and
 * validated per record exactly as the upstream client does with a response body. Cursors are the next id.
 */
export class InMemorySource implements ReviewSource {
  private readonly pageSize: number;
  private readonly record: (id: number) => Record<string, unknown>;
  private readonly bodies: string[] | null;

  constructor(private readonly options: InMemorySourceOptions) {
    this.pageSize = options.pageSize ?? 100;
    this.record = options.record ?? ((id) => generateBaseReview(1, id));
    this.bodies = options.precompute ? this.precomputed() : null;
  }

  private body(first: number): string {
    const last = Math.min(this.options.count, first + this.pageSize - 1);
    const reviews: Record<string, unknown>[] = [];
    for (let id = first; id <= last; id++) reviews.push(this.record(id));
    return JSON.stringify({
      count: reviews.length,
      reviews,
      ...(last < this.options.count ? { next_page: String(last + 1) } : {}),
    });
  }

  private precomputed(): string[] {
    const bodies: string[] = [];
    for (let first = 1; first <= this.options.count; first += this.pageSize) bodies.push(this.body(first));
    return bodies;
  }

  async *pages(options: ListOptions): AsyncGenerator<Page> {
    let first = options.cursor ? Number(options.cursor) : 1;
    while (first <= this.options.count) {
      if (options.signal?.aborted) throw new Error('aborted');
      const fetchedAt = Date.now();
      const body = this.bodies ? this.bodies[Math.floor((first - 1) / this.pageSize)]! : this.body(first);
      const { reviews, rejects } = validateRecords(listingRecords(JSON.parse(body)));
      const next = first + this.pageSize;
      yield {
        cursor: first === 1 ? null : String(first),
        nextCursor: next <= this.options.count ? String(next) : null,
        reviews,
        rejects,
        fetchedAt,
      };
      first = next;
    }
  }

  async checkCredentials(): Promise<void> {}

  async close(): Promise<void> {}
}

/** The passes on real Redis and Kafka for one fresh account, holding the lease. */
export interface BenchPasses {
  passes: Passes;
  epoch: number;
  account: string;
  redis: BridgeRedis;
  store: SnapshotStore;
  topics: BridgeConfig['kafka']['topics'];
  keys: ReturnType<typeof accountKeys>;
  /** Runs a whole sweep (the initial load on an empty snapshot); resolves its summary. */
  sweep(): Promise<{ pages: number; reviews: number; events: number }>;
  close(): Promise<void>;
}

/** Builds the passes for `source` with the bridge's real SnapshotStore, KafkaPublisher, BridgeMetrics and Lease. */
export async function benchPasses(
  source: ReviewSource,
  options: {
    redisUrl: string;
    kafkaBrokers: string[];
    initialLoadMode?: 'mark' | 'suppress';
    prefix?: string;
    /** Kafka transactions (default on, as the service). */
    exactlyOnce?: boolean;
  },
): Promise<BenchPasses> {
  const account = uniqueName(options.prefix ?? 'bench');
  const logger = pino({ level: 'silent' });
  const redis = connectRedis(options.redisUrl);
  const keys = accountKeys(BENCH_KEY_PREFIX, account);
  const store = new SnapshotStore(redis, keys);
  const topics = {
    created: `${account}.created`,
    statusChanged: `${account}.status_changed`,
    updated: `${account}.updated`,
    deadLetter: `${account}.dead_letter`,
    state: `${account}.state`,
    deleted: `${account}.deleted`,
    heartbeat: `${account}.heartbeat`,
    changelog: `${account}.changelog`,
  };
  const publisher = new KafkaPublisher(
    {
      brokers: options.kafkaBrokers,
      clientId: 'reviews-bridge-bench',
      ssl: false,
      sasl: null,
      topics,
      createTopics: true,
      partitions: 6,
      replicationFactor: 1,
      exactlyOnce: options.exactlyOnce ?? true,
      transactionalId: `reviews-bridge-bench.${account}`,
      transactionTimeoutMs: 60_000,
    },
    account,
    logger,
  );
  await publisher.connect();
  const metrics = new BridgeMetrics({ account });
  const keeper = new LeaseKeeper(new Lease(redis, keys, 60_000), { periodMs: 10_000, logger });
  const epoch = await keeper.renewNow();
  keeper.start();
  const keySource = fingerprintKeySource(redis, BENCH_KEY_PREFIX, null);
  const passes = new Passes(
    {
      snapshot: store,
      sink: publisher,
      metrics,
      logger,
      eventSource: `urn:reviews-bridge:${account}`,
      initialLoadMode: options.initialLoadMode ?? 'mark',
      fingerprintKey: () => keySource.get(),
    },
    source,
    { overlapMs: 300_000, metrics, deleteMaxFraction: null, account, keySource },
  );
  if (!(await passes.prepare(epoch, new AbortController().signal)))
    throw new Error('bench: lease epoch below the changelog');
  return {
    passes,
    epoch,
    account,
    redis,
    store,
    topics,
    keys,
    async sweep() {
      const run = await passes.fullScan(epoch, new AbortController().signal);
      return { ...run.summary };
    },
    async close() {
      await keeper.release().catch(() => undefined);
      await publisher.disconnect();
      await redis.quit();
    },
  };
}

/** Deletes an account's keys (snapshot buckets and checkpoint) from Redis. */
export async function dropAccount(redis: BridgeRedis, keys: ReturnType<typeof accountKeys>): Promise<void> {
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', keys.bucketPattern, 'COUNT', 1000);
    cursor = next;
    if (found.length > 0) await redis.unlink(...found);
  } while (cursor !== '0');
  await redis.unlink(keys.checkpoint, keys.count, keys.epoch, keys.lease, keys.sweepRequest);
}

/** Deletes Kafka topics (best effort). */
export async function dropTopics(brokers: string[], topics: string[]): Promise<void> {
  const { Kafka, logLevel } = await import('kafkajs');
  const admin = new Kafka({ clientId: 'bench-cleanup', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics, timeout: 10_000 });
  } catch {
    /* best effort */
  } finally {
    await admin.disconnect();
  }
}

/**
 * The Node flags the bridge's process is started with: none, as the image and the launcher start it (`run` then
 * caps its heap itself); BENCH_NODE_FLAGS overrides them, e.g. to measure other caps.
 */
export function imageNodeFlags(): string[] {
  return (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
}

/** Where a process's memory is, MiB. */
export interface MemoryFigures {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  newSpace: number;
  oldSpace: number;
  /** In use in the old space (oldSpace is what is committed to it). */
  oldSpaceUsed: number;
  codeSpace: number;
  external: number;
}

/**
 * Where a bridge's memory sits, from its /metrics (prom-client's process metrics), MiB: RSS alone cannot tell
 * garbage V8 has not collected yet from state held. null while it does not answer.
 */
export async function memoryFigures(port: number): Promise<MemoryFigures | null> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const value = (name: string, labels = '') =>
      Number(new RegExp(`^${name}(?:\\{${labels}[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
    return {
      rss: round(value('process_resident_memory_bytes')),
      heapTotal: round(value('nodejs_heap_size_total_bytes')),
      heapUsed: round(value('nodejs_heap_size_used_bytes')),
      newSpace: round(value('nodejs_heap_space_size_total_bytes', 'space="new"')),
      oldSpace: round(value('nodejs_heap_space_size_total_bytes', 'space="old"')),
      oldSpaceUsed: round(value('nodejs_heap_space_size_used_bytes', 'space="old"')),
      codeSpace: round(value('nodejs_heap_space_size_total_bytes', 'space="code"')),
      external: round(value('nodejs_external_memory_bytes')),
    };
  } catch {
    return null;
  }
}
