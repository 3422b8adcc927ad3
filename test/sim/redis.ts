import { createHash } from 'node:crypto';
import type { BridgeRedis } from '../../src/redis/connection.js';
import type { Actor, World } from './world.js';
import {
  commitScript,
  epochFloorScript,
  leaseAcquireScript,
  leaseReleaseScript,
  removeScript,
  restorePutScript,
  sealBucketsScript,
  confirmCopyScript,
  replicaBeatScript,
  CONFIRM_COPY_SCRIPT,
  resyncDoneScript,
  resyncTakeScript,
  ScriptErrorReply,
  type Arg,
  type RedisValue,
  type ScriptData,
} from './lua-models.js';

// The simulated Redis: one server the replicas share, with the commands the bridge's Redis adapter uses (the real
// SnapshotStore, Lease and control flags run on it unchanged) and its scripts as models (lua-models.ts). Faults:
// keys that vanish (all, or some buckets), writes refused for a while as Redis 7 refuses them (OOM under
// noeviction: DENYOOM commands only, and in a script only a first write that is DENYOOM, so a lease renewal or
// remove.lua still succeed; READONLY: every write), eviction that keeps going (allkeys-lru under a maxmemory), replies
// lost after the command ran (ioredis resends it, or the connection fails), and a failover to a replica that had not
// received the last writes.

type Command = [name: string, args: unknown[]];

/** The scripts (run atomically; their writes go through `write`, which refuses them as Redis does). */
const SCRIPTS = new Set([
  'bridgeCommit',
  'bridgeRemove',
  'bridgeRestorePut',
  'bridgeSealBuckets',
  'eval',
  'bridgeEpochFloor',
  'bridgeResyncTake',
  'bridgeResyncDone',
  'bridgeLeaseAcquire',
  'bridgeLeaseRelease',
  'bridgeReplicaBeat',
]);

/**
 * The commands that may write: refused while Redis refuses writes (a script, by its own first write), and
 * remembered for a failover.
 */
const WRITES = new Set(['set', 'del', 'unlink', 'getdel', 'hset', 'hdel', ...SCRIPTS]);

/**
 * The write commands flagged DENYOOM in Redis 7 among those the bridge sends (plain or in its scripts): refused while
 * used memory is over maxmemory under noeviction. DEL, UNLINK, HDEL, GETDEL, PEXPIRE, ZREM and ZREMRANGEBYSCORE are
 * not (measured on Redis 7.0: they succeed under OOM, and a script whose first write is one of them runs whole).
 */
const DENYOOM = new Set(['SET', 'HSET', 'HSETNX', 'INCR', 'INCRBY', 'DECRBY', 'ZADD']);

/** A reply lost after the command reached Redis: it ran (or not), then ioredis resent it or the connection failed. */
export interface LostReplies {
  /** Every n-th command of the window loses its reply. */
  every: number;
  /** Whether the command ran before its reply was lost. */
  ran: boolean;
  /** ioredis resends it (autoResendUnfulfilledCommands) and answers the second reply; else the call fails. */
  resend: boolean;
}

const copyValue = (v: RedisValue): RedisValue =>
  v.t === 'str' ? { ...v } : v.t === 'hash' ? { t: 'hash', v: new Map(v.v) } : { t: 'zset', v: new Map(v.v) };

/** The server: its keys, their expiry, and the writes a failover can lose. */
export class SimRedisServer implements ScriptData {
  data = new Map<string, RedisValue>();
  expires = new Map<string, number>();
  /** Copies of the data before each of the last writes (a failover goes back to one of them). */
  private history: Array<{ data: Map<string, RedisValue>; expires: Map<string, number> }> = [];
  /**
   * Writes are refused with this reply while set: an OOM reply refuses DENYOOM commands only (noeviction over
   * maxmemory), any other (READONLY) every write.
   */
  refuseWrites: string | null = null;
  /** Replies are lost while set (see LostReplies). */
  loseReplies: LostReplies | null = null;
  private lostCount = 0;
  /** Replies lost so far (the schedule's statistics). */
  lostReplies = 0;
  /** Whether the running script wrote already (Redis refuses only a script's first write under OOM). */
  private scriptDirty = false;
  /** allkeys-lru under this many bytes (approximate, see `used`) while set: every command first evicts down to it. */
  maxmemory: number | null = null;
  /** Keys evicted so far. */
  evicted = 0;
  /** Which keys were evicted when (world ms): the checker excuses what losing each may cost (a dead letter again). */
  readonly evictions: Array<{ key: string; at: number }> = [];
  /** When each key was last touched (a counter, for LRU). */
  private touched = new Map<string, number>();
  private touches = 0;
  /** Commands served (for the schedule's statistics). */
  commands = 0;
  /**
   * Called with a commit script's bucket keys just before it runs (nothing runs in between): a fault may take keys
   * away there, as an eviction or a deletion by hand between a page's read and its commit would.
   */
  beforeCommit: ((bucketKeys: string[]) => void) | null = null;
  /**
   * Called when a replica's command (or pipeline) is due, before it runs and before a freeze is waited out: a fault
   * may freeze the replica there (freeze-in-restore).
   */
  beforeCommand: ((actor: Actor, commands: ReadonlyArray<readonly [name: string, args: unknown[]]>) => void) | null =
    null;

  constructor(private readonly clock: () => number) {}

  now(): number {
    return this.clock();
  }

  get(key: string): RedisValue | undefined {
    const at = this.expires.get(key);
    if (at !== undefined && at <= this.clock()) {
      this.data.delete(key);
      this.expires.delete(key);
    }
    const v = this.data.get(key);
    if (v !== undefined) this.touched.set(key, ++this.touches);
    return v;
  }

  set(key: string, value: RedisValue, pxMs?: number): void {
    this.data.set(key, value);
    this.touched.set(key, ++this.touches);
    if (pxMs === undefined) this.expires.delete(key);
    else this.expires.set(key, this.clock() + pxMs);
  }

  del(key: string): boolean {
    const had = this.get(key) !== undefined;
    this.data.delete(key);
    this.expires.delete(key);
    this.touched.delete(key);
    return had;
  }

  pexpire(key: string, ms: number): void {
    if (this.get(key) !== undefined) this.expires.set(key, this.clock() + ms);
  }

  /** Every key whose name matches the glob `pattern` (only `*` is special in the bridge's patterns). */
  keys(pattern: string): string[] {
    const re = new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`, 's');
    return [...this.data.keys()].filter((k) => re.test(k) && this.get(k) !== undefined).sort();
  }

  /**
   * A write command of a script (lua-models.ts): refused on a read-only replica, and under OOM when it is DENYOOM
   * and the script wrote nothing yet (Redis 7's scriptVerifyOOM for scripts without flags, as the bridge's are).
   */
  write(command: string): void {
    if (this.refuseWrites !== null) {
      const oom = this.refuseWrites.startsWith('OOM');
      if (!oom || (!this.scriptDirty && DENYOOM.has(command))) {
        throw new ScriptErrorReply(`${this.refuseWrites} script: sim, on @user_script:1.`);
      }
    }
    this.scriptDirty = true;
  }

  /** The approximate memory the keys use (names, values, a per-key overhead), as maxmemory counts it. */
  used(): number {
    let bytes = 0;
    for (const [key, v] of this.data) {
      bytes += 50 + key.length;
      if (v.t === 'str') bytes += v.v.length;
      else if (v.t === 'zset') for (const m of v.v.keys()) bytes += 16 + m.length;
      else for (const [f, b] of v.v) bytes += 16 + f.length + b.length;
    }
    return bytes;
  }

  /** allkeys-lru: evicts the least recently used keys until the used memory fits maxmemory. */
  private evict(): void {
    if (this.maxmemory === null) return;
    let used = this.used();
    while (used > this.maxmemory && this.data.size > 0) {
      let oldest: string | null = null;
      let at = Infinity;
      for (const k of this.data.keys()) {
        const t = this.touched.get(k) ?? 0;
        if (t < at) [oldest, at] = [k, t];
      }
      this.del(oldest!);
      this.evicted += 1;
      this.evictions.push({ key: oldest!, at: this.clock() });
      used = this.used();
    }
  }

  /** Whether the next command loses its reply (every n-th while the window is open); counts it. */
  takeLostReply(): LostReplies | null {
    const lose = this.loseReplies;
    if (!lose || ++this.lostCount % lose.every !== 0) return null;
    this.lostReplies += 1;
    return lose;
  }

  /** Runs one command (atomically: nothing else runs meanwhile); throws its error reply. */
  run(name: string, args: unknown[]): unknown {
    this.commands += 1;
    // Redis evicts before running any command when over maxmemory (performEvictions in processCommand).
    this.evict();
    const script = SCRIPTS.has(name);
    if (this.refuseWrites !== null && WRITES.has(name) && !script) {
      if (!this.refuseWrites.startsWith('OOM') || DENYOOM.has(name.toUpperCase())) {
        throw new ScriptErrorReply(this.refuseWrites);
      }
    }
    this.scriptDirty = false;
    if (WRITES.has(name)) this.remember();
    const a = args as Arg[];
    const s = (i: number): string => String(a[i]);
    switch (name) {
      case 'get':
        return this.getString(s(0));
      case 'set': {
        const flags = a.slice(2).map(String);
        if (flags.includes('NX') && this.get(s(0)) !== undefined) return null;
        const px = flags.indexOf('PX');
        const ex = flags.indexOf('EX');
        const ttl = px >= 0 ? Number(flags[px + 1]) : ex >= 0 ? Number(flags[ex + 1]) * 1000 : undefined;
        this.set(s(0), { t: 'str', v: Buffer.isBuffer(a[1]) ? a[1].toString('utf8') : s(1) }, ttl);
        return 'OK';
      }
      case 'getdel': {
        const v = this.getString(s(0));
        this.del(s(0));
        return v;
      }
      case 'exists':
        return a.filter((k) => this.get(String(k)) !== undefined).length;
      case 'del':
      case 'unlink':
        return a.filter((k) => this.del(String(k))).length;
      case 'pttl': {
        if (this.get(s(0)) === undefined) return -2;
        const at = this.expires.get(s(0));
        return at === undefined ? -1 : at - this.clock();
      }
      case 'hset': {
        const h = this.hash(s(0), true)!;
        let added = 0;
        for (let i = 1; i + 1 < a.length; i += 2) {
          if (!h.has(s(i))) added += 1;
          h.set(s(i), Buffer.isBuffer(a[i + 1]) ? (a[i + 1] as Buffer) : Buffer.from(s(i + 1)));
        }
        return added;
      }
      case 'hdel': {
        const h = this.hash(s(0), false);
        if (!h) return 0;
        let removed = 0;
        for (let i = 1; i < a.length; i++) if (h.delete(s(i))) removed += 1;
        if (h.size === 0) this.del(s(0));
        return removed;
      }
      case 'hget':
        return this.hash(s(0), false)?.get(s(1))?.toString('utf8') ?? null;
      case 'hexists':
        return this.hash(s(0), false)?.has(s(1)) ? 1 : 0;
      case 'hmget': {
        const h = this.hash(s(0), false);
        return a.slice(1).map((f) => h?.get(String(f))?.toString('utf8') ?? null);
      }
      case 'hlen':
        return this.hash(s(0), false)?.size ?? 0;
      case 'hgetall':
        return Object.fromEntries(
          [...(this.hash(s(0), false) ?? new Map<string, Buffer>())].map(([f, v]) => [f, v.toString('utf8')]),
        );
      case 'hgetallBuffer':
        return Object.fromEntries([...(this.hash(s(0), false) ?? new Map<string, Buffer>())]);
      case 'hmgetBuffer': {
        const h = this.hash(s(0), false);
        return a.slice(1).map((f) => h?.get(String(f)) ?? null);
      }
      case 'scan': {
        const match = a.indexOf('MATCH');
        return ['0', this.keys(match >= 0 ? String(a[match + 1]) : '*')];
      }
      case 'wait':
        return 0;
      case 'bridgeCommit':
      case 'bridgeRemove': {
        const n = Number(a[0]);
        const keys = a.slice(1, 1 + n).map(String);
        const argv = a.slice(1 + n);
        if (name === 'bridgeCommit') this.beforeCommit?.(keys.slice(4));
        return name === 'bridgeCommit' ? commitScript(this, keys, argv) : removeScript(this, keys, argv);
      }
      case 'bridgeRestorePut':
      case 'bridgeSealBuckets': {
        const n = Number(a[0]);
        const keys = a.slice(1, 1 + n).map(String);
        return name === 'bridgeRestorePut'
          ? restorePutScript(this, keys, a.slice(1 + n))
          : sealBucketsScript(this, keys);
      }
      case 'eval': {
        // The one inline script the adapters send (src/redis/fingerprint-key.ts's CONFIRM).
        if (String(a[0]) !== CONFIRM_COPY_SCRIPT) throw new Error('the simulated Redis has no model of this script');
        const n = Number(a[1]);
        return confirmCopyScript(this, a.slice(2, 2 + n).map(String), a.slice(2 + n));
      }
      case 'bridgeEpochFloor':
        return epochFloorScript(this, [s(0)], [a[1]!]);
      case 'bridgeResyncTake':
        return resyncTakeScript(this, [s(0), s(1)]);
      case 'bridgeResyncDone':
        return resyncDoneScript(this, [s(0)], [a[1]!]);
      case 'bridgeLeaseAcquire':
        return leaseAcquireScript(this, [s(0), s(1)], [a[2]!, a[3]!]);
      case 'bridgeLeaseRelease':
        return leaseReleaseScript(this, [s(0)], [a[1]!]);
      case 'bridgeReplicaBeat':
        return replicaBeatScript(this, [s(0)], [a[1]!, a[2]!, a[3]!]);
      default:
        throw new Error(`the simulated Redis has no command ${name}`);
    }
  }

  private getString(key: string): string | null {
    const v = this.get(key);
    if (!v) return null;
    if (v.t !== 'str') throw new ScriptErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
    return v.v;
  }

  private hash(key: string, create: boolean): Map<string, Buffer> | null {
    const v = this.get(key);
    if (v) {
      if (v.t !== 'hash')
        throw new ScriptErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
      return v.v;
    }
    if (!create) return null;
    const h = new Map<string, Buffer>();
    this.data.set(key, { t: 'hash', v: h });
    return h;
  }

  private remember(): void {
    const data = new Map<string, RedisValue>();
    for (const [k, v] of this.data) data.set(k, copyValue(v));
    this.history.push({ data, expires: new Map(this.expires) });
    if (this.history.length > 8) this.history.shift();
  }

  /** A digest of every key, its value byte for byte and its expiry (the replay test). */
  digest(): string {
    const h = createHash('sha256');
    for (const key of [...this.data.keys()].sort()) {
      const v = this.data.get(key)!;
      h.update(JSON.stringify([key, v.t, this.expires.get(key) ?? null]));
      if (v.t === 'str') h.update(v.v);
      else if (v.t === 'zset') h.update(JSON.stringify([...v.v].sort()));
      else for (const f of [...v.v.keys()].sort()) h.update(JSON.stringify(f)).update(v.v.get(f)!);
    }
    return h.digest('hex');
  }

  /** The holder named by a lease key now (null: none). */
  leaseHolder(key: string): string | null {
    const v = this.get(key);
    return v?.t === 'str' ? v.v.slice(0, v.v.lastIndexOf('|')) : null;
  }

  /** Every key gone (a restart without persistence, a flush). */
  flush(): void {
    this.data.clear();
    this.expires.clear();
    this.touched.clear();
  }

  /** Some keys matching `pattern` gone (eviction, a key deleted by hand); `pick` chooses which. */
  lose(pattern: string, pick: (keys: string[]) => string[]): string[] {
    const lost = pick(this.keys(pattern));
    for (const k of lost) this.del(k);
    return lost;
  }

  /**
   * A failover to a replica that had not received the last `writes` writes; resolves how many were lost. The keys
   * matching `keep` keep their last writes (the leases and epoch counters, unless the schedule loses those too).
   */
  failover(writes: number, keep: RegExp | null = null): number {
    const n = Math.min(writes, this.history.length);
    if (n === 0) return 0;
    const back = this.history[this.history.length - n]!;
    this.history.splice(this.history.length - n);
    this.goBackTo(back, keep);
    return n;
  }

  /** A copy of every key and its expiry now (what a replica far behind, or a backup, would hold later). */
  copy(): { data: Map<string, RedisValue>; expires: Map<string, number> } {
    return this.copyOf(this);
  }

  /** Redis back to a copy taken earlier (a failover to a replica far behind, a backup restored); see failover. */
  rollBack(to: { data: Map<string, RedisValue>; expires: Map<string, number> }, keep: RegExp | null): void {
    const back = this.copyOf(to);
    this.history = [];
    this.goBackTo(back, keep);
  }

  private copyOf(from: { data: Map<string, RedisValue>; expires: Map<string, number> }) {
    const data = new Map<string, RedisValue>();
    for (const [k, v] of from.data) data.set(k, copyValue(v));
    return { data, expires: new Map(from.expires) };
  }

  private goBackTo(back: { data: Map<string, RedisValue>; expires: Map<string, number> }, keep: RegExp | null): void {
    if (keep) {
      for (const k of back.data.keys()) if (keep.test(k) && !this.data.has(k)) back.data.delete(k);
      for (const [k, v] of this.data) {
        if (!keep.test(k)) continue;
        back.data.set(k, v);
        const at = this.expires.get(k);
        if (at === undefined) back.expires.delete(k);
        else back.expires.set(k, at);
      }
    }
    this.data = back.data;
    this.expires = back.expires;
  }
}

/** How long ioredis takes to fail a command whose connection broke (reconnects with maxRetriesPerRequest 2). */
const LOST_REPLY_GIVE_UP_MS = 1_400;

/** A pipeline of the simulated client: commands queued, sent in one step. */
class SimPipeline {
  private readonly queue: Command[] = [];

  constructor(private readonly client: SimRedisClient) {
    return new Proxy(this, {
      get: (target, prop, receiver) => {
        if (prop in target || typeof prop !== 'string') return Reflect.get(target, prop, receiver);
        return (...args: unknown[]) => {
          target.queue.push([prop, args]);
          return receiver;
        };
      },
    });
  }

  exec(): Promise<[Error | null, unknown][]> {
    const queue = this.queue.splice(0);
    return this.client.call(
      `redis ${queue.map(([n]) => n).join(',')}`,
      () =>
        queue.map(([name, args]): [Error | null, unknown] => {
          try {
            return [null, this.client.server.run(name, args)];
          } catch (err) {
            return [err as Error, null];
          }
        }),
      queue,
    );
  }
}

/** One replica's connection to the simulated Redis, with the client API the bridge's Redis adapter uses. */
export class SimRedisClient {
  readonly durability = { replicas: 0, timeoutMs: 1_000 };

  constructor(
    readonly world: World,
    readonly actor: Actor,
    readonly server: SimRedisServer,
  ) {
    return new Proxy(this, {
      get: (target, prop, receiver) => {
        if (prop in target || typeof prop !== 'string' || prop === 'then') return Reflect.get(target, prop, receiver);
        return (...args: unknown[]) =>
          target.call(`redis ${prop}`, () => target.server.run(prop, args), [[prop, args]]);
      },
    });
  }

  /**
   * One round trip: a step of the replica running `fn` on the server. A lost reply (LostReplies) is resent as ioredis
   * does (the command may run twice) or fails the call as a broken connection does, once the client gives up.
   */
  async call<T>(label: string, fn: () => T, commands: readonly Command[] = []): Promise<T> {
    const lost: { as: LostReplies | null } = { as: null };
    const before = (): void => this.server.beforeCommand?.(this.actor, commands);
    const result = await this.world.step(
      this.actor,
      label,
      () => {
        lost.as = this.server.takeLostReply();
        if (lost.as === null) return fn();
        if (lost.as.ran) {
          try {
            fn();
          } catch {
            // The reply, an error or not, is lost with the connection.
          }
        }
        return undefined as T;
      },
      before,
    );
    const as = lost.as as LostReplies | null;
    if (as === null) return result;
    if (as.resend) return this.world.step(this.actor, `${label} resent`, fn);
    await this.world.sleeper(this.actor)(LOST_REPLY_GIVE_UP_MS);
    throw new Error('Connection is closed.');
  }

  pipeline(): SimPipeline {
    return new SimPipeline(this);
  }

  on(): this {
    return this;
  }

  /** As the adapter's type (the simulated client answers every command the adapter sends). */
  asBridgeRedis(): BridgeRedis {
    return this as unknown as BridgeRedis;
  }
}
