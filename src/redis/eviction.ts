import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { BridgeRedis } from './connection.js';

// What Redis's memory policy risks, said once at start (as job queues built on Redis do: BullMQ warns unless the
// policy is noeviction). The bridge detects keys evicted from under it and restores them from the Kafka changelog
// (src/redis/lua/commit.lua), so an evicting Redis loses nothing, but every eviction of a snapshot key costs a full
// restore; a Redis that refuses writes (noeviction at maxmemory) stops commits until memory is freed. Read from
// INFO memory, which managed Redis services answer where they disable CONFIG.

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
    ? 'keys with an expiry (the lease, the dead-letter memory): a lost lease hands the account over'
    : 'any key (snapshot buckets, checkpoint, lease): each snapshot key evicted costs a full restore of its account from the Kafka changelog';
  return (
    `IMPORTANT: Redis ${p.primary} has maxmemory-policy ${p.policy} with ${limit}; it may evict ${keys}. ` +
    `Nothing is lost or published twice, but set maxmemory-policy noeviction (and memory to spare) on the bridge's Redis`
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
