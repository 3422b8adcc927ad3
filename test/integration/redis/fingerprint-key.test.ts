import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BridgeConfig } from '../../../src/config/config.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import { connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { fingerprintKeySource } from '../../../src/redis/fingerprint-key.js';
import { changelogKeyCopy } from '../../../src/kafka/fingerprint-key-copy.js';
import { KeyEncryptionKey } from '../../../src/core/fingerprint-key-wrap.js';
import { createTopics, readAll } from '../../helpers/kafka.js';
import { uniqueTopics } from '../../helpers/publisher.js';
import { kafkaBrokers, redisUrl, uniqueName } from '../../helpers/services.js';

// Without FINGERPRINT_KEY_FILE but with FINGERPRINT_KEK_FILE the fingerprint key is generated once per deployment,
// kept in Redis and copied, wrapped, to the changelog topic before it keys anything: a Redis that loses it gets the same key back, so no edit is adopted
// without review.updated for want of a key to compare it with, and replicas never use two keys. A source made on
// another Redis connection stands for another process (sources are shared per connection).

const logger = pino({ level: 'silent' });
const connections: BridgeRedis[] = [];
const kek = new KeyEncryptionKey(randomBytes(32));

function replica(redis: BridgeRedis, prefix: string, changelog: string) {
  const kafka = {
    brokers: kafkaBrokers(),
    clientId: uniqueName('it-key'),
    ssl: false,
    sasl: null,
    topics: { ...uniqueTopics('unused'), changelog },
  } as unknown as BridgeConfig['kafka'];
  return fingerprintKeySource(redis, prefix, null, changelogKeyCopy(kafka, prefix, kek, logger));
}

function newConnection(): BridgeRedis {
  const redis = connectRedis(redisUrl());
  connections.push(redis);
  return redis;
}

/** A deployment: a key prefix and a changelog topic of its own. */
async function deployment(): Promise<{ prefix: string; changelog: string }> {
  const changelog = `${uniqueName('fk')}.changelog`;
  await createTopics([changelog], 2);
  return { prefix: uniqueName('fk'), changelog };
}

async function loseKeys(redis: BridgeRedis, prefix: string): Promise<void> {
  const keys = await redis.keys(`${prefix}:fingerprint-key*`);
  expect(keys.length).toBeGreaterThan(0);
  await redis.del(...keys);
}

describe('the generated fingerprint key', () => {
  it('comes back from the changelog when Redis loses it: the next process uses the same key', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const first = await replica(newConnection(), prefix, changelog).get();
      await loseKeys(connections[0]!, prefix);
      const next = await replica(newConnection(), prefix, changelog).get();
      expect(next.id).toBe(first.id);
      // The copy is a record of the changelog (never of an account: restores skip it), named by the prefix.
      const records = await readAll([changelog], { timeoutMs: 20_000 });
      expect(records.map((r) => [r.key, r.partition])).toEqual([[`fingerprint-key-wrapped/${prefix}`, 0]]);
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });

  it('is the same for a replica that held it through the loss and one that started after', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const holder = replica(newConnection(), prefix, changelog);
      const held = await holder.get();
      await loseKeys(connections[0]!, prefix);
      const later = await replica(newConnection(), prefix, changelog).get();
      await holder.persist();
      expect((await holder.get()).id).toBe(later.id);
      expect(later.id).toBe(held.id);
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });

  it('is one key for replicas that start together on an empty Redis and changelog, and that key is kept', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const keys = await Promise.all([1, 2, 3, 4].map(() => replica(newConnection(), prefix, changelog).get()));
      expect(new Set(keys.map((k) => k.id)).size).toBe(1);
      await loseKeys(connections[0]!, prefix);
      expect((await replica(newConnection(), prefix, changelog).get()).id).toBe(keys[0]!.id);
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });

  it('is taken from Redis by a replica holding another, and copied before it is used', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const holder = replica(newConnection(), prefix, changelog);
      const held = await holder.get();
      // Another process's key (as a replica of an earlier version generates one after a loss).
      const other = randomBytes(32).toString('base64');
      await connections[0]!.set(`${prefix}:fingerprint-key`, other);
      await holder.persist();
      const taken = await holder.get();
      expect(taken.id).not.toBe(held.id);
      expect(taken.id).toBe(new FingerprintKey(Buffer.from(other, 'base64')).id);
      await loseKeys(connections[0]!, prefix);
      expect((await replica(newConnection(), prefix, changelog).get()).id).toBe(taken.id);
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });
});
