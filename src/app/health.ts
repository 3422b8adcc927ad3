import type { LoopHealth } from '../bridge/loop.js';
import type { Clock } from '../core/clock.js';
import type { KafkaProbe } from '../kafka/probe.js';
import type { LivenessResult, ReadinessResult } from '../ops/http-server.js';
import type { BridgeRedis } from '../redis/connection.js';
import { durabilityMessage, type DurabilityWatch } from '../redis/durability.js';
import type { AccountBridge } from './account.js';
import type { DependencyMonitor } from './dependencies.js';
import type { SchemaContracts } from '../kafka/schema-registry.js';
import type { FreshnessReport } from '../core/freshness-report.js';

// What /healthz and /readyz say about the whole process: its accounts' loops, Redis, Kafka and the upstream
// credentials. The dependencies are checked by the DependencyMonitor on its own schedule (src/app/dependencies.ts):
// readiness answers from what it knows, naming each failing dependency with its reason and since when, and never
// waits on a hanging broker. The only account of a process is reported under its own name (dashboards and probes
// of one-account deployments read it so); several accounts are summed up.

/** What the process's probes look at. */
export interface HealthSources {
  accounts: ReadonlyMap<string, AccountBridge>;
  /** Whether the process runs one account (reported as it is) or several (summed up). */
  only: boolean;
  redis: BridgeRedis;
  kafka: KafkaProbe;
  durability: DurabilityWatch;
  /** kafka, redis (a write), upstream credentials, and what else registered. */
  dependencies: DependencyMonitor;
  /** The process's clock (the dependency monitor times its checks with it). */
  clock: Pick<Clock, 'now'>;
  /** The schema registry contracts (SCHEMA_REGISTRY_URL); null or absent: no registry. */
  contracts?: Pick<SchemaContracts, 'readiness'> | null;
}

/** The liveness check: every account's loop ticks. */
export function processLiveness(src: HealthSources): () => LivenessResult {
  return () => {
    const loops = [...src.accounts.values()].map((a) => ({ account: a.account, ...a.health() }));
    // Accounts wait for their contracts before they start: their loops do not tick, and that is no hang.
    const waiting = src.contracts ? src.contracts.readiness() !== true : false;
    const stuck = waiting ? [] : loops.filter((h) => !h.ok);
    return {
      ok: stuck.length === 0,
      detail: src.only
        ? { ...loops[0], account: undefined }
        : { accounts: loops.length, stuck: stuck.map((h) => h.account), ...roles(loops) },
    };
  };
}

/**
 * The bound that holds for late changes (src/core/freshness-report.ts) of the accounts led here: the only account's
 * report (null while it does not lead), or several accounts' by account, led ones only. Never part of readiness: a
 * bound the budget cannot keep is a reason to look, not to take the replica out of service.
 */
export function processFreshness(
  src: Pick<HealthSources, 'accounts' | 'only'>,
): FreshnessReport | null | Record<string, FreshnessReport> {
  if (src.only) return [...src.accounts.values()][0]?.freshness() ?? null;
  return ledFreshness(src.accounts);
}

/** The bound that holds for late changes of each account this replica leads, by account. */
export function ledFreshness(accounts: HealthSources['accounts']): Record<string, FreshnessReport> {
  const led: Record<string, FreshnessReport> = {};
  for (const a of accounts.values()) {
    const report = a.freshness();
    if (report) led[a.account] = report;
  }
  return led;
}

/** The readiness check: the dependencies (Kafka, Redis taking writes, upstream credentials), durability, the role. */
export function processReadiness(src: HealthSources): () => Promise<ReadinessResult> {
  const { redis, durability, dependencies } = src;
  return async (): Promise<ReadinessResult> => {
    const all = [...src.accounts.values()];
    // Reported for the only account (several accounts each have their pause flag); a Redis that does not answer
    // is already named by the dependencies, and must not hold the probe up.
    const pausedSince = src.only ? await bounded(all[0]!.store.pausedSince(), 500) : null;
    const loops = all.map((a) => a.health());
    const starting = loops.every((h) => h.role === 'starting');
    const unmet = durabilityMessage(durability.state());
    const durable = unmet === null || durability.state().kind === 'unknown';
    const reports = dependencies.reports();
    const ok = (name: string) => reports[name]?.status === 'ok';
    const redisOk = ok('redis') || (reports.redis?.status === 'unknown' && (await pinged(redis)));
    // Present only with a registry: true once the contracts are registered, else its state and reason.
    const contracts = src.contracts?.readiness();
    const registry: Record<string, string | boolean> = contracts === undefined ? {} : { schema_registry: contracts };
    const registered = contracts === undefined || contracts === true;
    if (src.only) {
      const role = loops[0]!.role;
      const refused = loops[0]!.refused;
      return {
        ok: dependencies.ready() && durable && role !== 'starting' && registered && refused === null,
        checks: {
          // Present while the leadership is refused: the setting and the one line that says what to change.
          ...(refused ? { leadership_refused: `${refused.setting}: ${refused.reason}` } : {}),
          ...registry,
          redis: redisOk,
          redis_durability: unmet ?? true,
          kafka: ok('kafka'),
          upstream_credentials: reports.upstream?.status !== 'failing',
          role,
          paused: pausedSince !== null,
        },
        dependencies: reports,
        freshness: processFreshness(src),
      };
    }
    // One account's bad credentials must not take the whole process out of service (every other account would
    // stop with it on a rollout): they are reported by account and in the metrics, not in `ok`.
    const refused = all.filter((a) => a.credentialsRefused()).map((a) => a.account);
    return {
      ok: dependencies.ready() && durable && !starting && registered,
      checks: {
        ...registry,
        redis: redisOk,
        redis_durability: unmet ?? true,
        kafka: ok('kafka'),
        accounts: String(all.length),
        leading: String(loops.filter((h) => h.role === 'leader').length),
        upstream_credentials_refused: refused.join(',') || 'none',
        // Accounts whose leadership is refused here (their reasons: `status`, the log, the metric by setting).
        leadership_refused:
          loops
            .filter((h) => h.refused !== null)
            .map((h) => all[loops.indexOf(h)]!.account)
            .join(',') || 'none',
      },
      dependencies: reports,
      freshness: processFreshness(src),
    };
  };
}

/** The upstream check of a process: the credentials of every account, led here or not (tokens cached per account). */
export function upstreamCheck(src: Pick<HealthSources, 'accounts'>): () => Promise<void> {
  return async () => {
    const failures: unknown[] = [];
    await Promise.all([...src.accounts.values()].map((a) => a.checkCredentials().catch((err) => failures.push(err))));
    if (failures.length > 0) throw failures[0];
  };
}

async function pinged(redis: BridgeRedis): Promise<boolean> {
  return (
    (await bounded(
      redis.ping().then(
        () => true,
        () => false,
      ),
      500,
    )) ?? false
  );
}

/** The value of `p`, or null when it takes longer than `ms` or fails. */
function bounded<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  return Promise.race([p.catch(() => null), late]).finally(() => clearTimeout(timer));
}

function roles(loops: readonly LoopHealth[]): Record<string, number> {
  const count: Record<string, number> = { leader: 0, standby: 0, starting: 0 };
  for (const h of loops) count[h.role] = (count[h.role] ?? 0) + 1;
  return count;
}
