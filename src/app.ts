import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Bridge } from './bridge.js';
import type { BridgeConfig } from './config.js';
import { Lease } from './lease.js';
import { BridgeMetrics } from './metrics.js';
import { startOpsServer, type OpsServer } from './ops-server.js';
import { Poller, type PollerDeps } from './poller.js';
import { KafkaPublisher } from './publisher.js';
import { accountKeys, connectRedis, type BridgeRedis } from './redis.js';
import { SnapshotStore } from './snapshot/store.js';
import { createUpstreamClient, type UpstreamClient } from './upstream/client.js';
import { fileOrEnvCredentials } from './upstream/credentials.js';

// The composition root: builds every adapter from the configuration and wires them into the loop. The only
// place that knows all modules; each of them knows only the interfaces it is handed.

/** A running bridge process. */
export interface App {
  bridge: Bridge;
  ops: OpsServer;
  metrics: BridgeMetrics;
  /** Graceful stop: abandon the page in flight, flush, release the lease, close connections. */
  stop(): Promise<void>;
}

/** Options for tests and tools; production uses none. */
export interface AppOptions {
  beforeCommit?: PollerDeps['beforeCommit'];
}

/** Builds the upstream client from the configuration. */
export function upstreamFromConfig(config: BridgeConfig, metrics: BridgeMetrics, logger: Logger): UpstreamClient {
  const u = config.upstream;
  return createUpstreamClient(
    {
      baseUrl: u.baseUrl,
      credentials: fileOrEnvCredentials({ clientId: u.clientId, clientSecret: u.clientSecret }),
      rateLimitRps: u.rateLimitRps,
      rateLimitBurst: u.rateLimitBurst,
      pageSize: u.pageSize,
      cursorPath: u.cursorPath ?? null,
      updatedDateUnit: u.updatedDateUnit,
      timeouts: { headersMs: u.timeoutMs, bodyMs: u.timeoutMs, requestMs: 2 * u.timeoutMs },
      maxRetries: u.maxRetries,
      maxBodyBytes: u.maxBodyBytes,
      tokenRefreshMarginSeconds: u.tokenRefreshMarginSeconds,
    },
    metrics.upstreamHooks(),
    logger,
  );
}

/** The Redis client and key layout of the configured account. */
export function redisFromConfig(config: BridgeConfig): {
  redis: BridgeRedis;
  store: SnapshotStore;
  keys: ReturnType<typeof accountKeys>;
} {
  const redis = connectRedis(config.redis.url);
  const keys = accountKeys(config.redis.keyPrefix, config.account);
  return { redis, store: new SnapshotStore(redis, keys), keys };
}

/** The passes of the configured account over the given adapters. */
export function pollerFromConfig(
  config: BridgeConfig,
  adapters: Pick<PollerDeps, 'source' | 'store' | 'sink' | 'metrics' | 'logger'>,
  options: AppOptions = {},
): Poller {
  return new Poller({
    ...adapters,
    eventSource: config.eventSource,
    initialLoadMode: config.initialLoadMode,
    overlapMs: config.poll.overlapMs,
    beforeCommit: options.beforeCommit,
  });
}

/** Starts the ops server, connects Kafka (retrying until it answers) and starts the poll loop. */
export async function startApp(config: BridgeConfig, logger: Logger, options: AppOptions = {}): Promise<App> {
  const metrics = new BridgeMetrics({ account: config.account });
  const { redis, store, keys } = redisFromConfig(config);
  const lease = new Lease(redis, keys, config.lease.ttlMs);
  const publisher = new KafkaPublisher(config.kafka, config.account, logger);
  const source = upstreamFromConfig(config, metrics, logger);
  const poller = pollerFromConfig(config, { source, store, sink: publisher, metrics, logger }, options);
  const bridge = new Bridge({
    poller,
    store,
    lease,
    metrics,
    logger,
    timing: {
      pollIntervalMs: config.poll.intervalMs,
      sweepIntervalMs: config.sweep.intervalMs,
      leaseTtlMs: config.lease.ttlMs,
    },
  });

  let kafkaReady = false;
  const cached = cache(5_000);
  const ops = await startOpsServer({
    host: config.http.host,
    port: config.http.port,
    registry: metrics.registry,
    logger,
    liveness: () => {
      const h = bridge.health();
      return { ok: h.ok, detail: { ...h } };
    },
    readiness: async () => {
      const [redisOk, kafkaOk, upstreamOk] = await Promise.all([
        redis.ping().then(
          () => true,
          () => false,
        ),
        cached('kafka', () => (kafkaReady ? publisher.ping() : Promise.reject(new Error('connecting')))),
        cached('upstream', () => source.checkCredentials(), 60_000),
      ]);
      const role = bridge.health().role;
      return {
        ok: redisOk && kafkaOk && upstreamOk && role !== 'starting',
        checks: { redis: redisOk, kafka: kafkaOk, upstream_credentials: upstreamOk, role },
      };
    },
  });

  const stopping = new AbortController();
  // Kafka may come up after the bridge: keep trying instead of crash-looping; readiness says why we wait.
  const connected = (async () => {
    for (let attempt = 0; !stopping.signal.aborted; attempt++) {
      try {
        await publisher.connect();
        kafkaReady = true;
        bridge.start();
        return;
      } catch (err) {
        logger.error({ err, attempt }, 'cannot connect to Kafka yet; retrying');
        await sleep(Math.min(30_000, 1_000 * 2 ** attempt), undefined, { signal: stopping.signal }).catch(
          () => undefined,
        );
      }
    }
  })();

  const stop = async () => {
    stopping.abort();
    await connected;
    await bridge.stop();
    await Promise.allSettled([publisher.disconnect(), source.close()]);
    await ops.close();
    await redis.quit().catch(() => redis.disconnect());
  };
  return { bridge, ops, metrics, stop };
}

/** Caches a boolean health check for `ttlMs` so probes stay cheap. */
function cache(defaultTtlMs: number) {
  const entries = new Map<string, { at: number; ok: boolean; ttl: number }>();
  return async (name: string, check: () => Promise<unknown>, ttlMs = defaultTtlMs): Promise<boolean> => {
    const hit = entries.get(name);
    if (hit && Date.now() - hit.at < hit.ttl) return hit.ok;
    const ok = await check().then(
      () => true,
      () => false,
    );
    // A failure is re-checked sooner than a success so that readiness recovers quickly.
    entries.set(name, { at: Date.now(), ok, ttl: ok ? ttlMs : Math.min(ttlMs, 2_000) });
    return ok;
  };
}
