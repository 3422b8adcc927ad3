import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import type { RedisConnection, RedisTarget } from '../config/config.js';
import type { BridgeRedis } from './connection.js';

// Can the Redis topology meet REDIS_WAIT_REPLICAS? A WAIT for more replicas than a primary has never succeeds, so
// without this check the bridge retried for ever in silence (issue 24). Two cases differ: a replica that exists
// but is away (stopped, marked fail) will likely come back, so the bridge waits visibly; a primary that has no such
// replica at all is a configuration mistake, refused at start-up unless the operator chose to wait.

/** The replicas of one primary: those the topology knows of, and those connected now (what WAIT can count). */
export interface PrimaryReplicas {
  /** host:port of the primary (never credentials). */
  primary: string;
  known: number;
  connected: number;
}

/** Whether REDIS_WAIT_REPLICAS can be met, and if not why. */
export type DurabilityState =
  | { kind: 'ok' }
  | { kind: 'waiting'; primary: string; wanted: number; known: number; connected: number; since: number }
  | { kind: 'missing'; primary: string; wanted: number; known: number }
  | { kind: 'unknown'; reason: string };

/**
 * The pure decision: `missing` when a primary has fewer replicas than `wanted` in the topology, `waiting` when it
 * has them but fewer are connected (since the first check that saw it so, kept from `previous`), else `ok`.
 */
export function decideDurability(
  wanted: number,
  primaries: readonly PrimaryReplicas[],
  previous: DurabilityState,
  now: number,
): DurabilityState {
  if (wanted === 0) return { kind: 'ok' };
  if (primaries.length === 0) return { kind: 'unknown', reason: 'no Redis primary found' };
  const lacking = primaries.find((p) => p.known < wanted);
  if (lacking) return { kind: 'missing', primary: lacking.primary, wanted, known: lacking.known };
  const away = primaries.find((p) => p.connected < wanted);
  if (!away) return { kind: 'ok' };
  const since = previous.kind === 'waiting' ? previous.since : now;
  return { kind: 'waiting', primary: away.primary, wanted, known: away.known, connected: away.connected, since };
}

/** The one line the log, `status` and /readyz show for a state (null when durability can be met). */
export function durabilityMessage(state: DurabilityState): string | null {
  switch (state.kind) {
    case 'ok':
      return null;
    case 'unknown':
      return `Redis replicas unknown: ${state.reason}`;
    case 'missing':
      return (
        `Redis primary ${state.primary} has ${state.known} replica(s) but REDIS_WAIT_REPLICAS=${state.wanted}, ` +
        `so no write can be acknowledged: lower REDIS_WAIT_REPLICAS (0 accepts that a failover may lose the last ` +
        `commits), add a replica to that primary, or set REDIS_WAIT_FOR_REPLICAS=true to start and wait for one`
      );
    case 'waiting':
      return (
        `waiting for a replica since ${new Date(state.since).toISOString()}: Redis primary ${state.primary} has ` +
        `${state.connected} of ${state.known} replica(s) connected and REDIS_WAIT_REPLICAS=${state.wanted}; ` +
        `writes resume when one is back (or lower REDIS_WAIT_REPLICAS)`
      );
  }
}

/** The connected replicas a primary reports in INFO replication. */
export function parseConnectedReplicas(info: string): number {
  const match = /^connected_slaves:(\d+)/m.exec(info);
  return match ? Number(match[1]) : 0;
}

/** The primaries owning slots in CLUSTER NODES output, with their replicas (known, and not failed). */
export function parseClusterNodes(nodes: string): PrimaryReplicas[] {
  const lines = nodes
    .split('\n')
    .map((l) => l.trim().split(' '))
    .filter((f) => f.length >= 8);
  const address = (field: string) => field.split('@')[0]!.split(',')[0]!;
  const failed = (flags: string) => flags.split(',').some((f) => f === 'fail' || f === 'fail?' || f === 'noaddr');
  return lines
    .filter((f) => f[2]!.split(',').includes('master') && !failed(f[2]!) && f.length > 8)
    .map((p) => {
      const replicas = lines.filter((f) => f[2]!.split(',').includes('slave') && f[3] === p[0]);
      return {
        primary: address(p[1]!),
        known: replicas.length,
        connected: replicas.filter((f) => !failed(f[2]!) && f[7] === 'connected').length,
      };
    });
}

/**
 * Replicas known to the Sentinels for `name` (SENTINEL REPLICAS), or null when no Sentinel answers. `via` is the
 * bridge's client: its Sentinel TLS and credentials are the ones to use.
 */
async function sentinelReplicaCount(
  target: Extract<RedisTarget, { kind: 'sentinel' }>,
  via: Redis,
): Promise<number | null> {
  const { sentinelTLS, sentinelUsername, sentinelPassword } = via.options;
  for (const sentinel of target.sentinels) {
    const client = new Redis({
      host: sentinel.host,
      port: sentinel.port,
      ...(sentinelTLS ? { tls: sentinelTLS } : {}),
      ...(sentinelUsername ? { username: sentinelUsername } : {}),
      ...(sentinelPassword ? { password: sentinelPassword } : {}),
      lazyConnect: true,
      connectTimeout: 2_000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const replicas = (await client.call('SENTINEL', 'REPLICAS', target.name)) as unknown[];
      return replicas.length;
    } catch {
      // Try the next Sentinel.
    } finally {
      client.disconnect();
    }
  }
  return null;
}

/** Reads the replicas of every relevant primary: the one primary (single, Sentinel) or each slot owner (Cluster). */
export async function probeReplicas(redis: BridgeRedis, target: RedisTarget): Promise<PrimaryReplicas[]> {
  if (redis instanceof Cluster) return parseClusterNodes(String(await redis.cluster('NODES')));
  const connected = parseConnectedReplicas(await redis.info('replication'));
  const stream = (redis as Redis).stream;
  let primary = stream?.remoteAddress ? `${stream.remoteAddress}:${stream.remotePort}` : 'unknown';
  if (target.kind === 'standalone') {
    const url = new URL(target.url);
    primary = `${url.hostname}:${url.port || 6379}`;
  }
  // A single primary does not list a replica that went away; the Sentinels still do.
  const known =
    target.kind === 'sentinel' ? ((await sentinelReplicaCount(target, redis as Redis)) ?? connected) : connected;
  return [{ primary, known: Math.max(known, connected), connected }];
}

/** Options of {@link DurabilityWatch}. */
export interface DurabilityWatchOptions {
  logger: Logger;
  /** Period of the cheap re-check besides the topology events (default 10 s). */
  intervalMs?: number;
  now?: () => number;
}

/**
 * Keeps the durability state current: checked at start, every `intervalMs` and after a failover or a Cluster
 * topology change; logs each change of state once and exports reviews_bridge_redis_durability_unmet.
 */
export class DurabilityWatch {
  /** Holds the gauge; merged into the process's /metrics. */
  readonly registry = new Registry();
  private current: DurabilityState = { kind: 'ok' };
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<DurabilityState> | null = null;
  private readonly now: () => number;
  private readonly onEvent = () => void this.check();

  constructor(
    private readonly redis: BridgeRedis,
    private readonly connection: RedisConnection,
    private readonly options: DurabilityWatchOptions,
  ) {
    this.now = options.now ?? Date.now;
    new Gauge({
      name: 'reviews_bridge_redis_durability_unmet',
      help: '1 while a Redis primary has fewer connected replicas than REDIS_WAIT_REPLICAS (writes cannot be acknowledged).',
      registers: [this.registry],
      collect: () => undefined,
    });
    this.gauge().set(0);
  }

  /** The last state seen. */
  state(): DurabilityState {
    return this.current;
  }

  /** Checks now (concurrent callers share one check); a probe that fails leaves the last state unchanged. */
  check(): Promise<DurabilityState> {
    this.running ??= probeReplicas(this.redis, this.connection.target)
      .then(
        (primaries) => decideDurability(this.connection.waitReplicas, primaries, this.current, this.now()),
        (): DurabilityState => this.current,
      )
      .then((next) => {
        this.update(next);
        return next;
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** Re-checks periodically and on the client's topology events. */
  start(): void {
    if (this.connection.waitReplicas === 0 || this.timer) return;
    this.timer = setInterval(this.onEvent, this.options.intervalMs ?? 10_000);
    this.timer.unref();
    // Sentinel: the failover detector reconnects to the new primary ('ready'); Cluster: slots and nodes changed.
    for (const event of ['ready', 'refresh', '+node', '-node']) this.redis.on(event, this.onEvent);
  }

  /** Stops the re-checks. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const event of ['ready', 'refresh', '+node', '-node']) this.redis.off(event, this.onEvent);
  }

  private gauge(): Gauge {
    return this.registry.getSingleMetric('reviews_bridge_redis_durability_unmet') as Gauge;
  }

  private update(next: DurabilityState): void {
    const before = durabilityMessage(this.current);
    this.current = next;
    this.gauge().set(next.kind === 'waiting' || next.kind === 'missing' ? 1 : 0);
    const message = durabilityMessage(next);
    // Once per change of state: the 'since' of a waiting state does not change, so its message stays the same.
    if (message === before) return;
    if (next.kind === 'ok') this.options.logger.info('Redis durability met again: every primary has its replicas');
    else if (next.kind === 'unknown') this.options.logger.warn({ redisDurability: next.kind }, message!);
    else this.options.logger.error({ redisDurability: next.kind, primary: next.primary }, message!);
  }
}
