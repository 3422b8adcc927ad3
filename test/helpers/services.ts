import { randomBytes } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, inject, onTestFinished } from 'vitest';

/** Kafka bootstrap addresses of the broker the global setup provides (integration and e2e projects). */
export function kafkaBrokers(): string[] {
  return inject('kafkaBrokers')
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b.length > 0);
}

/** URL of the Redis the global setup provides. */
export function redisUrl(): string {
  return inject('redisUrl');
}

/**
 * The Redis settings of the bridges e2e tests start: REDIS_URL of the provided Redis, or a replicated topology's
 * REDIS_SENTINELS / REDIS_CLUSTER_NODES when the run selected one (every key present, the unused ones blank).
 */
export function bridgeRedisEnv(): Record<string, string> {
  const topology = inject('bridgeRedisEnv');
  const blank = { REDIS_URL: '', REDIS_SENTINELS: '', REDIS_SENTINEL_NAME: '', REDIS_CLUSTER_NODES: '' };
  return Object.keys(topology).length > 0 ? { ...blank, ...topology } : { ...blank, REDIS_URL: redisUrl() };
}

/**
 * A name no other test (nor an earlier run against the same long-lived services) uses: per-test topic names,
 * consumer groups and Redis key prefixes, so tests can share one broker and one Redis without cleaning up.
 * Only [a-z0-9-] is added, which is valid in Kafka topic names and harmless in Redis keys.
 */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

// Clients created outside a running test (describe body, beforeAll) are closed when the file's tests end.
const fileScopedClients = new Set<Redis>();
afterAll(async () => {
  await Promise.all([...fileScopedClients].map(closeRedis));
  fileScopedClients.clear();
});

/**
 * An ioredis client for the provided Redis that is closed automatically: at the end of the current test when
 * created inside one, otherwise after the file's tests. Pass `keyPrefix: uniqueName('...') + ':'` to isolate keys.
 */
export function newRedis(options: RedisOptions = {}): Redis {
  // Fail fast instead of queueing forever, so a missing Redis shows up as an error, not a test timeout.
  const client = new Redis(redisUrl(), { maxRetriesPerRequest: 2, connectTimeout: 5_000, ...options });
  try {
    onTestFinished(() => closeRedis(client));
  } catch {
    // Not inside a running test.
    fileScopedClients.add(client);
  }
  return client;
}

async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}
