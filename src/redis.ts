import { readFileSync } from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';

// The Redis adapter: one client per process with the bridge's Lua scripts defined once (ioredis sends EVALSHA
// and falls back to EVAL after a Redis restart flushed the script cache), and the key layout in one place.

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

/** An ioredis client with the bridge's scripts as commands. */
export interface BridgeRedis extends Redis {
  bridgeCommit(...args: (string | Buffer | number)[]): Promise<number>;
  bridgeLeaseAcquire(lease: string, epoch: string, holder: string, ttlMs: number): Promise<number>;
  bridgeLeaseRelease(lease: string, holder: string): Promise<number>;
}

/** Connects to Redis; commands fail fast while it is down so a pass pauses instead of hanging. */
export function connectRedis(url: string, options: RedisOptions = {}): BridgeRedis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: 2,
    enableAutoPipelining: false,
    retryStrategy: (attempt) => Math.min(200 * 2 ** attempt, 5_000),
    lazyConnect: false,
    ...options,
  }) as BridgeRedis;
  // The error event fires on every failed reconnect; the bridge reports outages through failed commands.
  redis.on('error', () => undefined);
  redis.defineCommand('bridgeCommit', { lua: lua('commit') });
  redis.defineCommand('bridgeLeaseAcquire', { numberOfKeys: 2, lua: lua('lease-acquire') });
  redis.defineCommand('bridgeLeaseRelease', { numberOfKeys: 1, lua: lua('lease-release') });
  return redis;
}

/** Key names of one account. The {account} hash tag keeps them in one Redis Cluster slot for the scripts. */
export function accountKeys(prefix: string, account: string) {
  const base = `${prefix}:{${account}}`;
  return {
    epoch: `${base}:epoch`,
    lease: `${base}:lease`,
    checkpoint: `${base}:checkpoint`,
    count: `${base}:count`,
    sweepRequest: `${base}:sweep-request`,
    deadLettered: (digest: string) => `${base}:dlq:${digest}`,
    bucket: (bucket: number) => `${base}:s:${bucket}`,
    bucketPattern: `${base}:s:*`,
  };
}

/** The key names of one account (see accountKeys). */
export type AccountKeys = ReturnType<typeof accountKeys>;
