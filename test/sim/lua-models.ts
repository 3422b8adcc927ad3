// Models of the bridge's Lua scripts (src/redis/lua/*.lua) over the simulated Redis's data, one function per
// script, with the script's semantics: atomic (the caller runs them in one step), the same replies and the same
// error replies, and the inline script src/redis/fingerprint-key.ts sends. test/integration/sim/lua-models.test.ts
// runs each script and its model on the same random inputs (on the real Redis) and compares replies and the keys
// afterwards, so the simulation cannot drift from them.

/**
 * A stored value: a string, a hash (field values kept as bytes, as the snapshot's buckets hold binary entries) or a
 * sorted set (member to score).
 */
export type RedisValue =
  { t: 'str'; v: string } | { t: 'hash'; v: Map<string, Buffer> } | { t: 'zset'; v: Map<string, number> };

/** What a script model reads and writes: the keys (expired ones already gone) and Redis's clock (ms). */
export interface ScriptData {
  get(key: string): RedisValue | undefined;
  set(key: string, value: RedisValue, pxMs?: number): void;
  del(key: string): boolean;
  /** Sets the ttl of a key (PEXPIRE). */
  pexpire(key: string, ms: number): void;
  now(): number;
  /**
   * Called with the name of each write command a script sends, before its effect: Redis refuses some there (under
   * OOM the first DENYOOM write of a script that wrote nothing yet, on a read-only replica every write), and a
   * refusal aborts the script with the writes before it kept, as `redis.call` does.
   */
  write(command: string): void;
}

/** An error reply of a script (ioredis rejects with one whose message is the reply). */
export class ScriptErrorReply extends Error {}

/** A script's argument as Redis receives it (bytes). */
export type Arg = string | Buffer | number;

const str = (a: Arg): string => (Buffer.isBuffer(a) ? a.toString('utf8') : String(a));
const buf = (a: Arg): Buffer => (Buffer.isBuffer(a) ? a : Buffer.from(String(a), 'utf8'));

function getString(data: ScriptData, key: string): string | null {
  const v = data.get(key);
  if (!v) return null;
  if (v.t !== 'str') throw new ScriptErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
  return v.v;
}

function hash(data: ScriptData, key: string, create: boolean): Map<string, Buffer> | null {
  const v = data.get(key);
  if (v) {
    if (v.t !== 'hash') throw new ScriptErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
    return v.v;
  }
  if (!create) return null;
  const h = new Map<string, Buffer>();
  data.set(key, { t: 'hash', v: h });
  return h;
}

function hdel(data: ScriptData, key: string, field: string): number {
  data.write('HDEL');
  const h = hash(data, key, false);
  if (!h || !h.delete(field)) return 0;
  if (h.size === 0) data.del(key);
  return 1;
}

function incrby(data: ScriptData, key: string, by: number): number {
  data.write(by < 0 ? 'DECRBY' : 'INCRBY');
  const next = Number(getString(data, key) ?? '0') + by;
  // INCRBY keeps the key's ttl (SET would drop it).
  const held = data.get(key);
  if (held?.t === 'str') held.v = String(next);
  else data.set(key, { t: 'str', v: String(next) });
  return next;
}

/** The fence both commit.lua and remove.lua check first. */
function fence(data: ScriptData, epochKey: string, epoch: string): void {
  const current = getString(data, epochKey);
  if (current === null) throw new ScriptErrorReply('LOST: the account keys are gone');
  if (current !== epoch) throw new ScriptErrorReply(`FENCED: epoch ${epoch} superseded by ${current}`);
}

/** The bucket number a bucket key ends with (`string.match(key, ':(%d+)$')`), or null. */
function bucketOf(key: string, pattern: RegExp = /:(\d+)$/): string | null {
  return pattern.exec(key)?.[1] ?? null;
}

/** HSETNX: sets the field when absent; 1 when it set it. */
function hsetnx(data: ScriptData, key: string, field: string, value: string): number {
  data.write('HSETNX');
  const h = hash(data, key, true)!;
  if (h.has(field)) return 0;
  h.set(field, Buffer.from(value));
  return 1;
}

/** HSET of one field (a write command: `data.write` first, so a refused one creates no hash). */
function hset(data: ScriptData, key: string, field: string, value: string | Buffer): void {
  data.write('HSET');
  hash(data, key, true)!.set(field, typeof value === 'string' ? Buffer.from(value) : value);
}

/** The check commit.lua and restore-put.lua make: every listed bucket among `bucketKeys` still has its marker. */
function checkBuckets(data: ScriptData, manifestKey: string, bucketKeys: string[]): void {
  const manifest = hash(data, manifestKey, false);
  for (const key of bucketKeys) {
    const bucket = bucketOf(key);
    if (bucket !== null && manifest?.has(bucket) && !hash(data, key, false)?.has('m')) {
      throw new ScriptErrorReply(`LOST-PART: snapshot bucket ${bucket} of the account vanished from Redis`);
    }
  }
}

const MANIFEST_LOST_DURING_RESTORE =
  'LOST-PART: the bucket manifest of the account vanished from Redis during its restore';

/** commit.lua: the fenced commit of entries and checkpoint pairs (see the script for the arguments). */
export function commitScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  fence(data, keys[0]!, str(argv[0]!));
  const pairsCount = Number(str(argv[1]!));
  const firstEntry = 2 + pairsCount * 2;
  let wantSealed = false;
  let sealing = false;
  for (let i = 2; i < firstEntry; i += 2) {
    const field = str(argv[i]!);
    if (field === 'expect_txn') {
      const txn = hash(data, keys[1]!, false)?.get('txn')?.toString('utf8') ?? '0';
      const expected = str(argv[i + 1]!);
      if (txn !== expected) {
        throw new ScriptErrorReply(`LOST: Redis holds changelog transaction ${txn}, expected ${expected}`);
      }
    } else if (field === 'sealed') wantSealed = true;
    else if (field === 'm') sealing = true;
    else if (field === 'expect_manifest') {
      if (!(hash(data, keys[3]!, false)?.has(str(argv[i + 1]!)) ?? false)) {
        throw new ScriptErrorReply(MANIFEST_LOST_DURING_RESTORE);
      }
    } else if (field === 'expect_restore') {
      if (hash(data, keys[1]!, false)?.get('restore_token')?.toString('utf8') !== str(argv[i + 1]!)) {
        throw new ScriptErrorReply('LOST: Redis lost writes of the restore it was to finish');
      }
    }
  }
  const hasMark = hash(data, keys[1]!, false)?.has('m') ?? false;
  const hasManifest = hash(data, keys[3]!, false)?.has('v') ?? false;
  if (!sealing && (hasMark !== hasManifest || (wantSealed && !hasMark))) {
    const gone = hasMark ? 'the bucket manifest' : 'the checkpoint';
    throw new ScriptErrorReply(`LOST-PART: ${gone} of the account vanished from Redis`);
  }
  if (hasManifest && !sealing) checkBuckets(data, keys[3]!, keys.slice(4));
  let added = 0;
  for (let i = firstEntry; i < argv.length; i += 3) {
    const key = keys[3 + Number(str(argv[i]!))]!;
    data.write('HSET');
    const h = hash(data, key, true)!;
    const field = str(argv[i + 1]!);
    if (!h.has(field)) added += 1;
    h.set(field, buf(argv[i + 2]!));
  }
  if (added > 0) incrby(data, keys[2]!, added);
  if (hasManifest) {
    for (const key of keys.slice(4)) {
      if (hsetnx(data, key, 'm', '1') === 1) hset(data, keys[3]!, bucketOf(key)!, '1');
    }
  }
  for (let i = 2; i < firstEntry; i += 2) {
    const field = str(argv[i]!);
    const value = str(argv[i + 1]!);
    if (field === 'expect_txn' || field === 'sealed' || field === 'expect_restore' || field === 'expect_manifest') {
      continue;
    }
    if (value === '') hdel(data, keys[1]!, field);
    else if (field === 'watermark_rewind') hset(data, keys[1]!, 'watermark', value);
    else if (field === 'watermark') {
      const old = Number(hash(data, keys[1]!, false)?.get(field)?.toString('utf8') ?? '-1');
      if (Number(value) > old) hset(data, keys[1]!, field, value);
    } else hset(data, keys[1]!, field, value);
  }
  if (sealing) {
    hset(data, keys[3]!, 'v', '1');
    hdel(data, keys[3]!, 'r');
  }
  return added;
}

/**
 * remove.lua: removes entries that still hold the value the deletion was decided on, fenced, keeping each removed
 * review's deleted sequence in the gone hash.
 */
export function removeScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  fence(data, keys[0]!, str(argv[0]!));
  let removed = 0;
  for (let i = 1; i < argv.length; i += 5) {
    const key = keys[2 + Number(str(argv[i]!))]!;
    const field = str(argv[i + 1]!);
    const held = hash(data, key, false)?.get(field);
    if (held && held.equals(buf(argv[i + 2]!))) {
      removed += hdel(data, key, field);
      hset(data, keys[2]!, str(argv[i + 3]!), buf(argv[i + 4]!));
    }
  }
  if (removed > 0) incrby(data, keys[1]!, -removed);
  return removed;
}

/**
 * restore-put.lua: fenced by the epoch, writes one batch of restored entries (an empty value deletes), the deleted
 * reviews' sequences and the restore token, marking and listing the buckets written.
 */
export function restorePutScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  fence(data, keys[0]!, str(argv[0]!));
  const [, checkpointKey, goneKey, manifestKey] = keys as [string, string, string, string];
  const mode = str(argv[1]!);
  if (mode === '2' && !(hash(data, manifestKey, false)?.has('r') ?? false)) {
    throw new ScriptErrorReply(MANIFEST_LOST_DURING_RESTORE);
  }
  if (mode === '2' || (mode === '1' && (hash(data, manifestKey, false)?.has('v') ?? false))) {
    checkBuckets(data, manifestKey, keys.slice(4));
  }
  const first = 4 + Number(str(argv[3]!)) * 2;
  for (let i = 4; i < first; i += 2) hset(data, goneKey, str(argv[i]!), buf(argv[i + 1]!));
  const marked = new Set<number>();
  for (let i = first; i < argv.length; i += 3) {
    const k = 3 + Number(str(argv[i]!));
    const key = keys[k]!;
    const field = str(argv[i + 1]!);
    if (buf(argv[i + 2]!).length === 0) hdel(data, key, field);
    else {
      hset(data, key, field, buf(argv[i + 2]!));
      if (!marked.has(k)) {
        marked.add(k);
        if (hsetnx(data, key, 'm', '1') === 1) hset(data, manifestKey, bucketOf(key)!, '1');
      }
    }
  }
  if (str(argv[2]!) !== '') hset(data, checkpointKey, 'restore_token', buf(argv[2]!));
  return 0;
}

/** seal-buckets.lua: marks and lists every key that names a bucket; how many. */
export function sealBucketsScript(data: ScriptData, keys: string[]): number {
  let sealed = 0;
  for (const key of keys.slice(1)) {
    const bucket = bucketOf(key, /:s:(\d+)$/);
    if (bucket === null) continue;
    hset(data, key, 'm', '1');
    hset(data, keys[0]!, bucket, '1');
    sealed += 1;
  }
  return sealed;
}

/** epoch-floor.lua: raises the epoch counter to a floor; 1 when it raised it. */
export function epochFloorScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  const current = Number(getString(data, keys[0]!) ?? '0');
  if (current < Number(str(argv[0]!))) {
    data.write('SET');
    data.set(keys[0]!, { t: 'str', v: str(argv[0]!) });
    return 1;
  }
  return 0;
}

/** lease-acquire.lua: acquires or renews the lease; the holder's epoch, or 0. */
export function leaseAcquireScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  const holder = str(argv[0]!);
  const ttl = Number(str(argv[1]!));
  const value = getString(data, keys[0]!);
  if (value !== null) {
    const m = /^(.*)\|(\d+)$/s.exec(value);
    if (m && m[1] === holder) {
      data.write('PEXPIRE');
      data.pexpire(keys[0]!, ttl);
      return Number(m[2]);
    }
    return 0;
  }
  let epoch = incrby(data, keys[1]!, 1);
  const now = Math.floor(data.now());
  if (epoch < now) {
    epoch = now;
    data.write('SET');
    data.set(keys[1]!, { t: 'str', v: String(epoch) });
  }
  data.write('SET');
  data.set(keys[0]!, { t: 'str', v: `${holder}|${epoch}` }, ttl);
  return epoch;
}

/** lease-release.lua: releases the lease if this holder has it; 1 when released. */
export function leaseReleaseScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  const value = getString(data, keys[0]!);
  const m = value === null ? null : /^(.*)\|\d+$/s.exec(value);
  if (m && m[1] === str(argv[0]!)) {
    data.write('DEL');
    data.del(keys[0]!);
    return 1;
  }
  return 0;
}

/** resync-take.lua: the active resync request, else the pending one moved to active; or null. */
export function resyncTakeScript(data: ScriptData, keys: string[]): string | null {
  const active = getString(data, keys[1]!);
  if (active !== null) return active;
  const pending = getString(data, keys[0]!);
  if (pending !== null) {
    data.write('SET');
    data.set(keys[1]!, { t: 'str', v: pending });
    data.write('DEL');
    data.del(keys[0]!);
  }
  return pending;
}

/** resync-done.lua: clears the active request if it is the completed one. */
export function resyncDoneScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  if (getString(data, keys[0]!) === str(argv[0]!)) {
    data.write('DEL');
    data.del(keys[0]!);
    return 1;
  }
  return 0;
}

/**
 * The inline script of src/redis/fingerprint-key.ts (CONFIRM), as it sends it: the simulated Redis models this text
 * only, so a change of the script stops every schedule until its model follows.
 */
export const CONFIRM_COPY_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) return 1 end return 0`;

/** The inline script of src/redis/fingerprint-key.ts: marks a copy confirmed while Redis holds the copied key. */
export function confirmCopyScript(data: ScriptData, keys: string[], argv: Arg[]): number {
  if (getString(data, keys[0]!) !== str(argv[0]!)) return 0;
  hset(data, keys[1]!, str(argv[1]!), buf(argv[2]!));
  return 1;
}

/** replica-beat.lua: records (or removes) the caller, forgets replicas silent past the ttl; the live ids. */
export function replicaBeatScript(data: ScriptData, keys: string[], argv: Arg[]): string[] {
  const now = Math.floor(data.now());
  const ttl = Number(str(argv[1]!));
  const v = data.get(keys[0]!);
  if (v && v.t !== 'zset')
    throw new ScriptErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
  const leave = str(argv[2]!) === 'leave';
  data.write(leave ? 'ZREM' : 'ZADD');
  const set = v?.v ?? new Map<string, number>();
  if (leave) set.delete(str(argv[0]!));
  else set.set(str(argv[0]!), now);
  data.write('ZREMRANGEBYSCORE');
  for (const [member, score] of set) if (score <= now - ttl) set.delete(member);
  if (set.size === 0) {
    data.del(keys[0]!);
    return [];
  }
  data.write('PEXPIRE');
  data.set(keys[0]!, { t: 'zset', v: set }, ttl * 10);
  return [...set].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0)).map(([m]) => m);
}
