import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { BridgeConfig } from './config.js';
import { backoffDelay } from './backoff.js';
import { Lease } from './lease.js';
import { BridgeLoop } from './loop.js';
import { BridgeMetrics } from './metrics.js';
import { startOpsServer, type OpsServer } from './ops-server.js';
import { Passes, type PassesSink } from './passes/index.js';
import type { PipelineDeps } from './pipeline.js';
import { KafkaPublisher } from './publisher.js';
import { accountKeys, connectRedis, redisOptions, type BridgeRedis } from './redis.js';
import { readTlsFiles } from './secrets.js';
import { SnapshotStore } from './snapshot/store.js';
import { createUpstreamClient, type UpstreamClient } from './upstream/client.js';
import type { ReviewSource } from './upstream/types.js';
import { fileOrEnvCredentials } from './upstream/credentials.js';

// The composition root: builds every adapter from the configuration and wires them into the loop. The only
// place that knows all modules; each of them knows only the interfaces it is handed.

/** A running bridge process. */
export interface App {
  loop: BridgeLoop;
  ops: OpsServer;
  metrics: BridgeMetrics;
  /** Graceful stop: abandon the page in flight, flush, release the lease, close connections. */
  stop(): Promise<void>;
}

/** Options for tests and tools; production uses none. */
export interface AppOptions {
  beforeCommit?: PipelineDeps['beforeCommit'];
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
      recordLimits: {
        maxFutureSkewMs: u.maxFutureSkewMs,
        maxRecordBytes: u.maxRecordBytes,
        maxStringLength: u.maxStringLength,
      },
      ca: readTlsFiles({ caFile: u.caFile }).ca,
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
  const redis = connectRedis(config.redis, redisOptions(config.redis), config.redis.password);
  const keys = accountKeys(config.redis.keyPrefix, config.account);
  return { redis, store: new SnapshotStore(redis, keys), keys };
}

/** The passes of the configured account over the given adapters. */
export function passesFromConfig(
  config: BridgeConfig,
  adapters: { source: ReviewSource; store: SnapshotStore; sink: PassesSink; metrics: BridgeMetrics; logger: Logger },
  options: AppOptions = {},
): Passes {
  const { source, store, sink, metrics, logger } = adapters;
  return new Passes(
    {
      snapshot: store,
      sink,
      metrics,
      logger,
      eventSource: config.eventSource,
      initialLoadMode: config.initialLoadMode,
      beforeCommit: options.beforeCommit,
    },
    source,
    {
      overlapMs: config.poll.overlapMs,
      metrics,
      deleteMaxFraction: config.deletion.enabled ? config.deletion.maxFraction : null,
      account: config.account,
    },
  );
}

/** Starts the ops server, connects Kafka (retrying until it answers) and starts the poll loop. */
export async function startApp(config: BridgeConfig, logger: Logger, options: AppOptions = {}): Promise<App> {
  const metrics = new BridgeMetrics({ account: config.account, upstreamRateLimitRps: config.upstream.rateLimitRps });
  const { redis, store, keys } = redisFromConfig(config);
  const lease = new Lease(redis, keys, config.lease.ttlMs);
  const publisher = new KafkaPublisher(config.kafka, config.account, logger, config.privacy);
  const source = upstreamFromConfig(config, metrics, logger);
  const passes = passesFromConfig(config, { source, store, sink: publisher, metrics, logger }, options);
  const loop = new BridgeLoop({
    passes,
    lease,
    metrics,
    logger,
    timing: {
      pollIntervalMs: config.poll.intervalMs,
      pollMinIntervalMs: config.poll.minIntervalMs,
      heartbeatIntervalMs: config.heartbeat.intervalMs,
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
      const h = loop.health();
      return { ok: h.ok, detail: { ...h } };
    },
    readiness: async () => {
      const [redisOk, kafkaOk, upstreamOk, pausedSince] = await Promise.all([
        redis.ping().then(
          () => true,
          () => false,
        ),
        cached('kafka', () => (kafkaReady ? publisher.ping() : Promise.reject(new Error('connecting')))),
        cached('upstream', () => source.checkCredentials(), 60_000),
        // Informational: a paused bridge is ready (it serves probes and metrics), it just makes no requests.
        store.pausedSince().catch(() => null),
      ]);
      const role = loop.health().role;
      return {
        ok: redisOk && kafkaOk && upstreamOk && role !== 'starting',
        checks: {
          redis: redisOk,
          kafka: kafkaOk,
          upstream_credentials: upstreamOk,
          role,
          paused: pausedSince !== null,
        },
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
        loop.start();
        return;
      } catch (err) {
        logger.error({ err, attempt }, 'cannot connect to Kafka yet; retrying');
        const delay = backoffDelay(attempt, { baseMs: 1_000, capMs: 30_000, jitter: 'equal' });
        await sleep(delay, undefined, { signal: stopping.signal }).catch(() => undefined);
      }
    }
  })();

  const stop = async () => {
    stopping.abort();
    await connected;
    await loop.stop();
    await Promise.allSettled([publisher.disconnect(), source.close()]);
    await ops.close();
    await redis.quit().catch(() => redis.disconnect());
  };
  return { loop, ops, metrics, stop };
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
