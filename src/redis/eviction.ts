import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { AccountKeys, BridgeRedis } from './connection.js';

// What Redis's memory policy risks, said once at start (as job queues built on Redis do: BullMQ warns unless the
// policy is noeviction). The bridge detects keys evicted from under it and restores them from the Kafka changelog
// (src/redis/lua/commit.lua), so nothing derived from an evicted key is published, but every eviction of a snapshot
// key costs a full restore, and a Redis too small for the snapshot keeps evicting: the account then publishes
// nothing until a restore holds (src/core/snapshot-hold.ts). A Redis that refuses writes (noeviction at maxmemory)
// stops commits until memory is freed. Read from INFO, which managed Redis services answer where they disable
// CONFIG; INFO stats' evicted_keys tells whether Redis evicted anything while a restore ran.

/** The memory settings of one Redis primary. */
export interface MemoryPolicy {
  /** host:port of the primary (never credentials). */
  primary: string;
  policy: string;
  /** Bytes; 0: no limit. */
  maxmemory: number;
}

/** The memory settings INFO memory reports, or null when it does not say. */
export function parseMemoryPolicy(info: string): { policy: string; maxmemory: number } | null {
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  const maxmemory = /^maxmemory:(\d+)/m.exec(info)?.[1];
  return policy === undefined ? null : { policy, maxmemory: Number(maxmemory ?? 0) };
}

/** The warning a primary's memory settings deserve (null: none), naming the setting and what it risks. */
export function evictionRisk(p: MemoryPolicy): string | null {
  const limit = p.maxmemory === 0 ? 'maxmemory 0 (no limit) for now' : `maxmemory ${p.maxmemory} bytes`;
  if (p.policy === 'noeviction') {
    if (p.maxmemory === 0) return null;
    return (
      `Redis ${p.primary} refuses writes once it holds ${limit} (maxmemory-policy noeviction): the bridge then ` +
      `commits nothing and publishes nothing new until memory is freed, and /readyz says so`
    );
  }
  const keys = p.policy.startsWith('volatile-')
    ? 'keys with an expiry (the lease, the dead-letter memory): a lost lease hands the account over, a lost dead-letter memory publishes a dead letter again'
    : 'any key (snapshot buckets, checkpoint, lease): each snapshot key evicted costs a full restore of its account from the Kafka changelog, and a maxmemory below what the snapshots need stops publishing (/readyz says so) until memory is raised';
  return (
    `IMPORTANT: Redis ${p.primary} has maxmemory-policy ${p.policy} with ${limit}; it may evict ${keys}. ` +
    `Evicted snapshot keys are detected and restored, never derived from, so no change event is published twice or invented; ` +
    `set maxmemory-policy noeviction (and memory to spare) on the bridge's Redis`
  );
}

/** Every primary's memory settings (each primary of a Cluster); a primary that does not say is left out. */
export async function memoryPolicies(redis: BridgeRedis): Promise<MemoryPolicy[]> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const out: MemoryPolicy[] = [];
  for (const node of nodes) {
    const parsed = parseMemoryPolicy(await node.info('memory'));
    if (parsed) out.push({ primary: `${node.options.host ?? '?'}:${node.options.port ?? '?'}`, ...parsed });
  }
  return out;
}

/** Logs what the memory policy of the bridge's Redis risks, once at start; a Redis that does not answer is left. */
export async function warnAboutEviction(redis: BridgeRedis, logger: Logger): Promise<void> {
  try {
    for (const p of await memoryPolicies(redis)) {
      const risk = evictionRisk(p);
      if (risk) logger.warn({ primary: p.primary, policy: p.policy, maxmemory: p.maxmemory }, risk);
    }
  } catch (err) {
    logger.debug({ err }, 'the Redis memory policy could not be read');
  }
}

/** What INFO says of a primary's memory and evictions (summed over a Cluster's primaries). */
export interface MemoryStats {
  /** Keys evicted since Redis started (INFO stats evicted_keys). */
  evictedKeys: number;
  /** Bytes in use (INFO memory used_memory). */
  usedMemory: number;
  /** Bytes; 0: no limit. */
  maxmemory: number;
}

/** The memory and eviction figures of INFO's text, or null when it does not say. */
export function parseMemoryStats(info: string): MemoryStats | null {
  const field = (name: string) => new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1];
  const evicted = field('evicted_keys');
  const used = field('used_memory');
  if (evicted === undefined || used === undefined) return null;
  return { evictedKeys: Number(evicted), usedMemory: Number(used), maxmemory: Number(field('maxmemory') ?? 0) };
}

/** Memory and evictions of every primary, summed; null when a primary does not answer INFO (an ACL refusing it). */
export async function memoryStats(redis: BridgeRedis): Promise<MemoryStats | null> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const total: MemoryStats = { evictedKeys: 0, usedMemory: 0, maxmemory: 0 };
  for (const node of nodes) {
    const parsed = parseMemoryStats(await node.info());
    if (!parsed) return null;
    total.evictedKeys += parsed.evictedKeys;
    total.usedMemory += parsed.usedMemory;
    total.maxmemory += parsed.maxmemory;
  }
  return total;
}

/**
 * About how many bytes Redis spends on one snapshot entry, from MEMORY USAGE of a few of `bucketKeys` (null when
 * MEMORY is refused or the buckets hold nothing).
 */
export async function bytesPerEntry(redis: BridgeRedis, bucketKeys: readonly string[]): Promise<number | null> {
  let bytes = 0;
  let entries = 0;
  for (const key of bucketKeys.slice(0, 8)) {
    const [usage, fields] = await Promise.all([redis.memory('USAGE', key), redis.hlen(key)]);
    if (typeof usage !== 'number' || fields < 2) continue;
    bytes += usage;
    // Every bucket holds its marker besides its entries.
    entries += fields - 1;
  }
  return entries > 0 ? bytes / entries : null;
}

/** About how many bytes one of the account's snapshot entries takes in Redis (a few listed buckets measured). */
export async function snapshotBytesPerEntry(redis: BridgeRedis, keys: AccountKeys): Promise<number | null> {
  const listed = Object.keys(await redis.hgetall(keys.manifest)).filter((field) => /^\d+$/.test(field));
  return bytesPerEntry(
    redis,
    listed.slice(0, 8).map((bucket) => keys.bucket(Number(bucket))),
  );
}
