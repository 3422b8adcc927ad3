import { randomBytes } from 'node:crypto';
import type { BridgeRedis } from './connection.js';

// Which Redis a deployment keeps its state in: a random id Redis holds under the deployment's key prefix, set by
// the first replica that asks (SET NX). Two installations with the same settings and their own Redis hold two ids;
// a Redis that lost its keys holds a new one. Leaders name it in their heartbeats (src/core/claims.ts).

/** The id of the Redis instance under `prefix`, created when it holds none. */
export async function redisInstance(redis: BridgeRedis, prefix: string): Promise<string> {
  const key = `${prefix}:redis-instance`;
  const mine = `r${randomBytes(6).toString('hex')}`;
  await redis.set(key, mine, 'NX');
  // Evicted between the two commands: this one's, the next to ask sets it again.
  return (await redis.get(key)) ?? mine;
}

/** The Redis instances a process has kept its state in (each leadership and start learns the current one). */
export class KnownRedisInstances {
  private readonly seen = new Set<string>();

  /** Reads the current instance (creating it when none), remembers it and resolves it. */
  async learn(redis: BridgeRedis, prefix: string): Promise<string> {
    const id = await redisInstance(redis, prefix);
    this.seen.add(id);
    return id;
  }

  /** Whether this process has kept its state in `id`. */
  has(id: string): boolean {
    return this.seen.has(id);
  }
}
