import type { Logger } from 'pino';
import { warnGeneratedFingerprintKey } from '../config/privacy.js';
import { Registry, collectDefaultMetrics, Gauge } from 'prom-client';
import { AccountBridge, connectGate, type AccountOptions } from './account.js';
import { evictionMessage } from '../core/snapshot-hold.js';
import { StartSlots } from './leadership.js';
import { KafkaProbe } from '../kafka/probe.js';
import { ChangelogIndex } from '../kafka/changelog-index.js';
import { Allotment } from '../bridge/allotment.js';
import { ConfigError, type BridgeConfig } from '../config/config.js';
import { redisAddressSettings } from '../core/dependency-health.js';
import { replicaId } from '../redis/lease.js';
import { systemClock, type Clock } from '../core/clock.js';
import { mergedMetrics, type BridgeMetrics } from '../ops/metrics.js';
import { startOpsServer, type OpsServer } from '../ops/http-server.js';
import {
  accountKeys,
  closeRedisNow,
  connectRedisFromConfig,
  replicaRegistry,
  type BridgeRedis,
} from '../redis/connection.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { DurabilityWatch, durabilityMessage } from '../redis/durability.js';
import { warnAboutEviction } from '../redis/eviction.js';
import { startAdminServer, type AdminServer } from '../admin/server.js';
import { startTracing } from './tracing.js';
import { ledFreshness, processLiveness, processReadiness, upstreamCheck } from './health.js';
import { DependencyMonitor } from './dependencies.js';
import { publishReplicaHealth } from '../redis/replica-health.js';
import { SchemaContracts } from '../kafka/schema-registry.js';

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
  /**
   * Resolves true once the accounts have started (at once without a schema registry, else after their contracts
   * are registered), false when they never will (a schema the registry refused, or stopped first).
   */
  started: Promise<boolean>;
  /** Graceful stop: abandon the pages in flight, flush, release the leases, close connections. */
  stop(): Promise<void>;
}

/** Options for tests and tools; production uses none. */
export interface AppOptions extends AccountOptions {
  /** The process's schema registry contracts (set by startApp from the configuration). */
  contracts?: SchemaContracts;
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
  warnGeneratedFingerprintKey(first, logger);
  const redis = connectRedisFromConfig(first.redis);
  const durability = await watchDurability(redis, first.redis, logger, clock);
  // In the background: a Redis that refuses the login (or is away) must not hold up /healthz and /readyz.
  void warnAboutEviction(redis, logger);
  const dependencies = new DependencyMonitor({ logger, now: () => clock.now() });
  // The event contracts (SCHEMA_REGISTRY_URL): registered before any account starts, so that every event names
  // its registered schema; the accounts' publishers take them from here.
  const registry = first.schemaRegistry ? new SchemaContracts(list, first.schemaRegistry, logger) : null;
  const parts = buildParts(list, redis, logger, { ...options, contracts: registry ?? undefined }, dependencies);
  const { accounts, allotment, kafka, tracing } = parts;
  watchDependencies(dependencies, parts, redis, first.redis, clock);

  let admin: AdminServer | null = null;
  const health = { accounts, only: parts.only, redis, kafka, durability, dependencies, clock, contracts: registry };
  const ops = await portSetting('HTTP_PORT', first.http, startOpsServer, {
    host: first.http.host,
    port: first.http.port,
    metrics: mergedMetrics(() => [
      parts.processRegistry,
      durability.registry,
      dependencies.registry,
      ...(registry ? [registry.registry] : []),
      ...(admin ? [admin.metrics.registry] : []),
      ...[...accounts.values()].map((a) => a.metrics.registry),
    ]),
    logger,
    liveness: processLiveness(health),
    readiness: processReadiness(health),
  });

  if (first.admin) {
    try {
      admin = await portSetting('ADMIN_PORT', first.admin, startAdminServer, {
        admin: first.admin,
        accounts: list,
        durability: () => durabilityMessage(durability.state()),
        logger,
        clock: () => clock.now(),
      });
    } catch (err) {
      dependencies.stop();
      durability.stop();
      await registry?.stop();
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
  dependencies.start();
  // With a registry, the accounts start once their contracts are registered (in the background: /readyz says
  // why the process is not ready meanwhile); an incompatible schema keeps them from starting at all.
  const starting = (async () => {
    if (registry && !(await registry.register())) return false;
    await allotment.start();
    for (const bridge of accounts.values()) bridge.start();
    return true;
  })();
  if (!registry) await starting;

  const stop = async () => {
    // A Redis that does not answer now would hold every step below for its retries (the lease's release, the
    // registry's, the loop's own command): closed at once, they fail fast. Nothing can commit without it meanwhile
    // (a commit ends with its Redis write), so nothing is left half-done by closing it.
    if (redis.status !== 'ready') closeRedisNow(redis);
    // No operator action is taken while the accounts stop.
    await admin?.close();
    await registry?.stop();
    await starting;
    // Out of the registry first: the other replicas raise their share while this one still finishes its pages,
    // and take each lease the moment it is released.
    durability.stop();
    dependencies.stop();
    await allotment.stop();
    await Promise.allSettled([...accounts.values()].map((a) => a.stop()));
    await kafka.close();
    // The spans of the last pages go out before the process ends.
    await tracing.shutdown();
    await ops.close();
    if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
    else closeRedisNow(redis);
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
    started: starting,
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

/**
 * Registers the process's own dependencies: Kafka (a metadata request over the probe's connection), Redis (the
 * replica's health report written for `status`: a write, so a Redis refusing writes is seen) and the upstream
 * credentials of the accounts this replica leads (gating readiness only for a one-account process).
 */
function watchDependencies(
  dependencies: DependencyMonitor,
  parts: AppParts,
  redis: BridgeRedis,
  redisConfig: Pick<BridgeConfig['redis'], 'keyPrefix' | 'target'>,
  clock: Clock,
): void {
  const { keyPrefix } = redisConfig;
  let lastRedisError: { at: number; err: unknown } | null = null;
  // ioredis reports connection failures (refused, auth, a read-only server) as events while its commands wait.
  redis.on('error', (err: unknown) => (lastRedisError = { at: clock.now(), err }));
  dependencies.register('kafka', { check: () => parts.kafka.ping() });
  dependencies.register('redis', {
    check: async () => {
      await publishReplicaHealth(
        redis,
        keyPrefix,
        {
          replica: parts.replica,
          checkedAt: new Date(clock.now()).toISOString(),
          dependencies: dependencies.reports(),
          // `status` and the admin API run elsewhere: the bound each account led here holds goes with the report.
          freshness: ledFreshness(parts.accounts),
        },
        30_000,
      );
      evictingCheck(parts.accounts);
    },
    // Only a recent one explains a check that timed out now.
    lastError: () => (lastRedisError && clock.now() - lastRedisError.at < 15_000 ? lastRedisError.err : undefined),
    address: redisAddressSettings(redisConfig.target.kind),
  });
  // A snapshot Redis stops (or starts again) holding is said at once, not at the next round.
  for (const account of parts.accounts.values()) account.hold.onChange(() => void dependencies.check('redis'));
  dependencies.register('upstream', {
    check: upstreamCheck(parts),
    gatesReadiness: parts.only,
    detail: () => ({
      accounts: [...parts.accounts.values()].filter((a) => a.credentialsRefused()).map((a) => a.account),
    }),
    intervalMs: 60_000,
  });
}

/**
 * Fails while Redis keeps evicting an account's snapshot (its last restore did not hold): the redis dependency then
 * reads `evicting`, in /readyz, `status` and the gauge, with the accounts' line as its cause.
 */
function evictingCheck(accounts: ReadonlyMap<string, AccountBridge>): void {
  const evicting = [...accounts.values()].filter((a) => a.hold.state().kind === 'evicting');
  if (evicting.length === 0) return;
  const first = evicting[0]!.hold.state();
  const err = new Error(
    `Redis keeps evicting the snapshot of account(s) ${evicting.map((a) => a.account).join(', ')}` +
      (first.kind === 'evicting' ? `: ${evictionMessage(evicting[0]!.account, first)}` : ''),
  );
  err.name = 'SnapshotEvictingError';
  throw err;
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
function buildParts(
  list: readonly BridgeConfig[],
  redis: BridgeRedis,
  logger: Logger,
  options: AppOptions,
  dependencies: DependencyMonitor,
): AppParts {
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
    explainFailure: (err) => dependencies.explains(err),
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
        explainFailure: (err) => dependencies.explains(err),
        contracts: options.contracts ? () => options.contracts!.of(config.account) : undefined,
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

/**
 * Starts a server on a configured port; a port it cannot listen on (in use, not permitted) is a ConfigError
 * naming the setting, not a bare `listen EADDRINUSE`.
 */
async function portSetting<O, S>(
  setting: 'HTTP_PORT' | 'ADMIN_PORT',
  where: { host: string; port: number },
  start: (options: O) => Promise<S>,
  options: O,
): Promise<S> {
  try {
    return await start(options);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const at = `${where.port} on ${where.host}`;
    if (code === 'EADDRINUSE') throw new ConfigError(setting, `port ${at} is already in use by another process`);
    if (code === 'EACCES') throw new ConfigError(setting, `port ${at} needs privileges this process lacks`);
    if (code === 'EADDRNOTAVAIL') {
      const host = setting === 'HTTP_PORT' ? 'HTTP_HOST' : 'ADMIN_HOST';
      throw new ConfigError(host, `${where.host} is not an address of this machine (${setting} ${where.port})`);
    }
    throw err;
  }
}
