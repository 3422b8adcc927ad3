import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BridgeConfig } from '../../../src/config/config.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import { connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { fingerprintKeySource } from '../../../src/redis/fingerprint-key.js';
import { changelogKeyCopies } from '../../../src/kafka/fingerprint-key-copy.js';
import { KeyEncryptionKey, UnreadableKeyCopy } from '../../../src/core/fingerprint-key-wrap.js';
import { testKafka } from '../../helpers/kafka.js';
import { createTopics, deleteTopic, readAll } from '../../helpers/kafka.js';
import { testKeyFile } from '../../helpers/keys.js';
import { uniqueTopics } from '../../helpers/publisher.js';
import { kafkaBrokers, redisUrl, uniqueName } from '../../helpers/services.js';

// Without FINGERPRINT_KEY_FILE but with FINGERPRINT_KEK_FILE the fingerprint key is generated once per deployment,
// kept in Redis and copied, wrapped, to the changelog topic before it keys anything: a Redis that loses it gets the same key back, so no edit is adopted
// without review.updated for want of a key to compare it with, and replicas never use two keys. A source made on
// another Redis connection stands for another process (sources are shared per connection).

const logger = pino({ level: 'silent' });
const connections: BridgeRedis[] = [];
const kek = new KeyEncryptionKey(randomBytes(32));

function kafkaConfig(changelog: string): BridgeConfig['kafka'] {
  return {
    brokers: kafkaBrokers(),
    clientId: uniqueName('it-key'),
    ssl: false,
    sasl: null,
    topics: { ...uniqueTopics('unused'), changelog },
    identity: { deployment: 'dtest', upstream: 'utest' },
  } as unknown as BridgeConfig['kafka'];
}

/** A process of the deployment: a generated key with its copy wrapped by `wrapping`; `file`: a key file instead. */
function replica(
  redis: BridgeRedis,
  prefix: string,
  changelog: string,
  wrapping: KeyEncryptionKey | null = kek,
  file: string | null = null,
) {
  const { copy, legacy } = changelogKeyCopies(kafkaConfig(changelog), prefix, wrapping, logger);
  return fingerprintKeySource(redis, prefix, file, copy, legacy);
}

/** The plain copy an earlier version wrote (its record key and form). */
async function writePlainCopy(changelog: string, prefix: string, secret: string): Promise<void> {
  const producer = testKafka(uniqueName('plain')).producer();
  await producer.connect();
  try {
    await producer.send({
      topic: changelog,
      acks: -1,
      messages: [{ key: `fingerprint-key/${prefix}`, value: secret, partition: 0 }],
    });
  } finally {
    await producer.disconnect();
  }
}

/** The changelog's key-copy records in order: [record key, whether it holds a value]. */
async function copyRecords(changelog: string): Promise<Array<[string | null, boolean]>> {
  const records = await readAll([changelog], { timeoutMs: 20_000 });
  return records.map((r) => [r.key, r.bytes !== null && r.bytes !== undefined]);
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

  it('is copied again to a changelog topic deleted and created again, at the persist after a full restore', async () => {
    // Issue 46, item 5: Redis notes the copy per topic name, which a topic created again keeps.
    const { prefix, changelog } = await deployment();
    try {
      const source = replica(newConnection(), prefix, changelog);
      await source.persist();
      const key = await source.get();
      await deleteTopic(changelog);
      await createTopics([changelog], 2);
      await source.persist();
      expect(await copyRecords(changelog)).toEqual([]);
      // A full restore follows a reset or a start on a new topic: the copy is read there and written back.
      await source.persist(true);
      expect(await copyRecords(changelog)).toEqual([[`fingerprint-key-wrapped/${prefix}`, true]]);
      // Another process recovers the same key from it once Redis loses it.
      await loseKeys(connections[0]!, prefix);
      expect((await replica(newConnection(), prefix, changelog).get()).id).toBe(key.id);
      // Rechecked again with the copy in place: nothing more is written.
      await source.persist(true);
      expect(await copyRecords(changelog)).toHaveLength(1);
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

  it('an upgrade from a plain copy: recovered after a loss, wrapped, then the plain copy tombstoned, once', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const plain = randomBytes(32).toString('base64');
      await writePlainCopy(changelog, prefix, plain);
      // Redis lost the key before the upgrade: the plain copy is what gives it back.
      const upgraded = replica(newConnection(), prefix, changelog);
      await upgraded.persist();
      expect((await upgraded.get()).id).toBe(new FingerprintKey(Buffer.from(plain, 'base64')).id);
      // The wrapped copy before the tombstone: a recoverable copy at every moment.
      expect(await copyRecords(changelog)).toEqual([
        [`fingerprint-key/${prefix}`, true],
        [`fingerprint-key-wrapped/${prefix}`, true],
        [`fingerprint-key/${prefix}`, false],
      ]);
      // Once: another process, another leadership, add nothing.
      await replica(newConnection(), prefix, changelog).persist();
      await upgraded.persist();
      expect(await copyRecords(changelog)).toHaveLength(3);
      // And the next loss is recovered from the wrapped copy.
      await loseKeys(connections[0]!, prefix);
      expect((await replica(newConnection(), prefix, changelog).get()).id).toBe(
        new FingerprintKey(Buffer.from(plain, 'base64')).id,
      );
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });

  it('a new KEK: the key Redis holds is wrapped again under it; lost with Redis, the old KEK is asked for', async () => {
    const { prefix, changelog } = await deployment();
    try {
      const first = await replica(newConnection(), prefix, changelog).get();
      const next = new KeyEncryptionKey(randomBytes(32));
      const rotated = replica(newConnection(), prefix, changelog, next);
      await rotated.persist();
      expect((await rotated.get()).id).toBe(first.id);
      await loseKeys(connections[0]!, prefix);
      // The last copy is the new KEK's: the old KEK no longer unwraps it, the new one does.
      const stale = replica(newConnection(), prefix, changelog, kek).get();
      await expect(stale).rejects.toThrow(UnreadableKeyCopy);
      await expect(stale).rejects.toThrow(`id ${next.id}`);
      expect(await newConnection().get(`${prefix}:fingerprint-key`)).toBeNull();
      expect((await replica(newConnection(), prefix, changelog, next).get()).id).toBe(first.id);
    } finally {
      await Promise.all(connections.splice(0).map((r) => r.quit()));
    }
  });

  it('a key file, or a generated key kept in Redis only: the plain copy is tombstoned and nothing copied', async () => {
    for (const mode of ['file', 'redis only'] as const) {
      const { prefix, changelog } = await deployment();
      try {
        await writePlainCopy(changelog, prefix, randomBytes(32).toString('base64'));
        const file = mode === 'file' ? testKeyFile(`fingerprint-key-${prefix}`) : null;
        const source = replica(newConnection(), prefix, changelog, null, file);
        await source.persist();
        await source.get();
        expect(await copyRecords(changelog), mode).toEqual([
          [`fingerprint-key/${prefix}`, true],
          [`fingerprint-key/${prefix}`, false],
        ]);
      } finally {
        await Promise.all(connections.splice(0).map((r) => r.quit()));
      }
    }
  });
});
