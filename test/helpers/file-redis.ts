import { afterAll, beforeAll } from 'vitest';
import type { PrivateRedis } from './processes.js';

/**
 * A fault-test file's own Redis: wiped and started before the file's tests, stopped after them. Returns the list
 * the tests push their clean-ups to (bridges, simulators, clients), run last first before Redis stops.
 */
export function redisForFile(redis: PrivateRedis): (() => Promise<unknown>)[] {
  const cleanups: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    redis.wipe();
    await redis.start();
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await redis.stop();
  });
  return cleanups;
}
