import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import { backoffDelay } from '../core/backoff.js';
import { sleep } from '../core/clock.js';
import { Lease } from '../redis/lease.js';
import type { LeasePort } from '../bridge/lease-keeper.js';
import { BridgeLoop, type LoopHealth } from '../bridge/loop.js';
import { BridgeMetrics } from '../ops/metrics.js';
import { Passes, type PassesSink } from '../bridge/passes/index.js';
import type { PipelineDeps } from '../bridge/pipeline.js';
import { KafkaPublisher } from '../kafka/publisher.js';
import { accountKeys, type BridgeRedis } from '../redis/connection.js';
import { readTlsFiles } from '../config/secrets.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { fingerprintKeySource } from '../redis/fingerprint-key.js';
import type { FingerprintKeySource } from '../core/fingerprint-key.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import { fileOrEnvCredentials } from '../upstream/credentials.js';
import type { ReviewSource } from '../upstream/types.js';
import type { Tracer } from '@opentelemetry/api';
import { PassTracer } from '../ops/tracing.js';

// One account of a process: its own upstream client (token, rate limiter: its own requests/s), snapshot
// namespace, checkpoint, lease, Kafka producer, metrics and loop. Nothing is shared with another account but the
// Redis connection and the process, so one account's failure (bad credentials, upstream down, a record Kafka
// refuses) never slows another: each loop backs off on its own.

/** The longest an account waits for the one it starts after (see AccountBridge.start). */
const AFTER_WAIT_MS = 15_000;

/** Options for tests and tools; production uses none. */
export interface AccountOptions {
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

/** The passes of the configured account over the given adapters. */
export function passesFromConfig(
  config: BridgeConfig,
  adapters: {
    source: ReviewSource;
    store: SnapshotStore;
    sink: PassesSink;
    metrics: BridgeMetrics;
    logger: Logger;
    keySource?: FingerprintKeySource;
    /** The process's tracer when tracing is on. */
    tracer?: Tracer | null;
  },
  options: AccountOptions = {},
): Passes {
  const { source, store, sink, metrics, logger, keySource, tracer } = adapters;
  return new Passes(
    {
      snapshot: store,
      sink,
      metrics,
      logger,
      eventSource: config.eventSource,
      initialLoadMode: config.initialLoadMode,
      beforeCommit: options.beforeCommit,
      fingerprintKey: keySource ? () => keySource.get() : undefined,
      tracer: tracer ? new PassTracer(tracer, config.account) : undefined,
    },
    source,
    {
      overlapMs: config.poll.overlapMs,
      metrics,
      deleteMaxFraction: config.deletion.enabled ? config.deletion.maxFraction : null,
      account: config.account,
      keySource,
    },
  );
}

/** What an account needs from its process. */
export interface AccountContext {
  redis: BridgeRedis;
  logger: Logger;
  /** Whether the account's metrics also collect the process's (the only account of the process does). */
  processMetrics: boolean;
  /** Whether this account's publisher answers the process's Kafka readiness probe (keeps its admin connection). */
  probesKafka: boolean;
  /** This replica's id: the holder of every lease it takes. */
  replica: string;
  /** Wraps the account's lease (balanced leadership across replicas); absent: the plain lease. */
  gate?: (lease: LeasePort, account: string) => LeasePort;
  /** The process's tracer when tracing is on (src/app/tracing.ts). */
  tracer?: Tracer | null;
}

/** One account's bridge: its adapters and its loop. */
export class AccountBridge {
  readonly account: string;
  readonly metrics: BridgeMetrics;
  readonly store: SnapshotStore;
  readonly publisher: KafkaPublisher;
  readonly source: UpstreamClient;
  readonly lease: Lease;
  readonly loop: BridgeLoop;
  private kafkaReady = false;
  private readonly stopping = new AbortController();
  private connected: Promise<void> | null = null;

  constructor(
    readonly config: BridgeConfig,
    private readonly context: AccountContext,
    options: AccountOptions = {},
  ) {
    const { redis, logger } = context;
    this.account = config.account;
    this.metrics = new BridgeMetrics({
      account: config.account,
      upstreamRateLimitRps: config.upstream.rateLimitRps,
      processMetrics: context.processMetrics,
    });
    const keys = accountKeys(config.redis.keyPrefix, config.account);
    this.store = new SnapshotStore(redis, keys);
    this.lease = new Lease(redis, keys, config.lease.ttlMs, Date.now, context.replica);
    this.publisher = new KafkaPublisher(config.kafka, config.account, logger, config.privacy);
    this.source = upstreamFromConfig(config, this.metrics, logger);
    const passes = passesFromConfig(
      config,
      {
        source: this.source,
        store: this.store,
        sink: this.publisher,
        metrics: this.metrics,
        logger,
        keySource: fingerprintKeySource(redis, config.redis.keyPrefix, config.fingerprintKeyFile),
        tracer: context.tracer,
      },
      options,
    );
    this.loop = new BridgeLoop({
      passes,
      lease: context.gate ? context.gate(this.lease, config.account) : this.lease,
      metrics: this.metrics,
      logger,
      timing: {
        pollIntervalMs: config.poll.intervalMs,
        heartbeatIntervalMs: config.heartbeat.intervalMs,
        sweepIntervalMs: config.sweep.intervalMs,
        leaseTtlMs: config.lease.ttlMs,
      },
    });
  }

  /**
   * Connects Kafka in the background (retrying until it answers: Kafka may come up later) and then starts the
   * loop; `after` first (another account creating the topics they share, so that they do not race to create
   * them), but no longer than AFTER_WAIT_MS: an account whose own connection fails must not hold the others.
   */
  start(after: Promise<unknown> = Promise.resolve()): void {
    this.connected ??= (async () => {
      await Promise.race([after, sleep(AFTER_WAIT_MS, this.stopping.signal).catch(() => undefined)]);
      const { logger } = this.context;
      for (let attempt = 0; !this.stopping.signal.aborted; attempt++) {
        try {
          await this.publisher.connect();
          if (!this.context.probesKafka) await this.publisher.closeProbe();
          this.kafkaReady = true;
          this.loop.start();
          return;
        } catch (err) {
          logger.error({ err, attempt }, 'cannot connect to Kafka yet; retrying');
          const delay = backoffDelay(attempt, { baseMs: 1_000, capMs: 30_000, jitter: 'equal' });
          await sleep(delay, this.stopping.signal).catch(() => undefined);
        }
      }
    })();
  }

  /** Settles once the account is connected and its loop started (or it was stopped first). */
  running(): Promise<void> {
    return this.connected ?? Promise.resolve();
  }

  /** Whether the Kafka producer has connected (readiness). */
  get kafkaConnected(): boolean {
    return this.kafkaReady;
  }

  /** The loop's liveness and role. */
  health(): LoopHealth {
    return this.loop.health();
  }

  /** Graceful stop: abandon the page in flight, flush, release the lease, close the account's connections. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.connected;
    await this.loop.stop();
    await Promise.allSettled([this.publisher.disconnect(), this.source.close()]);
  }
}
