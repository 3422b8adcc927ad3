import { pino, type Logger } from 'pino';
import { loadConfig, type BridgeConfig } from '../../src/config/config.js';
import { BridgeLoop } from '../../src/bridge/loop.js';
import { Passes, type PassesSink, type PassesSnapshot } from '../../src/bridge/passes/index.js';
import { LazyPasses } from '../../src/app/leadership.js';
import { BridgeMetrics } from '../../src/ops/metrics.js';
import { RecordEncoder } from '../../src/kafka/encoding.js';
import { accountKeys } from '../../src/redis/connection.js';
import { Lease } from '../../src/redis/lease.js';
import { SnapshotStore } from '../../src/redis/snapshot-store.js';
import { fingerprintKeySource } from '../../src/redis/fingerprint-key.js';
import { fingerprintKeyRecord } from '../../src/kafka/fingerprint-key-copy.js';
import { changelogName } from '../../src/kafka/changelog-index.js';
import type { Identity } from '../../src/core/identity.js';
import { randomFrom, type RandomSource } from '../../src/core/random.js';
import { SimKeyCopy, SimSink, type SimKafka } from './kafka.js';
import { SimRedisClient, type SimRedisServer } from './redis.js';
import { SimSource, type SimUpstream } from './upstream.js';
import { Actor, type World } from './world.js';

// One deployment of the bridge in the simulated world: its configuration and its replicas, each wired as
// src/app/account.ts wires an account (the real SnapshotStore and Lease over the simulated Redis, the real Passes
// and LazyPasses, the real BridgeLoop), with the simulated Kafka and upstream behind the ports and the world's
// clock for every timer. A deployment's replicas share one Redis, one Kafka and one upstream.

/** Timing of the simulated deployments (short, so that a schedule sees many polls, sweeps and takeovers). */
export const SIM_ENV = {
  POLL_INTERVAL_MS: '2000',
  POLL_OVERLAP_MS: '30000',
  SWEEP_INTERVAL_MS: '60000',
  LEASE_TTL_MS: '10000',
  KAFKA_TRANSACTION_TIMEOUT_MS: '60000',
  DELETE_DETECTION: 'on',
  DELETE_MAX_FRACTION: '0.5',
  INITIAL_LOAD_MODE: 'mark',
} as const;

/** Where a replica's sink is: the cluster, its changelog topic and key prefix, and the deployment's identity. */
export interface SinkContext {
  kafka: SimKafka;
  changelogTopic: string;
  keyPrefix: string;
  identity: Identity;
}

/** Ways to break the bridge through its ports (mutants.ts): what a replica's adapters are wrapped in. */
export interface PortWrappers {
  snapshot?: (store: PassesSnapshot, world: World) => PassesSnapshot;
  sink?: (sink: PassesSink, world: World, where: SinkContext) => PassesSink;
}

const SILENT = pino({ level: 'silent' });

// SIM_LOG=info (or debug, warn) prints the bridge's logs of a schedule to stderr with the virtual time: for replaying
// one seed, not for runs of many.
function simLogger(world: World): Logger {
  const level = process.env.SIM_LOG;
  if (!level) return SILENT;
  return pino({ level, timestamp: () => `,"vt":${world.clock.now() - world.start}` }, pino.destination(2));
}
// One metrics object for every simulated replica: the simulation reads no metric, and each registry costs time.
let sharedMetrics: BridgeMetrics | null = null;

/** A running replica of a deployment. */
export interface Replica {
  actor: Actor;
  loop: BridgeLoop;
}

/** A deployment: its configuration, upstream and replicas. */
export class Deployment {
  readonly config: BridgeConfig;
  readonly replicas: Replica[] = [];
  private restarts = 0;
  /** The product's random values (generated fingerprint key, restore tokens), from the schedule's seed. */
  private readonly productRandom: RandomSource;

  constructor(
    readonly name: string,
    private readonly world: World,
    private readonly redis: SimRedisServer,
    private readonly kafka: SimKafka,
    readonly upstream: SimUpstream,
    env: Record<string, string>,
    private readonly wrappers: PortWrappers,
    private readonly random: () => number,
    private readonly logger: Logger = simLogger(world),
  ) {
    this.config = loadConfig({
      UPSTREAM_BASE_URL: 'https://upstream.invalid',
      UPSTREAM_CLIENT_ID: 'sim',
      UPSTREAM_CLIENT_SECRET: 'simulated-secret',
      KAFKA_BROKERS: 'kafka.invalid:9092',
      REDIS_URL: 'redis://redis.invalid:6379',
      // The simulation builds its generated-key source itself (below); this only satisfies the settings check.
      FINGERPRINT_KEY_GENERATE: 'true',
      ...SIM_ENV,
      ...env,
    });
    this.productRandom = randomFrom(random);
  }

  /** Starts a replica (a new process: a new id, nothing in memory). */
  start(slot: number): Replica {
    const { config, world } = this;
    const actor = new Actor(`${this.name}/r${slot}#${++this.restarts}`);
    const logger = this.logger.child({ replica: actor.name });
    const client = new SimRedisClient(world, actor, this.redis).asBridgeRedis();
    const keys = accountKeys(config.redis.keyPrefix, config.account);
    const store = new SnapshotStore(client, keys, this.productRandom);
    const snapshot = this.wrappers.snapshot ? this.wrappers.snapshot(store, world) : store;
    const clock = (): number => world.clock.now();
    const sleep = world.sleeper(actor);
    const lease = new Lease(client, keys, config.lease.ttlMs, clock, actor.name);
    const metrics = (sharedMetrics ??= new BridgeMetrics({ account: 'sim', processMetrics: false }));
    // The generated key of the default settings (no FINGERPRINT_KEY_FILE): in Redis, copied to the changelog topic.
    const keySource = fingerprintKeySource(
      client,
      config.redis.keyPrefix,
      null,
      new SimKeyCopy(
        world,
        actor,
        this.kafka,
        config.kafka.topics.changelog,
        fingerprintKeyRecord(config.redis.keyPrefix),
        changelogName(config.kafka.brokers, config.kafka.topics.changelog),
      ),
      null,
      this.productRandom,
    );
    const encoder = new RecordEncoder(config.kafka, config.account, config.privacy, logger);
    const leadership = new LazyPasses(() => {
      const simSink = new SimSink(world, actor, this.kafka, encoder, {
        transactionalId: config.kafka.transactionalId,
        changelogTopic: config.kafka.topics.changelog,
        keyPrefix: config.kafka.changelogKeyPrefix ?? config.kafka.keyPrefix ?? '',
        mayInit: () => world.freezeHoldsInit || this.redis.leaseHolder(keys.lease) === actor.name,
      });
      const where: SinkContext = {
        kafka: this.kafka,
        changelogTopic: config.kafka.topics.changelog,
        keyPrefix: config.kafka.changelogKeyPrefix ?? config.kafka.keyPrefix ?? '',
        identity: config.kafka.identity!,
      };
      const sink = this.wrappers.sink ? this.wrappers.sink(simSink, world, where) : simSink;
      const source = new SimSource(world, actor, this.upstream);
      // As passesFromConfig (src/app/account.ts) builds them, with the world's clock.
      const passes = new Passes(
        {
          snapshot,
          sink,
          metrics,
          logger: logger,
          eventSource: config.eventSource,
          initialLoadMode: config.initialLoadMode,
          fingerprintKey: () => keySource.get(),
          clock,
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
        },
      );
      return { passes, connect: async () => undefined, close: async () => undefined };
    }, logger);
    const loop = new BridgeLoop({
      passes: leadership,
      lease,
      metrics,
      logger: logger,
      timing: {
        pollIntervalMs: config.poll.intervalMs,
        heartbeatIntervalMs: 0,
        sweepIntervalMs: config.sweep.intervalMs,
        leaseTtlMs: config.lease.ttlMs,
      },
      clock,
      sleep,
      leaseSleep: sleep,
      random: this.random,
      onStandby: () => leadership.release(),
    });
    const replica = { actor, loop };
    this.replicas[slot] = replica;
    loop.start();
    world.note(`${actor.name} started`);
    return replica;
  }
}
