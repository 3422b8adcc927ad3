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
// keys that vanish (all, or some buckets), writes refused (OOM, READONLY) for a while, and a failover to a replica
// that had not received the last writes.

type Command = [name: string, args: unknown[]];

const WRITES = new Set([
  'set',
  'del',
  'unlink',
  'getdel',
  'hset',
  'hdel',
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

const copyValue = (v: RedisValue): RedisValue =>
  v.t === 'str' ? { ...v } : v.t === 'hash' ? { t: 'hash', v: new Map(v.v) } : { t: 'zset', v: new Map(v.v) };

/** The server: its keys, their expiry, and the writes a failover can lose. */
export class SimRedisServer implements ScriptData {
  data = new Map<string, RedisValue>();
  expires = new Map<string, number>();
  /** Copies of the data before each of the last writes (a failover goes back to one of them). */
  private history: Array<{ data: Map<string, RedisValue>; expires: Map<string, number> }> = [];
  /** Writes are refused with this reply while set (OOM, READONLY). */
  refuseWrites: string | null = null;
  /** Commands served (for the schedule's statistics). */
  commands = 0;

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
    return this.data.get(key);
  }

  set(key: string, value: RedisValue, pxMs?: number): void {
    this.data.set(key, value);
    if (pxMs === undefined) this.expires.delete(key);
    else this.expires.set(key, this.clock() + pxMs);
  }

  del(key: string): boolean {
    const had = this.get(key) !== undefined;
    this.data.delete(key);
    this.expires.delete(key);
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

  /** Runs one command (atomically: nothing else runs meanwhile); throws its error reply. */
  run(name: string, args: unknown[]): unknown {
    this.commands += 1;
    if (this.refuseWrites !== null && WRITES.has(name)) throw new ScriptErrorReply(this.refuseWrites);
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
    return n;
  }
}

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
    return this.client.world.step(this.client.actor, `redis ${queue.map(([n]) => n).join(',')}`, () =>
      queue.map(([name, args]): [Error | null, unknown] => {
        try {
          return [null, this.client.server.run(name, args)];
        } catch (err) {
          return [err as Error, null];
        }
      }),
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
          target.world.step(target.actor, `redis ${prop}`, () => target.server.run(prop, args));
      },
    });
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
