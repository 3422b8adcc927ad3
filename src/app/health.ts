import type { LoopHealth } from '../bridge/loop.js';
import type { Clock } from '../core/clock.js';
import type { KafkaProbe } from '../kafka/probe.js';
import type { LivenessResult, ReadinessResult } from '../ops/http-server.js';
import type { BridgeRedis } from '../redis/connection.js';
import { durabilityMessage, type DurabilityWatch } from '../redis/durability.js';
import type { AccountBridge } from './account.js';
import type { SchemaContracts } from '../kafka/schema-registry.js';

// What /healthz and /readyz say about the whole process: its accounts' loops, Redis, Kafka and the upstream
// credentials. The only account of a process is reported under its own name (dashboards and probes of one-account
// deployments read it so); several accounts are summed up.

/** What the process's probes look at. */
export interface HealthSources {
  accounts: ReadonlyMap<string, AccountBridge>;
  /** Whether the process runs one account (reported as it is) or several (summed up). */
  only: boolean;
  redis: BridgeRedis;
  kafka: KafkaProbe;
  durability: DurabilityWatch;
  /** Times the cached checks (Kafka, upstream credentials). */
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

/** The readiness check: Redis, its durability, Kafka, the credentials of the accounts this replica leads, the role. */
export function processReadiness(src: HealthSources): () => Promise<ReadinessResult> {
  const checkUpstream = cache(src.clock);
  const { redis, kafka, durability } = src;
  return async (): Promise<ReadinessResult> => {
    const all = [...src.accounts.values()];
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
      src.only ? all[0]!.store.pausedSince().catch(() => null) : null,
    ]);
    const loops = all.map((a) => a.health());
    const starting = loops.every((h) => h.role === 'starting');
    const unmet = durabilityMessage(durability.state());
    const durable = unmet === null || durability.state().kind === 'unknown';
    // Present only with a registry: true once the contracts are registered, else its state and reason.
    const contracts = src.contracts?.readiness();
    const registry: Record<string, string | boolean> = contracts === undefined ? {} : { schema_registry: contracts };
    const registered = contracts === undefined || contracts === true;
    if (src.only) {
      const role = loops[0]!.role;
      return {
        ok: redisOk && durable && kafkaOk && credentials[0]! && role !== 'starting' && registered,
        checks: {
          ...registry,
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
      ok: redisOk && durable && kafkaOk && !starting && registered,
      checks: {
        ...registry,
        redis: redisOk,
        redis_durability: unmet ?? true,
        kafka: kafkaOk,
        accounts: String(all.length),
        leading: String(loops.filter((h) => h.role === 'leader').length),
        upstream_credentials_refused: refused.join(',') || 'none',
      },
    };
  };
}

function roles(loops: readonly LoopHealth[]): Record<string, number> {
  const count: Record<string, number> = { leader: 0, standby: 0, starting: 0 };
  for (const h of loops) count[h.role] = (count[h.role] ?? 0) + 1;
  return count;
}

/** Caches a boolean health check for `ttlMs` so probes stay cheap. */
function cache(clock: Pick<Clock, 'now'>, defaultTtlMs = 5_000) {
  const entries = new Map<string, { at: number; ok: boolean; ttl: number }>();
  return async (name: string, check: () => Promise<unknown>, ttlMs = defaultTtlMs): Promise<boolean> => {
    const hit = entries.get(name);
    if (hit && clock.now() - hit.at < hit.ttl) return hit.ok;
    const ok = await check().then(
      () => true,
      () => false,
    );
    // A failure is re-checked sooner than a success so that readiness recovers quickly.
    entries.set(name, { at: clock.now(), ok, ttl: ok ? ttlMs : Math.min(ttlMs, 2_000) });
    return ok;
  };
}
