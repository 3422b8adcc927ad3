import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import { Lease } from '../redis/lease.js';
import type { LeasePort } from '../bridge/lease-keeper.js';
import { BridgeLoop, type LoopHealth } from '../bridge/loop.js';
import { BridgeMetrics } from '../ops/metrics.js';
import { Passes, type PassesOptions, type PassesSink } from '../bridge/passes/index.js';
import type { PipelineDeps } from '../bridge/pipeline.js';
import { KafkaPublisher } from '../kafka/publisher.js';
import type { RecordContracts } from '../core/wire-format.js';
import type { ChangelogIndex } from '../kafka/changelog-index.js';
import { accountKeys, type BridgeRedis } from '../redis/connection.js';
import { readSecretSync, readTlsFiles } from '../config/secrets.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { fingerprintKeySource } from '../redis/fingerprint-key.js';
import { changelogKeyCopies } from '../kafka/fingerprint-key-copy.js';
import { KeyEncryptionKey } from '../core/fingerprint-key-wrap.js';
import type { FingerprintKeySource } from '../core/fingerprint-key.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import { LazyPasses, type StartSlots } from './leadership.js';
import { fileOrEnvCredentials } from '../upstream/credentials.js';
import type { ReviewSource } from '../upstream/types.js';
import type { Tracer } from '@opentelemetry/api';
import type { ISocketFactory } from 'kafkajs';
import { PassTracer } from '../ops/tracing.js';
import { kindOf } from '../core/errors.js';
import { KnownRedisInstances } from '../redis/instance.js';
import { recordRefusal } from '../redis/refusal.js';
import { SnapshotHold } from '../core/snapshot-hold.js';
import { memoryStats, snapshotBytesPerEntry } from '../redis/eviction.js';
import type { FreshnessReport } from '../core/freshness-report.js';

// One account of a process: its own upstream client (token, rate limiter: its own requests/s), snapshot
// namespace, checkpoint, lease, Kafka producer, metrics and loop (the producer and the upstream client only while
// this replica leads the account). Nothing is shared with another account but the Redis connection, the process
// and what it learnt of shared changelogs (src/kafka/changelog-index.ts), so one account's failure (bad
// credentials, upstream down, a record Kafka refuses) never slows another: each loop backs off on its own.

/** Options for tests and tools; production uses none. */
export interface AccountOptions {
  beforeCommit?: PipelineDeps['beforeCommit'];
  /** The sockets of the leader's Kafka client (a test that loses a broker's answer); absent: kafkajs' own. */
  kafkaSocketFactory?: ISocketFactory;
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
    /** The Redis instances the process kept its state in (src/core/claims.ts); absent: no claim is checked. */
    redisInstances?: { redis: BridgeRedis; known: KnownRedisInstances };
    /** Whether Redis holds the snapshot, and how its memory is read (absent: restores are not checked). */
    eviction?: PassesOptions['eviction'];
  },
  options: AccountOptions = {},
): Passes {
  const { source, store, sink, metrics, logger, keySource, tracer, redisInstances, eviction } = adapters;
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
      polls: config.poll,
      metrics,
      deleteMaxFraction: config.deletion.enabled ? config.deletion.maxFraction : null,
      account: config.account,
      keySource,
      changelog: {
        identity: config.kafka.identity,
        topic: config.kafka.topics.changelog,
        adoptLegacy: config.kafka.adoptLegacyChangelog,
      },
      ...(redisInstances
        ? {
            claims: {
              instance: () => redisInstances.known.learn(redisInstances.redis, config.redis.keyPrefix),
              known: (id: string) => redisInstances.known.has(id),
              // Three heartbeats: a live installation has written one at least, whatever its phase.
              windowMs: 3 * config.heartbeat.intervalMs,
            },
          }
        : {}),
      ...(eviction ? { eviction } : {}),
    },
  );
}

/**
 * The fingerprint key source of an account: FINGERPRINT_KEY_FILE, or the deployment's generated key (Redis, with
 * its copy wrapped by FINGERPRINT_KEK_FILE in the account's changelog topic, or Redis alone).
 */
export function fingerprintKeySourceFromConfig(
  config: BridgeConfig,
  redis: BridgeRedis,
  logger: Logger,
): FingerprintKeySource {
  const file = config.fingerprintKeyFile;
  const prefix = config.redis.keyPrefix;
  const kekFile = file ? null : (config.fingerprintKekFile ?? null);
  const kek = kekFile
    ? new KeyEncryptionKey(Buffer.from(readSecretSync({ file: kekFile }, 'FINGERPRINT_KEK_FILE'), 'utf8'))
    : null;
  const { copy, legacy } = changelogKeyCopies(config.kafka, prefix, kek, logger);
  return fingerprintKeySource(redis, prefix, file, copy, legacy);
}

/** What an account needs from its process. */
export interface AccountContext {
  redis: BridgeRedis;
  logger: Logger;
  /** Whether the account's metrics also collect the process's (tools running one account without startApp). */
  processMetrics: boolean;
  /** This replica's id: the holder of every lease it takes. */
  replica: string;
  /** Wraps the account's lease (balanced leadership across replicas); absent: the plain lease. */
  gate?: (lease: LeasePort, account: string) => LeasePort;
  /** The process's tracer when tracing is on (src/app/tracing.ts). */
  tracer?: Tracer | null;
  /** Runs a publisher's first connection (see connectGate); absent: at once. */
  connectGate?: ConnectGate;
  /** Bounds how many of the process's leaderships start at once (LEADERSHIP_START_CONCURRENCY); absent: no bound. */
  startSlots?: StartSlots;
  /** What the process learnt of shared changelogs, so new accounts' full restores skip what it read; absent: none. */
  changelogIndex?: ChangelogIndex;
  /**
   * Whether a failure is a dependency's that the process has already logged (src/app/dependencies.ts): the
   * account then logs it at debug only. Absent: every failure is logged as it comes.
   */
  explainFailure?: (err: unknown) => Promise<boolean>;
  /** The schemas registered for the account's topics (read when it leads); absent: no schema registry. */
  contracts?: () => RecordContracts | null;
}

/**
 * Runs `connect` for publishers whose topics are named by `key`: the first one alone (it may create the topics),
 * the others once it succeeded, so that accounts sharing topics do not race to create them.
 */
export type ConnectGate = (key: string, connect: () => Promise<void>) => Promise<void>;

/** A ConnectGate for one process. */
export function connectGate(): ConnectGate {
  const first = new Map<string, Promise<void>>();
  return async (key, connect) => {
    const creator = first.get(key);
    if (creator) {
      const created = await creator.then(
        () => true,
        () => false,
      );
      if (created) return connect();
    }
    const attempt = connect();
    first.set(key, attempt);
    // A failed first connection leaves the creation to the next one.
    attempt.catch(() => (first.get(key) === attempt ? first.delete(key) : undefined));
    return attempt;
  };
}

/**
 * One account's bridge: its loop, lease, snapshot namespace and metrics, always; its Kafka producer, upstream
 * client and passes only while this replica leads it (src/app/leadership.ts).
 */
export class AccountBridge {
  readonly account: string;
  readonly metrics: BridgeMetrics;
  readonly store: SnapshotStore;
  readonly lease: Lease;
  readonly loop: BridgeLoop;
  /** Whether Redis holds the account's snapshot (a Redis that keeps evicting it stops publishing). */
  readonly hold = new SnapshotHold();
  private readonly leadership: LazyPasses<Passes>;
  private leader: { publisher: KafkaPublisher; source: UpstreamClient } | null = null;
  /** Whether the upstream refused this account's credentials at the last check. */
  private refused = false;
  /** The upstream client a replica that does not lead checks the credentials with (made at the first check). */
  private checker: UpstreamClient | null = null;
  /** The Redis instances this account kept its state in (a Redis that lost its keys is a new one). */
  private readonly redisInstances = new KnownRedisInstances();

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
    const keySource = fingerprintKeySourceFromConfig(config, redis, logger);
    const topicsKey = Object.values(config.kafka.topics).sort().join(',');
    this.leadership = new LazyPasses(
      () => {
        const publisher = new KafkaPublisher(
          config.kafka,
          config.account,
          logger,
          config.privacy,
          context.changelogIndex,
          options.kafkaSocketFactory,
          context.contracts?.(),
        );
        const source = upstreamFromConfig(config, this.metrics, logger);
        const adapters = {
          store: this.store,
          source,
          sink: publisher,
          metrics: this.metrics,
          logger,
          keySource,
          tracer: context.tracer,
          redisInstances: { redis, known: this.redisInstances },
          eviction: {
            hold: this.hold,
            memory: { stats: () => memoryStats(redis), bytesPerEntry: () => snapshotBytesPerEntry(redis, keys) },
            setEvicting: (on: boolean) => this.metrics.setSnapshotEvicting(on),
          },
        };
        return {
          passes: passesFromConfig(config, adapters, options),
          connect: async () => {
            const gate = this.context.connectGate ?? ((_key: string, connect: () => Promise<void>) => connect());
            await gate(topicsKey, () => publisher.connect()).catch(async (err: unknown) => {
              // Said apart from the pass failure that follows: Kafka (address, TLS, SASL) is what to look at; once,
              // by the process's dependency monitor, when it can tell (a library's retries are not news). A refusal
              // (kind setting) names its setting itself, in the pass failure's line.
              const known = await (context.explainFailure?.(err) ?? Promise.resolve(false)).catch(() => false);
              const line = 'cannot connect to Kafka yet; the leadership retries with backoff';
              if (known || kindOf(err) === 'setting') logger.debug({ err }, line);
              else logger.error({ err }, line);
              throw err;
            });
            this.metrics.topicDurability(Object.values(config.kafka.topics), publisher.durabilityShortfalls());
            // The process's readiness probe has its own admin connection (src/kafka/probe.ts).
            await publisher.closeProbe();
            this.leader = { publisher, source };
          },
          close: async () => {
            if (this.leader?.publisher === publisher) this.leader = null;
            await Promise.allSettled([publisher.disconnect(), source.close()]);
          },
        };
      },
      logger,
      context.startSlots,
    );
    this.loop = new BridgeLoop({
      passes: this.leadership,
      lease: context.gate ? context.gate(this.lease, config.account) : this.lease,
      metrics: this.metrics,
      logger,
      timing: {
        pollIntervalMs: config.poll.intervalMs,
        heartbeatIntervalMs: config.heartbeat.intervalMs,
        sweepIntervalMs: config.sweep.intervalMs,
        leaseTtlMs: config.lease.ttlMs,
      },
      onStandby: () => this.leadership.release(),
      explainFailure: context.explainFailure,
      onRefusal: async (refusal) => {
        // A refused leadership keeps no Kafka connection while it waits to check again.
        if (refusal) await this.leadership.release();
        await recordRefusal(redis, keys.refused, refusal && { ...refusal, replica: context.replica });
      },
    });
  }

  /** The Kafka publisher of the leadership this replica holds, or null (not leading, or not connected yet). */
  get publisher(): KafkaPublisher | null {
    return this.leader?.publisher ?? null;
  }

  /** The upstream client of the leadership this replica holds, or null. */
  get source(): UpstreamClient | null {
    return this.leader?.source ?? null;
  }

  /**
   * Checks the upstream's reachability and this account's credentials (a token, fetched or cached), leading or not:
   * a bad secret is named at start by every replica, not once the other dependencies let one lead. The leader uses
   * its own client (one token, one pace of refused requests with its passes); a standby a client of its own.
   */
  async checkCredentials(): Promise<void> {
    const source = this.source ?? (this.checker ??= this.checkerClient());
    try {
      await source.checkCredentials();
      this.refused = false;
    } catch (err) {
      this.refused = true;
      throw err;
    }
  }

  /** A client for the checks only: no retries (the monitor checks again), so an unreachable upstream is one line. */
  private checkerClient(): UpstreamClient {
    const config = { ...this.config, upstream: { ...this.config.upstream, maxRetries: 0 } };
    return upstreamFromConfig(config, this.metrics, this.context.logger);
  }

  /** Whether the upstream refused this account's credentials at the last check. */
  credentialsRefused(): boolean {
    return this.refused;
  }

  /** Starts the loop: it takes the lease when it can and connects Kafka then (retrying with backoff). */
  start(): void {
    // The Redis this process starts with is its own, whoever leads: a replica that takes the account over after
    // Redis lost its keys knows the heartbeats the former leader wrote with it.
    void this.redisInstances
      .learn(this.context.redis, this.config.redis.keyPrefix)
      .catch((err: unknown) => this.context.logger.debug({ err }, 'the Redis instance id was not read yet'));
    this.loop.start();
  }

  /** The bound that holds for late changes, while this replica leads the account (else null). */
  freshness(): FreshnessReport | null {
    return this.leadership.current()?.freshness() ?? null;
  }

  /** The loop's liveness and role. */
  health(): LoopHealth {
    return this.loop.health();
  }

  /** Graceful stop: abandon the page in flight, flush, release the lease, close the account's connections. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await this.leadership.release();
    await this.checker?.close();
  }
}
