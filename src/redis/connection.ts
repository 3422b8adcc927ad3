import { readFileSync } from 'node:fs';
import { Cluster, Redis, type ChainableCommander, type RedisOptions } from 'ioredis';
import type { RedisConnection, RedisTarget, TlsFiles } from '../config/config.js';
import type { ReplicaRegistry } from '../core/ports.js';
import { readSecretSync, readTlsFiles, type SecretSource } from '../config/secrets.js';
import { ReplicationError } from '../core/errors.js';

// The Redis adapter: one client per process (a single server, a Sentinel-monitored primary, or a Redis Cluster)
// with the bridge's Lua scripts defined once (ioredis sends EVALSHA and falls back to EVAL after a restart flushed
// the script cache), the durability every write needs, and the key layout in one place.

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

/** The bridge's scripts as client commands. */
export interface BridgeScripts {
  bridgeCommit(...args: (string | Buffer | number)[]): Promise<number>;
  bridgeRemove(...args: (string | Buffer | number)[]): Promise<number>;
  bridgeRestorePut(...args: (string | Buffer | number)[]): Promise<number>;
  bridgeSealBuckets(...args: (string | number)[]): Promise<number>;
  bridgeEpochFloor(epochKey: string, floor: string): Promise<number>;
  bridgeResyncTake(pending: string, active: string): Promise<string | null>;
  bridgeResyncDone(active: string, request: string): Promise<number>;
  bridgeLeaseAcquire(lease: string, epoch: string, holder: string, ttlMs: number): Promise<number>;
  bridgeLeaseRelease(lease: string, holder: string): Promise<number>;
  bridgeReplicaBeat(registry: string, replica: string, ttlMs: number, mode: 'beat' | 'leave'): Promise<string[]>;
}

/** The same scripts queued on a pipeline (they then resolve through exec()). */
export interface BridgePipeline extends ChainableCommander {
  bridgeCommit(...args: (string | Buffer | number)[]): BridgePipeline;
  bridgeLeaseAcquire(lease: string, epoch: string, holder: string, ttlMs: number): BridgePipeline;
}

/** Replica acknowledgements a write needs before the bridge builds on it (Redis WAIT; 0 = none). */
export interface Durability {
  replicas: number;
  timeoutMs: number;
}

/** An ioredis client (single server or Sentinel: Redis; Redis Cluster: Cluster) with the bridge's scripts. */
export type BridgeRedis = (Redis | Cluster) & BridgeScripts & { readonly durability: Durability };

/** Re-exported from the one error model, where it is defined. */
export { ReplicationError };

/**
 * Connects to Redis (a redis:// URL or a configured target); commands fail fast while it is down. `options` carry
 * the ACL user, password and TLS (redisOptions); a file-mounted password (and the Sentinels' one) is re-read
 * before every reconnect.
 */
export function connectRedis(
  spec: string | RedisConnection,
  options: RedisOptions = {},
  passwordSource?: SecretSource | null,
  sentinelPasswordSource?: SecretSource | null,
): BridgeRedis {
  const connection: RedisConnection =
    typeof spec === 'string'
      ? { target: { kind: 'standalone', url: spec }, waitReplicas: 0, waitTimeoutMs: 1_000 }
      : spec;
  const common: RedisOptions = {
    maxRetriesPerRequest: 2,
    enableAutoPipelining: false,
    retryStrategy: (attempt) => Math.min(200 * 2 ** attempt, 5_000),
    lazyConnect: false,
    // A primary demoted by a failover answers writes with READONLY: reconnect (to the new primary) and resend;
    // READONLY means the write was not executed, so resending cannot apply it twice.
    // The refusal is told as an 'error' event too: a Redis that stays read-only (a replica named as the primary)
    // retries every write for ever, and the event is what names it (src/app/dependencies.ts).
    reconnectOnError: (err) => {
      if (!err.message.startsWith('READONLY')) return false;
      client.emit('error', err);
      return 2;
    },
    ...options,
  };
  const { target } = connection;
  let client: Redis | Cluster;
  if (target.kind === 'cluster') {
    client = new Cluster(target.nodes, {
      redisOptions: common,
      // With TLS the seed names are kept (not resolved to addresses first), so each certificate is checked
      // against the name the operator gave; the nodes found later are checked against what the Cluster announces.
      ...(common.tls
        ? { dnsLookup: (address: string, done: (err: null, address: string) => void) => done(null, address) }
        : {}),
      scaleReads: 'master',
      enableAutoPipelining: false,
      // After a primary dies, the cluster needs its node timeout plus an election to promote the replica.
      retryDelayOnFailover: 300,
      retryDelayOnClusterDown: 300,
      retryDelayOnTryAgain: 300,
      maxRedirections: 16,
      clusterRetryStrategy: (attempt) => Math.min(200 * 2 ** attempt, 5_000),
    });
  } else if (target.kind === 'sentinel') {
    client = new Redis({
      ...common,
      sentinels: target.sentinels,
      name: target.name,
      role: 'master',
      // Subscribes to the Sentinels' +switch-master, so a failover moves the connection at once.
      failoverDetector: true,
    });
    // quit() leaves the detector's Sentinel subscriptions open, so a command like `status` would never exit
    // (redis/ioredis#1362); disconnect() closes them once the client has ended.
    client.once('end', () => client.disconnect());
  } else {
    client = new Redis(target.url, common);
  }
  // A rotated password needs no restart (a Cluster keeps the one it was given: its nodes reconnect on their own).
  if ((passwordSource || sentinelPasswordSource) && client instanceof Redis) {
    const redis = client;
    redis.on('reconnecting', () => {
      try {
        if (passwordSource) redis.options.password = readSecretSync(passwordSource, 'Redis password');
        if (sentinelPasswordSource) {
          // The Sentinel connector reads the same options object when it asks the Sentinels again.
          redis.options.sentinelPassword = readSecretSync(sentinelPasswordSource, 'Redis Sentinel password');
        }
      } catch {
        // Keep the last password; the failed AUTH is reported through failed commands.
      }
    });
  }
  // The error event fires on every failed reconnect; the bridge reports outages through failed commands.
  client.on('error', () => undefined);
  client.defineCommand('bridgeCommit', { lua: lua('commit') });
  client.defineCommand('bridgeRemove', { lua: lua('remove') });
  client.defineCommand('bridgeRestorePut', { lua: lua('restore-put') });
  client.defineCommand('bridgeSealBuckets', { lua: lua('seal-buckets') });
  client.defineCommand('bridgeEpochFloor', { numberOfKeys: 1, lua: lua('epoch-floor') });
  client.defineCommand('bridgeResyncTake', { numberOfKeys: 2, lua: lua('resync-take') });
  client.defineCommand('bridgeResyncDone', { numberOfKeys: 1, lua: lua('resync-done') });
  client.defineCommand('bridgeLeaseAcquire', { numberOfKeys: 2, lua: lua('lease-acquire') });
  client.defineCommand('bridgeLeaseRelease', { numberOfKeys: 1, lua: lua('lease-release') });
  client.defineCommand('bridgeReplicaBeat', { numberOfKeys: 1, lua: lua('replica-beat') });
  const durability: Durability = { replicas: connection.waitReplicas, timeoutMs: connection.waitTimeoutMs };
  return Object.assign(client, { durability }) as BridgeRedis;
}

/**
 * Runs the commands `queue` adds in one round trip and, when the client needs replica acknowledgements, a WAIT
 * after them on the same connection (on a Cluster: the node of their slot, since they all carry one {account}
 * tag). Resolves each command's result; throws its first error, or ReplicationError when WAIT comes back short.
 * WAIT covers every earlier write of this connection too, so a read confirmed this way is of replicated state.
 */
export async function durably(redis: BridgeRedis, queue: (pipeline: BridgePipeline) => void): Promise<unknown[]> {
  const { replicas, timeoutMs } = redis.durability;
  const exec = async () => {
    const pipeline = redis.pipeline() as BridgePipeline;
    queue(pipeline);
    if (replicas > 0) pipeline.wait(replicas, timeoutMs);
    return (await pipeline.exec()) ?? [];
  };
  let results = await exec();
  // ioredis follows a Cluster redirection for a pipeline only when every command got the same one; the keyless
  // WAIT (answered by the node, now a replica, or refused) never does. A MOVED first reply means the slot moved
  // (a failover) and the command did not run: learn the new owner and send it once more.
  if (redis instanceof Cluster && /^(MOVED|ASK|CLUSTERDOWN) /.test(results[0]?.[0]?.message ?? '')) {
    await new Promise<void>((resolve) => redis.refreshSlotsCache(() => resolve()));
    results = await exec();
  }
  const values = results.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
  if (replicas > 0) {
    const acknowledged = Number(values.pop());
    if (acknowledged < replicas) throw new ReplicationError(replicas, acknowledged, timeoutMs);
  }
  return values;
}

/** Key names of one account. The {account} hash tag keeps them in one Redis Cluster slot for the scripts. */
export function accountKeys(prefix: string, account: string) {
  const base = `${prefix}:{${account}}`;
  return {
    epoch: `${base}:epoch`,
    lease: `${base}:lease`,
    checkpoint: `${base}:checkpoint`,
    count: `${base}:count`,
    /** Every snapshot bucket that exists (field = bucket number), and 'v': a lost bucket is told from a new one. */
    manifest: `${base}:manifest`,
    sweepRequest: `${base}:sweep-request`,
    /** An operator's request for a full restore of the snapshot from the Kafka changelog. */
    restoreRequest: `${base}:restore-request`,
    /** Operator pause flag (value: when it was paused, ms); kept until resumed, whoever leads. */
    paused: `${base}:paused`,
    /** An operator's checkpoint change (JSON: the watermark to rewind to), taken by the leader while paused. */
    checkpointRequest: `${base}:checkpoint-request`,
    /** A pending resync request (JSON of its scope), taken by the leader like the sweep request. */
    resyncRequest: `${base}:resync-request`,
    /** The resync the leader runs (moved from resyncRequest), kept until it completes: a new leader resumes it. */
    resyncActive: `${base}:resync-active`,
    /** Why a replica's leadership was refused (JSON), for `status`; removed once a leadership is readied. */
    refused: `${base}:refused`,
    /** Progress of the running sweep or resync (JSON), written by the leader for `status`. */
    progress: `${base}:progress`,
    deadLettered: (digest: string) => `${base}:dlq:${digest}`,
    /** Reviews reported deleted: id -> the sequence of their review.deleted (a comeback continues after it). */
    gone: `${base}:gone`,
    bucket: (bucket: number) => `${base}:s:${bucket}`,
    bucketPattern: `${base}:s:*`,
  };
}

/** Key of the registry of the live replicas of a deployment (all accounts under one key prefix). */
const replicasKey = (prefix: string) => `${prefix}:replicas`;

/** The registry of the live replicas of a deployment, as the replicas beat into it. */
export function replicaRegistry(redis: BridgeRedis, prefix: string): ReplicaRegistry {
  const key = replicasKey(prefix);
  return {
    beat: (replica, ttlMs, leave = false) => redis.bridgeReplicaBeat(key, replica, ttlMs, leave ? 'leave' : 'beat'),
  };
}

/** The live replicas as `status` reads them (without beating): beaten within `ttlMs` by Redis's clock. */
export async function liveReplicas(redis: BridgeRedis, prefix: string, ttlMs: number): Promise<string[]> {
  const [time, scored] = await Promise.all([redis.time(), redis.zrange(replicasKey(prefix), '0', '-1', 'WITHSCORES')]);
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const live: string[] = [];
  for (let i = 0; i + 1 < scored.length; i += 2) if (now - Number(scored[i + 1]) <= ttlMs) live.push(scored[i]!);
  return live;
}

/**
 * The keys matching `pattern`, a batch per SCAN step. On a Cluster SCAN answers for one node only, so every primary
 * is scanned (an account's keys share one slot, so one of them holds them all).
 */
export async function* scanKeys(redis: BridgeRedis, pattern: string, count = 1000): AsyncGenerator<string[]> {
  const nodes: Array<Redis | BridgeRedis> = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (found.length > 0) yield found;
    } while (cursor !== '0');
  }
}

/** The key names of one account (see accountKeys). */
export type AccountKeys = ReturnType<typeof accountKeys>;

/** What redisOptions reads: the target (or its URL) and the credentials kept out of the URL. */
export interface RedisAuth {
  target?: RedisTarget;
  url?: string;
  username?: string | null;
  password?: SecretSource | null;
  tls?: TlsFiles;
  /** TLS to every member of a Sentinel or Cluster target (REDIS_TLS); a rediss:// URL is TLS by itself. */
  tlsEnabled?: boolean;
  /** Credentials of the Sentinels themselves (a Sentinel target only). */
  sentinelUsername?: string | null;
  sentinelPassword?: SecretSource | null;
}

/**
 * ioredis options of the configuration: ACL user and password (kept out of the URL) and TLS, for every connection
 * the client opens. On a Sentinel target TLS covers the Sentinels (sentinelTLS) and the primary they announce
 * (enableTLSForSentinelMode), and the Sentinels get credentials of their own (sentinelUsername/sentinelPassword);
 * on a Cluster, connectRedis hands the same options to every node.
 */
export function redisOptions(config: RedisAuth): RedisOptions {
  const options: RedisOptions = {};
  if (config.username) options.username = config.username;
  if (config.password) options.password = readSecretSync(config.password, 'Redis password');
  const url = config.url ?? (config.target?.kind === 'standalone' ? config.target.url : '');
  if (url.startsWith('rediss://') || config.tlsEnabled) options.tls = readTlsFiles(config.tls);
  if (config.target?.kind === 'sentinel') {
    if (options.tls) {
      options.enableTLSForSentinelMode = true;
      options.sentinelTLS = options.tls;
    }
    if (config.sentinelUsername) options.sentinelUsername = config.sentinelUsername;
    if (config.sentinelPassword) {
      options.sentinelPassword = readSecretSync(config.sentinelPassword, 'Redis Sentinel password');
    }
  }
  return options;
}

/** The client of a configuration: redisOptions, with the password files re-read at every reconnect. */
export function connectRedisFromConfig(config: RedisConnection & RedisAuth): BridgeRedis {
  return connectRedis(config, redisOptions(config), config.password, config.sentinelPassword);
}

/** How long redisConnectionProblem waits for a connection that has failed once to succeed on a retry. */
const ERROR_SETTLE_MS = 1_500;

/**
 * Resolves null once `client` is connected, else the failure to report after `ms` (or soon after a first error): the connection's last error
 * (refused, unknown host, authentication, TLS), or a timeout when it gave none. A command sent meanwhile would wait
 * for ioredis's retries and fail with "Reached the max retries per request limit", which names neither Redis nor a
 * setting.
 */
export function redisConnectionProblem(client: Redis | Cluster, ms: number): Promise<unknown> {
  if (client.status === 'ready') return Promise.resolve(null);
  return new Promise((resolve) => {
    let last: unknown = null;
    let timer: NodeJS.Timeout;
    const onError = (err: unknown) => {
      // Refused or failed once: a reconnect or two more (ioredis retries within tens of ms at first) decide it,
      // rather than the whole wait, so that a command names a Redis that is down in a second or two.
      if (last === null) {
        clearTimeout(timer);
        timer = setTimeout(() => done(last), Math.min(ms, ERROR_SETTLE_MS));
      }
      last = err;
    };
    const done = (value: unknown) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      resolve(value);
    };
    const onReady = () => done(null);
    timer = setTimeout(() => done(last ?? new Error(`Redis did not answer within ${ms} ms`)), ms);
    client.on('ready', onReady);
    client.on('error', onError);
  });
}

/**
 * Closes `client` now, failing the commands that wait for it. ioredis's disconnect() while it waits to reconnect
 * (Redis down) leaves the queued commands waiting for ever, and those sent after it join them: a shutdown would then
 * wait on a lease release or a beat that can never answer. Its queue is failed here as its own close handler would.
 */
export function closeRedisNow(client: Redis | Cluster): void {
  const waiting = client.status === 'reconnecting' || client.status === 'connecting';
  client.disconnect();
  if (!waiting || client.status === 'end' || !(client instanceof Redis)) return;
  const internals = client as unknown as { flushQueue(err: Error): void; setStatus(status: string): void };
  internals.setStatus('end');
  internals.flushQueue(new Error('Connection is closed.'));
}
