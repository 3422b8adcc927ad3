import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics, Gauge } from 'prom-client';
import { AccountBridge, connectGate, type AccountOptions } from './account.js';
import { StartSlots } from './leadership.js';
import { KafkaProbe } from '../kafka/probe.js';
import { Allotment } from '../bridge/allotment.js';
import { ConfigError, type BridgeConfig } from '../config/config.js';
import { replicaId } from '../redis/lease.js';
import type { LoopHealth } from '../bridge/loop.js';
import { mergedMetrics, type BridgeMetrics } from '../ops/metrics.js';
import { startOpsServer, type OpsServer, type ReadinessResult } from '../ops/http-server.js';
import { accountKeys, connectRedisFromConfig, replicaRegistry, type BridgeRedis } from '../redis/connection.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { DurabilityWatch, durabilityMessage } from '../redis/durability.js';
import { startAdminServer, type AdminServer } from '../admin/server.js';
import { startTracing } from './tracing.js';

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
export type AppOptions = AccountOptions;

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
  // The only account of a process keeps its process metrics and readiness under its own name (dashboards and
  // probes of one-account deployments read them so); several accounts share the process's.
  const only = list.length === 1 ? first : null;
  const redis = connectRedisFromConfig(first.redis);
  // A REDIS_WAIT_REPLICAS no primary can meet would make every write wait for ever: refuse it now, by name.
  const durability = new DurabilityWatch(redis, first.redis, { logger });
  if (first.redis.waitReplicas > 0) {
    let state = await durability.check();
    // A topology started together with the bridge may still be attaching its replicas (Cluster gossip takes a
    // moment): look again for a few seconds before refusing.
    for (let attempt = 0; attempt < 5 && state.kind === 'missing' && !first.redis.waitForReplicas; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      state = await durability.check();
    }
    if (state.kind === 'missing' && !first.redis.waitForReplicas) {
      redis.disconnect();
      throw new ConfigError('REDIS_WAIT_REPLICAS', durabilityMessage(state)!);
    }
    durability.start();
  }

  const processRegistry = new Registry();
  const replica = replicaId();
  const tracing = startTracing(first.tracing, logger);
  // The registry and the leases carry one replica id, so `status` can tell which replica leads which account.
  const allotment = new Allotment(replicaRegistry(redis, first.redis.keyPrefix), {
    replica,
    accounts: list.length,
    ttlMs: Math.max(...list.map((c) => c.lease.ttlMs)),
    logger,
  });
  const gate = connectGate();
  const startSlots = new StartSlots(first.leadership.startConcurrency);
  const accounts = new Map<string, AccountBridge>();
  for (const config of list) {
    const bridge = new AccountBridge(
      config,
      {
        redis,
        replica,
        logger: only ? logger : logger.child({ account: config.account }),
        processMetrics: only !== null,
        gate: (lease, account) => allotment.gate(lease, account),
        connectGate: gate,
        startSlots,
        tracer: tracing.tracer,
      },
      options,
    );
    accounts.set(config.account, bridge);
  }
  const firstBridge = accounts.get(first.account)!;
  if (!only) collectDefaultMetrics({ register: processRegistry });
  fleetGauges(processRegistry, allotment);
  const kafka = new KafkaProbe(first.kafka, logger);

  const checkUpstream = cache();
  let admin: AdminServer | null = null;
  const ops = await startOpsServer({
    host: first.http.host,
    port: first.http.port,
    metrics: mergedMetrics(() => [
      processRegistry,
      durability.registry,
      ...(admin ? [admin.metrics.registry] : []),
      ...[...accounts.values()].map((a) => a.metrics.registry),
    ]),
    logger,
    liveness: () => {
      const loops = [...accounts.values()].map((a) => ({ account: a.account, ...a.health() }));
      const stuck = loops.filter((h) => !h.ok);
      return {
        ok: stuck.length === 0,
        detail: only
          ? { ...loops[0], account: undefined }
          : { accounts: loops.length, stuck: stuck.map((h) => h.account), ...roles(loops) },
      };
    },
    readiness: async (): Promise<ReadinessResult> => {
      const all = [...accounts.values()];
      // The credentials of an account are checked by the replica that leads it (the one with its upstream client).
      const credentialsOf = (a: AccountBridge) => {
        const source = a.source;
        return source ? checkUpstream(`upstream:${a.account}`, () => source.checkCredentials(), 60_000) : true;
      };
      const [redisOk, kafkaOk, credentials, pausedSince] = await Promise.all([
        redis.ping().then(
          () => true,
          () => false,
        ),
        checkUpstream('kafka', () => kafka.ping()),
        Promise.all(all.map(credentialsOf)),
        // Reported for the only account (several accounts each have their pause flag).
        only ? firstBridge.store.pausedSince().catch(() => null) : null,
      ]);
      const loops = all.map((a) => a.health());
      const starting = loops.every((h) => h.role === 'starting');
      const unmet = durabilityMessage(durability.state());
      const durable = unmet === null || durability.state().kind === 'unknown';
      if (only) {
        const role = loops[0]!.role;
        return {
          ok: redisOk && durable && kafkaOk && credentials[0]! && role !== 'starting',
          checks: {
            redis: redisOk,
            redis_durability: unmet ?? true,
            kafka: kafkaOk,
            upstream_credentials: credentials[0]!,
            role,
            paused: pausedSince !== null,
          },
        };
      }
      // One account's bad credentials must not take the whole process out of service (every other account would
      // stop with it on a rollout): they are reported by account and in the metrics, not in `ok`.
      const refused = all.filter((_, i) => !credentials[i]).map((a) => a.account);
      return {
        ok: redisOk && durable && kafkaOk && !starting,
        checks: {
          redis: redisOk,
          redis_durability: unmet ?? true,
          kafka: kafkaOk,
          accounts: String(all.length),
          leading: String(loops.filter((h) => h.role === 'leader').length),
          upstream_credentials_refused: refused.join(',') || 'none',
        },
      };
    },
  });

  if (first.admin) {
    try {
      admin = await startAdminServer({
        admin: first.admin,
        accounts: list,
        durability: () => durabilityMessage(durability.state()),
        logger,
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
  return {
    accounts,
    loop: firstBridge.loop,
    metrics: firstBridge.metrics,
    ops,
    admin,
    allotment,
    replica,
    stop,
  };
}

function roles(loops: readonly LoopHealth[]): Record<string, number> {
  const count: Record<string, number> = { leader: 0, standby: 0, starting: 0 };
  for (const h of loops) count[h.role] = (count[h.role] ?? 0) + 1;
  return count;
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

/** Caches a boolean health check for `ttlMs` so probes stay cheap. */
function cache(defaultTtlMs = 5_000) {
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
