import { pino, type Logger } from 'pino';
import { onTestFinished } from 'vitest';
import { createLogger } from '../../src/ops/logger.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { startApp, type App, type AppOptions } from '../../src/app/app.js';
import { loadConfig, type BridgeConfig } from '../../src/config/config.js';
import { accountKeys, connectRedisFromConfig } from '../../src/redis/connection.js';
import { SnapshotStore } from '../../src/redis/snapshot-store.js';
import type { ReviewHeartbeatEvent } from '../../src/core/events.js';
import { readAll } from './kafka.js';
import { bridgeRedisEnv, kafkaBrokers, uniqueName } from './services.js';
import { pollUntil } from './wait.js';
import { testFingerprintKeyEnv } from './keys.js';

/** A bridge running in the test process against the shared Kafka and Redis, with its own account and topics. */
export interface TestBridge {
  app: App;
  config: BridgeConfig;
  topics: BridgeConfig['kafka']['topics'];
  /** Snapshot store of the bridge's account (its own Redis connection). */
  store: SnapshotStore;
  stop(): Promise<void>;
  /** Starts a fresh process-equivalent of the same bridge (same account, topics and Redis keys). */
  restart(options?: AppOptions): Promise<void>;
}

/** The environment of a test bridge; overrides win. */
export function testEnv(upstreamUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  const id = uniqueName('e2e');
  return {
    BRIDGE_ACCOUNT: id,
    UPSTREAM_BASE_URL: upstreamUrl,
    UPSTREAM_CLIENT_ID: 'demo-client',
    UPSTREAM_CLIENT_SECRET: 'demo-secret',
    UPSTREAM_RATE_LIMIT_RPS: '50',
    KAFKA_BROKERS: kafkaBrokers().join(','),
    KAFKA_TOPIC_CREATED: `${id}.created`,
    KAFKA_TOPIC_STATUS_CHANGED: `${id}.status_changed`,
    KAFKA_TOPIC_UPDATED: `${id}.updated`,
    KAFKA_TOPIC_DEAD_LETTER: `${id}.dead_letter`,
    KAFKA_TOPIC_STATE: `${id}.state`,
    KAFKA_TOPIC_DELETED: `${id}.deleted`,
    KAFKA_TOPIC_HEARTBEAT: `${id}.heartbeat`,
    KAFKA_TOPIC_CHANGELOG: `${id}.changelog`,
    KAFKA_TOPIC_PARTITIONS: '3',
    ...redisSettings(overrides),
    REDIS_KEY_PREFIX: 'rbtest',
    POLL_INTERVAL_MS: '500',
    POLL_OVERLAP_MS: '5000',
    SWEEP_INTERVAL_MS: '0',
    LEASE_TTL_MS: '3000',
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...testFingerprintKeyEnv(),
    ...overrides,
  };
}

// A test that names its own Redis (any of the address settings) gets only that one: the three exclude each other.
function redisSettings(overrides: Record<string, string>): Record<string, string> {
  const all = bridgeRedisEnv();
  if (!Object.keys(all).some((name) => name in overrides)) return all;
  return Object.fromEntries(Object.keys(all).map((name) => [name, '']));
}

/** The topic names of a bridge environment (what the oracle reads back). */
export function topicsOf(env: Record<string, string>): BridgeConfig['kafka']['topics'] {
  return {
    created: env.KAFKA_TOPIC_CREATED!,
    statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
    updated: env.KAFKA_TOPIC_UPDATED!,
    deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
    state: env.KAFKA_TOPIC_STATE!,
    deleted: env.KAFKA_TOPIC_DELETED!,
    heartbeat: env.KAFKA_TOPIC_HEARTBEAT!,
    changelog: env.KAFKA_TOPIC_CHANGELOG!,
  };
}

/** Starts a bridge in-process; stop it in afterEach/afterAll. */
export async function startTestBridge(
  env: Record<string, string>,
  options: AppOptions = {},
  log?: Logger,
): Promise<TestBridge> {
  const config = loadConfig(env);
  const logger = log ?? createLogger(config.logLevel);
  const redis = connectRedisFromConfig(config.redis);
  const store = new SnapshotStore(redis, accountKeys(config.redis.keyPrefix, config.account));
  let app = await startApp(config, logger, options);
  let stopped = false;
  return {
    get app() {
      return app;
    },
    config,
    topics: config.kafka.topics,
    store,
    async stop() {
      if (stopped) return;
      stopped = true;
      await app.stop();
      await redis.quit();
    },
    async restart(next: AppOptions = {}) {
      await app.stop();
      app = await startApp(config, logger, next);
    },
  };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export function eventually<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  return pollUntil(check, { timeoutMs, what });
}

/** A simulator without rate limit for the current test, closed when the test finishes. */
export async function simulatorForTest(options: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> {
  const sim = await startSimulator({ rateLimit: null, ...options });
  onTestFinished(() => sim.close());
  return sim;
}

/** A test bridge for the current test, stopped when the test finishes. */
export async function bridgeForTest(env: Record<string, string>, options: AppOptions = {}): Promise<TestBridge> {
  const b = await startTestBridge(env, options);
  onTestFinished(() => b.stop());
  return b;
}

/** Waits until the bridge's initial load has completed. */
export async function initialLoadDone(b: TestBridge, timeoutMs = 60_000): Promise<void> {
  await eventually(
    async () => ((await b.store.checkpoint()).initialDone ? true : undefined),
    timeoutMs,
    'initial load',
  );
}

/**
 * Waits until `count` incremental polls have committed after time `after` (ms): what a test that must let polls
 * run (to show they do, or do not, see something) waits for, instead of a fixed time.
 */
export async function pollsCommitted(
  b: TestBridge,
  count: number,
  after = Date.now(),
  timeoutMs = 20_000,
): Promise<void> {
  let since = after;
  for (let i = 0; i < count; i++) {
    since = await eventually(
      async () => {
        const at = (await b.store.checkpoint()).lastIncrementalAt ?? 0;
        return at > since ? at : undefined;
      },
      timeoutMs,
      `poll ${i + 1} of ${count} committed after ${new Date(after).toISOString()}`,
    );
  }
}

/**
 * Waits until the bridge has published `count` heartbeats saying it is paused, sent after `after` (ms; set
 * HEARTBEAT_INTERVAL_MS to the poll interval or shorter): each is a turn of the paused leader's loop, which looked
 * at the pause flag and sent no upstream request. What a test that shows "no request while paused" watches for,
 * instead of a time.
 */
export async function pausedHeartbeats(
  b: TestBridge,
  count: number,
  after = Date.now(),
  timeoutMs = 20_000,
): Promise<void> {
  await eventually(
    async () => {
      const beats = await readAll([b.topics.heartbeat], { timeoutMs: 10_000 });
      const paused = beats
        .map((m) => JSON.parse(m.value) as ReviewHeartbeatEvent)
        .filter((e) => e.data.paused && Date.parse(e.time) > after);
      return paused.length >= count ? true : undefined;
    },
    timeoutMs,
    `${count} heartbeats of the paused leader after ${new Date(after).toISOString()}`,
  );
}

/**
 * Waits until the simulator has answered `count` more requests than `from` (default: now): for a test that must
 * let the bridge work a while (polls, pages), a number of its upstream requests instead of a time.
 */
export async function upstreamRequests(
  sim: Pick<Simulator, 'control'>,
  count: number,
  from = sim.control.stats().requests,
  timeoutMs = 30_000,
): Promise<number> {
  return pollUntil(
    () => {
      const now = sim.control.stats().requests;
      return now >= from + count ? now : undefined;
    },
    { timeoutMs, what: `${count} upstream requests after the first ${from}`, intervalMs: 20 },
  );
}

/** A logger that keeps the bridge's log lines (parsed) in memory: for a test that waits for what the bridge says. */
export function capturedLogger(level = 'info'): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** Asks for a sweep and waits until one has completed after the request, with none in progress. */
export async function sweepNow(b: TestBridge, timeoutMs = 30_000): Promise<void> {
  const requestedAt = Date.now();
  await b.store.requestSweep(requestedAt);
  await eventually(
    async () => {
      const ckpt = await b.store.checkpoint();
      return ckpt.sweep === null && (ckpt.lastSweepAt ?? 0) >= requestedAt ? true : undefined;
    },
    timeoutMs,
    'a sweep after the request',
  );
}
