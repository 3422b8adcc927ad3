import { z } from 'zod';
import { DependencyReportSchema } from '../core/dependency-health.js';
import { FreshnessReportSchema } from '../core/freshness-report.js';
import type { BridgeRedis } from './connection.js';
import { safeJson } from './store-common.js';

// What each replica last found of its dependencies, kept in Redis for `status` and the admin API (which run in
// other processes and cannot see a replica's Kafka connection). Writing it is also the replica's check that Redis
// takes writes: a Redis at maxmemory with noeviction, or a read-only replica, answers PING but refuses this SET.

/** A replica's dependencies when it last checked them. */
export const ReplicaHealthSchema = z.object({
  replica: z.string(),
  checkedAt: z.string().describe('ISO 8601'),
  dependencies: z.record(z.string(), DependencyReportSchema),
  /** The bound that holds for late changes, by account this replica leads (absent: written by an earlier version). */
  freshness: z.record(z.string(), FreshnessReportSchema).optional(),
});

/** A replica's dependencies when it last checked them. */
export type ReplicaHealth = z.infer<typeof ReplicaHealthSchema>;

function healthKey(prefix: string, replica: string): string {
  return `${prefix}:replica-health:${replica}`;
}

/** Writes a replica's report (expiring after `ttlMs`); rejects as Redis does (OOM, READONLY, NOAUTH...). */
export async function publishReplicaHealth(
  redis: BridgeRedis,
  prefix: string,
  health: ReplicaHealth,
  ttlMs: number,
): Promise<void> {
  await redis.set(healthKey(prefix, health.replica), JSON.stringify(health), 'PX', Math.max(1, Math.round(ttlMs)));
}

/** A replica's last report, or null when it published none recently. */
export async function readReplicaHealth(
  redis: BridgeRedis,
  prefix: string,
  replica: string,
): Promise<ReplicaHealth | null> {
  const raw = await redis.get(healthKey(prefix, replica));
  const parsed = raw === null ? null : ReplicaHealthSchema.safeParse(safeJson(raw));
  return parsed?.success ? parsed.data : null;
}

/** Whether Redis takes writes now: one small expiring SET; rejects as Redis does (OOM, READONLY, NOAUTH...). */
export async function probeRedisWrite(redis: BridgeRedis, prefix: string): Promise<void> {
  await redis.set(`${prefix}:write-probe`, '1', 'PX', 10_000);
}
