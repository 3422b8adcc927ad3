import { hash } from 'node:crypto';
import { systemRandom, type RandomSource } from '../core/random.js';
import {
  FingerprintKey,
  type FingerprintKeyCopy,
  type FingerprintKeySource,
  type LegacyKeyCopy,
} from '../core/fingerprint-key.js';
import { UnreadableKeyCopy } from '../core/fingerprint-key-wrap.js';
import { readSecretSync } from '../config/secrets.js';
import type { BridgeRedis } from './connection.js';

// Where the fingerprint key comes from: FINGERPRINT_KEY_FILE, or else a key generated once per deployment, kept in
// Redis (shared by every replica and account under the key prefix) and, with FINGERPRINT_KEK_FILE, copied wrapped
// to the changelog topic (FINGERPRINT_KEY_GENERATE=true without a KEK: Redis only, lost with Redis).
//
// A generated key lost with Redis and replaced by a new one would make every stored fingerprint incomparable: an
// edit made since the last sweep would be adopted without review.updated. So Redis is only where replicas agree on
// the key (SET NX: one winner), and the copy is what makes it durable:
// - a process uses a key only once Redis says it is copied (the copies hash: per copy, a digest of the key copied
//   there, written by a script that checks the key is still the one copied), so every key that ever keyed an entry
//   has its copy;
// - a Redis without the key takes the copy back (SET NX again), and generates a key only when there is no copy;
// - a process that finds another key in Redis than the one it holds takes Redis' key (persist, at every
//   leadership), and one that copied a key Redis no longer holds copies Redis' key again before using it, so the
//   last copy written is always the key in use.
// docs/security.md says who can read what, and why FINGERPRINT_KEY_FILE keeps the key out of Redis and Kafka.
//
// Whatever the mode, a plain copy an earlier version wrote is tombstoned at the first leadership once the key is
// settled (the wrapped copy confirmed first, so a recoverable copy always exists where one is kept), then
// remembered as done in the copies hash.

// Marks a copy confirmed, only while Redis holds the key that was copied. KEYS: the key, the copies hash (one hash
// slot). ARGV: the secret, the copy's name, the secret's digest.
const CONFIRM = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) return 1 end return 0`;

// What the copies hash holds of a key: enough to tell keys apart, nothing Redis does not already hold.
function copiedDigest(secret: string): string {
  return hash('sha256', `reviews-bridge copied key\u0000${secret}`, 'hex').slice(0, 32);
}

/** What the processes' sources of one deployment share: the key and what is known of its copies. */
interface Shared {
  key: FingerprintKey | null;
  secret: string | null;
  /** Copies this process saw confirmed for `secret`. */
  confirmed: Set<string>;
  /** What this process last copied, per copy: a copy of another key than Redis' is written over. */
  wrote: Map<string, string>;
  /** Loads in flight, per copy name ('' for none). */
  loading: Map<string, Promise<FingerprintKey>>;
  /** Plain copies of earlier versions this process saw retired (per name). */
  retired: Set<string>;
}

// One shared key (with its tables, ~2.7 MiB once used) per Redis connection, prefix and file: the accounts of a
// process share it.
const shared = new WeakMap<BridgeRedis, Map<string, Shared>>();

/**
 * The fingerprint key source of a deployment (shared by the accounts of a process). `copy` is where a generated key
 * is kept beside Redis, wrapped (the account's changelog topic); null: nowhere. `legacy` is the plain copy an
 * earlier version may have left there (recovered from, then tombstoned); null: none looked for (tools, tests).
 */
export function fingerprintKeySource(
  redis: BridgeRedis,
  prefix: string,
  file: string | null,
  copy: FingerprintKeyCopy | null = null,
  legacy: LegacyKeyCopy | null = null,
  random: RandomSource = systemRandom,
): FingerprintKeySource {
  let byName = shared.get(redis);
  if (!byName) shared.set(redis, (byName = new Map()));
  const name = `${prefix}\u0000${file ?? ''}`;
  let state = byName.get(name);
  if (!state) {
    state = {
      key: null,
      secret: null,
      confirmed: new Set(),
      wrote: new Map(),
      loading: new Map(),
      retired: new Set(),
    };
    byName.set(name, state);
  }
  const retire = retireLegacy(redis, prefix, legacy, state);
  return file ? fileSource(file, state, retire) : generatedSource(redis, prefix, copy, legacy, state, retire, random);
}

// Under the prefix (an ACL user limited to `~<prefix>:*` reaches it) and in the key's hash slot: its hash tag is
// the key's whole name, which is what the key itself hashes on.
function copiesKeyOf(prefix: string): string {
  return `${prefix}:{${prefix}:fingerprint-key}:copies`;
}

// Tombstones the plain copy of an earlier version, once per deployment and changelog (a field of the copies hash
// remembers it across processes and restarts).
function retireLegacy(
  redis: BridgeRedis,
  prefix: string,
  legacy: LegacyKeyCopy | null,
  state: Shared,
): () => Promise<void> {
  return async () => {
    if (!legacy || state.retired.has(legacy.name)) return;
    const field = `retired-plain/${legacy.name}`;
    if ((await redis.hget(copiesKeyOf(prefix), field)) === null) {
      await legacy.retire();
      await redis.hset(copiesKeyOf(prefix), field, '1');
    }
    state.retired.add(legacy.name);
  };
}

function fileSource(file: string, state: Shared, retire: () => Promise<void>): FingerprintKeySource {
  return {
    async get() {
      state.key ??= new FingerprintKey(Buffer.from(readSecretSync({ file }, 'FINGERPRINT_KEY_FILE'), 'utf8'));
      return state.key;
    },
    async persist() {
      await retire();
    },
  };
}

function generatedSource(
  redis: BridgeRedis,
  prefix: string,
  copy: FingerprintKeyCopy | null,
  legacy: LegacyKeyCopy | null,
  state: Shared,
  retire: () => Promise<void>,
  random: RandomSource,
): FingerprintKeySource {
  const redisKey = `${prefix}:fingerprint-key`;
  const copiesKey = copiesKeyOf(prefix);
  const copyName = copy?.name ?? '';

  // Whether `secret` is copied, copying it when it is not; false when Redis no longer holds it (start again).
  const copied = async (secret: string, kept: string | null | undefined, recheck = false): Promise<boolean> => {
    if (!copy) return true;
    const wrote = state.wrote.get(copy.name);
    const digest = copiedDigest(secret);
    const noted = !recheck && (wrote === undefined || wrote === secret);
    if (noted && (await redis.hget(copiesKey, copy.name)) === digest) return true;
    // A copy wrapped with another KEK (rotated) or altered is written over: Redis holds the key.
    const last = kept === undefined ? await copy.read().catch(unreadableAsNone) : kept;
    if (last !== secret) {
      await copy.write(secret);
      state.wrote.set(copy.name, secret);
    }
    return (await redis.eval(CONFIRM, 2, redisKey, copiesKey, secret, copy.name, digest)) === 1;
  };

  const resolve = async (recheck = false): Promise<FingerprintKey> => {
    for (let attempt = 0; attempt < 10; attempt++) {
      let secret = await redis.get(redisKey);
      let kept: string | null | undefined;
      if (secret === null) {
        // A wrapped copy that does not unwrap here rejects: a new key would cost the edits until the next sweep,
        // and the operator can give the KEK it was wrapped with. A plain copy of an earlier version still recovers.
        kept = copy ? await copy.read() : null;
        const recovered = kept ?? (legacy ? await legacy.read() : null);
        await redis.set(redisKey, recovered ?? random.bytes(32).toString('base64'), 'NX');
        secret = await redis.get(redisKey);
        if (secret === null) continue;
      }
      if (!(await copied(secret, kept, recheck))) continue;
      if (secret !== state.secret) {
        state.key = new FingerprintKey(Buffer.from(secret, 'base64'));
        state.secret = secret;
        state.confirmed.clear();
      }
      state.confirmed.add(copyName);
      return state.key!;
    }
    throw new Error('the generated fingerprint key kept changing in Redis while it was being copied');
  };

  const load = (): Promise<FingerprintKey> => {
    let loading = state.loading.get(copyName);
    if (!loading) {
      loading = resolve().finally(() => state.loading.delete(copyName));
      state.loading.set(copyName, loading);
    }
    return loading;
  };

  return {
    get() {
      if (state.key && state.confirmed.has(copyName)) return Promise.resolve(state.key);
      return load();
    },
    async persist(recheck = false) {
      // A recheck reads the copy in the topic once, whatever this process or Redis noted before.
      await (recheck && copy ? resolve(true) : load());
      await retire();
    },
  };
}

// A copy that cannot be unwrapped counts as none where Redis holds the key (it is written over).
function unreadableAsNone(err: unknown): null {
  if (err instanceof UnreadableKeyCopy) return null;
  throw err;
}
