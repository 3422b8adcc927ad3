import { randomBytes } from 'node:crypto';
import { FingerprintKey, type FingerprintKeySource } from '../core/fingerprint-key.js';
import { readSecretSync } from '../config/secrets.js';
import type { BridgeRedis } from './connection.js';

// Where the fingerprint key comes from: FINGERPRINT_KEY_FILE, or else a key generated once per deployment and kept
// in Redis (shared by every replica and account under the key prefix). A generated key goes with a Redis that loses
// its keys; a process that already holds it writes it back when it next takes an account, and docs/guarantees.md
// says what a key that is truly lost costs.

// One source (and so one key with its tables, ~2.7 MiB once used) per Redis connection, prefix and file: the
// accounts of a process share it.
const sources = new WeakMap<BridgeRedis, Map<string, FingerprintKeySource>>();

/** The fingerprint key source of a deployment (shared by the accounts of a process). */
export function fingerprintKeySource(redis: BridgeRedis, prefix: string, file: string | null): FingerprintKeySource {
  let byName = sources.get(redis);
  if (!byName) sources.set(redis, (byName = new Map()));
  const name = `${prefix}\u0000${file ?? ''}`;
  let source = byName.get(name);
  if (!source) byName.set(name, (source = newSource(redis, prefix, file)));
  return source;
}

function newSource(redis: BridgeRedis, prefix: string, file: string | null): FingerprintKeySource {
  const redisKey = `${prefix}:fingerprint-key`;
  let secret: string | null = null;
  let loaded: Promise<FingerprintKey> | null = null;
  const load = async (): Promise<FingerprintKey> => {
    if (file) return new FingerprintKey(Buffer.from(readSecretSync({ file }, 'FINGERPRINT_KEY_FILE'), 'utf8'));
    await redis.set(redisKey, randomBytes(32).toString('base64'), 'NX');
    secret = await redis.get(redisKey);
    if (!secret) throw new Error('the generated fingerprint key vanished from Redis while it was read');
    return new FingerprintKey(Buffer.from(secret, 'base64'));
  };
  return {
    get() {
      loaded ??= load().catch((err: unknown) => {
        loaded = null;
        throw err;
      });
      return loaded;
    },
    async persist() {
      if (file) return;
      if (secret === null) await this.get();
      else await redis.set(redisKey, secret, 'NX');
    },
  };
}
