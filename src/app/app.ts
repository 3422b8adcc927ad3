import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics, Gauge } from 'prom-client';
import { AccountBridge, connectGate, type AccountOptions } from './account.js';
import { StartSlots } from './leadership.js';
import { KafkaProbe } from '../kafka/probe.js';
import { ChangelogIndex } from '../kafka/changelog-index.js';
import { Allotment } from '../bridge/allotment.js';
import { ConfigError, type BridgeConfig } from '../config/config.js';
import { replicaId } from '../redis/lease.js';
import { systemClock, type Clock } from '../core/clock.js';
import { mergedMetrics, type BridgeMetrics } from '../ops/metrics.js';
import { startOpsServer, type OpsServer } from '../ops/http-server.js';
import { accountKeys, connectRedisFromConfig, replicaRegistry, type BridgeRedis } from '../redis/connection.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { DurabilityWatch, durabilityMessage } from '../redis/durability.js';
import { startAdminServer, type AdminServer } from '../admin/server.js';
import { startTracing } from './tracing.js';
import { processLiveness, processReadiness } from './health.js';

// The composition root: builds every adapter from the configuration and wires them into the loops, one per
// account (src/app/account.ts), over one Redis connection and one ops server. The only place that knows all
// modules; each of them knows only the interfaces it is handed.

export { passesFromConfig, upstreamFromConfig } from './account.js';

/** A running bridge process. */
export interface App {
  /** The accounts of the process, by id (one without an accounts file). */
  accounts: ReadonlyMap<string, AccountBridge>;
  /** The first (or only) account's loop and metrics: what single-account tools and tests look at. */
  loop: AccountBridge['loop'];
  metrics: BridgeMetrics;
  ops: OpsServer;
  /** The admin HTTP API (ADMIN_PORT), else null. */
  admin: AdminServer | null;
  /** The balance of leadership across replicas. */
  allotment: Allotment;
  /** This replica's id in the replica registry and in lease values. */
  replica: string;
  /** Graceful stop: abandon the pages in flight, flush, release the leases, close connections. */
  stop(): Promise<void>;
}

/** Options for tests and tools; production uses none. */
export interface AppOptions extends AccountOptions {
  /** Times the start-up checks, the probes' caches and the replica registry's beats (default: the system clock). */
  clock?: Clock;
}

/** The Redis client and key layout of the configured account (commands that act on one account). */
export function redisFromConfig(config: BridgeConfig): {
  redis: BridgeRedis;
  store: SnapshotStore;
  keys: ReturnType<typeof accountKeys>;
} {
  const redis = connectRedisFromConfig(config.redis);
  const keys = accountKeys(config.redis.keyPrefix, config.account);
  return { redis, store: new SnapshotStore(redis, keys), keys };
}

/**
 * Starts the ops server and every account (each takes its lease when it can and connects Kafka then, retrying
 * until it answers). One account is a list of one. Process-wide settings (Redis, Kafka, HTTP) are the first
 * account's: loadAccounts makes them the same for all.
 */
export async function startApp(
  configs: BridgeConfig | readonly BridgeConfig[],
  logger: Logger,
  options: AppOptions = {},
): Promise<App> {
  const list = Array.isArray(configs) ? (configs as readonly BridgeConfig[]) : [configs as BridgeConfig];
  const first = list[0];
  if (!first) throw new Error('startApp: no account to run');
  const clock = options.clock ?? systemClock;
  // Said once at start: the id to pin in BRIDGE_DEPLOYMENT_ID before changing a setting it is derived from.
  logger.info(
    { deployment: first.kafka.identity?.deployment, changelog: first.kafka.topics.changelog },
    'deployment identity',
  );
  const redis = connectRedisFromConfig(first.redis);
  const durability = await watchDurability(redis, first.redis, logger, clock);
  const parts = buildParts(list, redis, logger, options);
  const { accounts, allotment, kafka, tracing } = parts;

  let admin: AdminServer | null = null;
  const health = { accounts, only: parts.only, redis, kafka, durability, clock };
  const ops = await startOpsServer({
    host: first.http.host,
    port: first.http.port,
    metrics: mergedMetrics(() => [
      parts.processRegistry,
      durability.registry,
      ...(admin ? [admin.metrics.registry] : []),
      ...[...accounts.values()].map((a) => a.metrics.registry),
    ]),
    logger,
    liveness: processLiveness(health),
    readiness: processReadiness(health),
  });

  if (first.admin) {
    try {
      admin = await startAdminServer({
        admin: first.admin,
        accounts: list,
        durability: () => durabilityMessage(durability.state()),
        logger,
        clock: () => clock.now(),
      });
    } catch (err) {
      durability.stop();
      await allotment.stop();
      await kafka.close();
      await tracing.shutdown();
      await ops.close();
      redis.disconnect();
      throw err;
    }
  }

  // After the ops server: the first beat waits for Redis, and /healthz and /readyz must answer meanwhile (a wrong
  // Redis password is reported there, not by a port that refuses connections).
  await allotment.start();
  for (const bridge of accounts.values()) bridge.start();

  const stop = async () => {
    // No operator action is taken while the accounts stop.
    await admin?.close();
    // Out of the registry first: the other replicas raise their share while this one still finishes its pages,
    // and take each lease the moment it is released.
    durability.stop();
    await allotment.stop();
    await Promise.allSettled([...accounts.values()].map((a) => a.stop()));
    await kafka.close();
    // The spans of the last pages go out before the process ends.
    await tracing.shutdown();
    await ops.close();
    await redis.quit().catch(() => redis.disconnect());
  };
  const firstBridge = accounts.get(first.account)!;
  return {
    accounts,
    loop: firstBridge.loop,
    metrics: firstBridge.metrics,
    ops,
    admin,
    allotment,
    replica: parts.replica,
    stop,
  };
}

/**
 * Refuses a REDIS_WAIT_REPLICAS no primary can meet (every write would wait for ever), by name, unless the
 * operator chose to wait; else starts watching it.
 */
async function watchDurability(
  redis: BridgeRedis,
  connection: BridgeConfig['redis'],
  logger: Logger,
  clock: Clock,
): Promise<DurabilityWatch> {
  const durability = new DurabilityWatch(redis, connection, { logger, now: () => clock.now() });
  if (connection.waitReplicas === 0) return durability;
  let state = await durability.check();
  // A topology started together with the bridge may still be attaching its replicas (Cluster gossip takes a
  // moment): look again for a few seconds before refusing.
  for (let attempt = 0; attempt < 5 && state.kind === 'missing' && !connection.waitForReplicas; attempt++) {
    await clock.sleep(1_000);
    state = await durability.check();
  }
  if (state.kind === 'missing' && !connection.waitForReplicas) {
    redis.disconnect();
    throw new ConfigError('REDIS_WAIT_REPLICAS', durabilityMessage(state)!);
  }
  durability.start();
  return durability;
}

/** What a process is made of before anything starts: its accounts, the allotment, the Kafka probe, tracing. */
interface AppParts {
  /** Whether the process runs one account, which keeps the process metrics and readiness under its own name. */
  only: boolean;
  processRegistry: Registry;
  replica: string;
  tracing: ReturnType<typeof startTracing>;
  allotment: Allotment;
  accounts: Map<string, AccountBridge>;
  kafka: KafkaProbe;
}

/** Builds the parts of a process over its one Redis connection; nothing connects or starts yet but tracing. */
function buildParts(list: readonly BridgeConfig[], redis: BridgeRedis, logger: Logger, options: AppOptions): AppParts {
  const first = list[0]!;
  // The only account of a process keeps its process metrics and readiness under its own name (dashboards and
  // probes of one-account deployments read them so); several accounts share the process's.
  const only = list.length === 1;
  const processRegistry = new Registry();
  const replica = replicaId();
  const tracing = startTracing(first.tracing, logger);
  // The registry and the leases carry one replica id, so `status` can tell which replica leads which account.
  const allotment = new Allotment(replicaRegistry(redis, first.redis.keyPrefix), {
    replica,
    accounts: list.length,
    ttlMs: Math.max(...list.map((c) => c.lease.ttlMs)),
    logger,
    ...(options.clock ? { sleep: options.clock.sleep } : {}),
  });
  const gate = connectGate();
  const startSlots = new StartSlots(first.leadership.startConcurrency);
  // One for all accounts: a new account's full restore of a shared changelog starts past what another one read.
  const changelogIndex = new ChangelogIndex();
  const accounts = new Map<string, AccountBridge>();
  for (const config of list) {
    const bridge = new AccountBridge(
      config,
      {
        redis,
        replica,
        logger: only ? logger : logger.child({ account: config.account }),
        processMetrics: only,
        gate: (lease, account) => allotment.gate(lease, account),
        connectGate: gate,
        startSlots,
        changelogIndex,
        tracer: tracing.tracer,
      },
      options,
    );
    accounts.set(config.account, bridge);
  }
  if (!only) collectDefaultMetrics({ register: processRegistry });
  fleetGauges(processRegistry, allotment);
  return { only, processRegistry, replica, tracing, allotment, accounts, kafka: new KafkaProbe(first.kafka, logger) };
}

/** The fleet's own gauges, read at scrape time. */
function fleetGauges(registry: Registry, allotment: Allotment): void {
  new Gauge({
    name: 'reviews_bridge_replicas_live',
    help: 'Replicas of this deployment seen live in the Redis registry (this one included).',
    registers: [registry],
    collect() {
      this.set(allotment.replicas().length);
    },
  });
  new Gauge({
    name: 'reviews_bridge_accounts_share',
    help: 'The most accounts this replica leads: ceil(accounts / live replicas).',
    registers: [registry],
    collect() {
      this.set(allotment.share());
    },
  });
  new Gauge({
    name: 'reviews_bridge_accounts_led',
    help: 'Accounts whose lease this replica holds now.',
    registers: [registry],
    collect() {
      this.set(allotment.held());
    },
  });
}
