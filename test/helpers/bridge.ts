import { pino } from 'pino';
import { startApp, type App, type AppOptions } from '../../src/app.js';
import { loadConfig, type BridgeConfig } from '../../src/config.js';
import { accountKeys, connectRedis } from '../../src/redis.js';
import { SnapshotStore } from '../../src/snapshot/store.js';
import { kafkaBrokers, redisUrl, uniqueName } from './services.js';

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
    KAFKA_TOPIC_PARTITIONS: '3',
    REDIS_URL: redisUrl(),
    REDIS_KEY_PREFIX: 'rbtest',
    POLL_INTERVAL_MS: '500',
    POLL_OVERLAP_MS: '5000',
    SWEEP_INTERVAL_MS: '0',
    LEASE_TTL_MS: '3000',
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...overrides,
  };
}

/** Starts a bridge in-process; stop it in afterEach/afterAll. */
export async function startTestBridge(env: Record<string, string>, options: AppOptions = {}): Promise<TestBridge> {
  const config = loadConfig(env);
  const logger = pino({ level: config.logLevel });
  const redis = connectRedis(config.redis.url);
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
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
