import { afterAll, beforeAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import type { RedisTarget } from '../../src/config/config.js';
import { ROOT, script } from './processes.js';
import { pollUntil } from './wait.js';

// The production-shaped topologies of the failover tests, run by the project's scripts on free loopback ports:
// a three-broker Kafka (scripts/kafka-cluster.sh), Redis with Sentinel or a Redis Cluster (scripts/redis-topology.sh).
// Members are addressed by port and stopped by pid inside the scripts; nothing here kills by name.

/** Where a test's Redis is: a redis:// URL (the shared server) or a topology's target. */
export type RedisAddress = string | RedisTarget;

/** A plain ioredis client (no bridge scripts) for tests' own reads and writes, whatever the topology. */
export function openRedis(address: RedisAddress, options: RedisOptions = {}): Redis | Cluster {
  const target: RedisTarget = typeof address === 'string' ? { kind: 'standalone', url: address } : address;
  let client: Redis | Cluster;
  if (target.kind === 'cluster') client = new Cluster(target.nodes, { redisOptions: options });
  else if (target.kind === 'sentinel')
    client = new Redis({ ...options, sentinels: target.sentinels, name: target.name, failoverDetector: true });
  else client = new Redis(target.url, options);
  client.on('error', () => undefined);
  return client;
}

/** The Redis address of a bridge environment (REDIS_SENTINELS, REDIS_CLUSTER_NODES or REDIS_URL). */
export function redisAddress(env: Record<string, string | undefined>): RedisAddress {
  const hostPorts = (list: string) =>
    list
      .split(',')
      .map((b) => ({ host: b.slice(0, b.lastIndexOf(':')), port: Number(b.slice(b.lastIndexOf(':') + 1)) }));
  if (env.REDIS_SENTINELS)
    return { kind: 'sentinel', sentinels: hostPorts(env.REDIS_SENTINELS), name: env.REDIS_SENTINEL_NAME ?? '' };
  if (env.REDIS_CLUSTER_NODES) return { kind: 'cluster', nodes: hostPorts(env.REDIS_CLUSTER_NODES) };
  return env.REDIS_URL ?? '';
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A base port whose `count` ports (and, for a Redis Cluster, their bus ports at +10000) are all free, picked at
 * random so that concurrent test runs on one machine do not collide.
 */
export async function freeBase(count: number, busOffset = 0): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const ports = Array.from({ length: count }, (_, i) => base + i);
    if (busOffset) ports.push(...ports.map((p) => p + busOffset));
    const free = await Promise.all(ports.map(portFree));
    if (free.every(Boolean)) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

/** A three-broker KRaft cluster (combined broker+controller members 1-3 on base..base+2). */
export class KafkaCluster {
  constructor(readonly base: number) {}

  /** Picks free ports. */
  static async onFreePorts(): Promise<KafkaCluster> {
    return new KafkaCluster(await freeBase(6));
  }

  get brokers(): string[] {
    return [0, 1, 2].map((i) => `127.0.0.1:${this.base + i}`);
  }

  /** Starts the members (default all three) and waits until a topic with as many replicas can be created. */
  start(members: readonly number[] = [1, 2, 3]): Promise<string> {
    return script('kafka-cluster.sh', ['start', String(this.base)], 300_000, {
      KAFKA_CLUSTER_MEMBERS: members.join(' '),
    });
  }

  /** Stops every member and deletes the data. */
  clean(): Promise<string> {
    return script('kafka-cluster.sh', ['stop', String(this.base), '--clean']);
  }

  /** SIGKILL of member 1-3 (data kept). */
  kill(member: number): Promise<string> {
    return script('kafka-cluster.sh', ['kill', String(member), String(this.base)]);
  }

  /** Starts member 1-3 again and waits until all three serve. */
  startMember(member: number): Promise<string> {
    return script('kafka-cluster.sh', ['start-member', String(member), String(this.base)]);
  }

  /** Graceful stop of member 1-3 (data kept): it leaves the cluster's registered brokers. */
  stopMember(member: number): Promise<string> {
    return script('kafka-cluster.sh', ['stop-member', String(member), String(this.base)]);
  }

  /** How many brokers the cluster's metadata lists as registered now. */
  async registeredBrokers(): Promise<number> {
    const admin = this.admin();
    await admin.connect();
    try {
      return (await admin.describeCluster()).brokers.length;
    } finally {
      await admin.disconnect();
    }
  }

  private admin() {
    return new Kafka({ clientId: 'topology-test', brokers: this.brokers, logLevel: logLevel.NOTHING }).admin();
  }

  /** Replicas of partition 0 and min.insync.replicas of a topic. */
  async topicSettings(topic: string): Promise<{ replicas: number; minInsyncReplicas: string | undefined }> {
    const admin = this.admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas'] }],
      });
      return {
        replicas: topics[0]?.partitions[0]?.replicas.length ?? 0,
        minInsyncReplicas: resources[0]?.configEntries[0]?.configValue,
      };
    } finally {
      await admin.disconnect();
    }
  }

  /** The member (1-3) leading a partition of a topic. */
  async leaderOf(topic: string, partition = 0): Promise<number> {
    const admin = this.admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      const leader = topics[0]?.partitions.find((p) => p.partitionId === partition)?.leader;
      if (leader === undefined) throw new Error(`no leader for ${topic}/${partition}`);
      return leader; // node.id = member number (scripts/kafka-cluster.sh)
    } finally {
      await admin.disconnect();
    }
  }
}

/** Redis with Sentinel (primary base, replica base+1, Sentinels base+2..+4) or a Redis Cluster (base..base+5). */
export class RedisTopology {
  constructor(
    readonly kind: 'sentinel' | 'cluster',
    readonly base: number,
    /** Replicas per Cluster primary (0: three bare primaries, as `redis-cli --cluster create` makes by default). */
    readonly clusterReplicas: 0 | 1 = 1,
    /** Secured (REDIS_TOPOLOGY_TLS): TLS only, client certificates required, ACL users, the default user off. */
    readonly tls = false,
  ) {}

  /** Picks free ports. */
  static async onFreePorts(
    kind: 'sentinel' | 'cluster',
    clusterReplicas: 0 | 1 = 1,
    tls = false,
  ): Promise<RedisTopology> {
    const base = kind === 'cluster' ? await freeBase(6, 10_000) : await freeBase(5);
    return new RedisTopology(kind, base, clusterReplicas, tls);
  }

  /** A topology on free ports, started before the file's tests and stopped after them. */
  static async forFile(kind: 'sentinel' | 'cluster', clusterReplicas: 0 | 1 = 1, tls = false): Promise<RedisTopology> {
    const topology = await RedisTopology.onFreePorts(kind, clusterReplicas, tls);
    beforeAll(() => topology.start(), 60_000);
    afterAll(() => topology.stop(), 60_000);
    return topology;
  }

  /** Where the script writes a secured topology's certificates and passwords (see scripts/redis-topology.sh). */
  get tlsDir(): string {
    return `${ROOT}.run/redis-${this.kind}-${this.base}/tls`;
  }

  /** The bridge's Redis settings for this topology (REDIS_URL blank: exactly one target may be set). */
  get env(): Record<string, string> {
    // A secured topology is named as its certificate names it.
    const host = this.tls ? 'localhost' : '127.0.0.1';
    const list = (from: number, n: number) => Array.from({ length: n }, (_, i) => `${host}:${from + i}`).join(',');
    const secured: Record<string, string> = this.tls
      ? {
          REDIS_TLS: 'true',
          REDIS_TLS_CA_FILE: `${this.tlsDir}/ca.pem`,
          REDIS_TLS_CERT_FILE: `${this.tlsDir}/client.pem`,
          REDIS_TLS_KEY_FILE: `${this.tlsDir}/client.key`,
          REDIS_USERNAME: 'bridge',
          REDIS_PASSWORD_FILE: `${this.tlsDir}/bridge.password`,
          ...(this.kind === 'sentinel'
            ? { REDIS_SENTINEL_USERNAME: 'bridge', REDIS_SENTINEL_PASSWORD_FILE: `${this.tlsDir}/bridge.password` }
            : {}),
        }
      : {};
    return this.kind === 'sentinel'
      ? // The failover tests check that replica-confirmed commits never go back: they ask for one replica.
        {
          REDIS_URL: '',
          REDIS_SENTINELS: list(this.base + 2, 3),
          REDIS_SENTINEL_NAME: 'bridge',
          REDIS_WAIT_REPLICAS: '1',
          ...secured,
        }
      : {
          REDIS_URL: '',
          REDIS_CLUSTER_NODES: list(this.base, 3 * (1 + this.clusterReplicas)),
          REDIS_WAIT_REPLICAS: this.clusterReplicas > 0 ? '1' : '',
          ...secured,
        };
  }

  /**
   * ioredis options of the topology's admin user for a secured topology (TLS with the client certificate, to the
   * members and, through a Sentinel target, to the Sentinels); none for a plain one.
   */
  adminOptions(): RedisOptions {
    if (!this.tls) return {};
    const tls = {
      ca: readFileSync(`${this.tlsDir}/ca.pem`),
      cert: readFileSync(`${this.tlsDir}/client.pem`),
      key: readFileSync(`${this.tlsDir}/client.key`),
    };
    const password = readFileSync(`${this.tlsDir}/admin.password`, 'utf8').trim();
    return {
      tls,
      username: 'admin',
      password,
      ...(this.kind === 'sentinel'
        ? { enableTLSForSentinelMode: true, sentinelTLS: tls, sentinelUsername: 'admin', sentinelPassword: password }
        : {}),
    };
  }

  get address(): RedisTarget {
    return redisAddress(this.env) as RedisTarget;
  }

  async start(): Promise<string> {
    const out = await this.script([this.kind, 'start', String(this.base)], {
      REDIS_TOPOLOGY_TLS: this.tls ? 'yes' : 'no',
    });
    if (this.kind === 'cluster' && this.clusterReplicas > 0) await this.replicasAttached();
    return out;
  }

  // A new Cluster serves its slots before every replica has attached; a bridge started then would find a primary
  // without the replica REDIS_WAIT_REPLICAS asks for and refuse to start.
  private async replicasAttached(): Promise<void> {
    const client = openRedis(this.address, { maxRetriesPerRequest: 1, ...this.adminOptions() });
    try {
      let nodes = '';
      await pollUntil(
        async () => {
          nodes = String(await (client as Cluster).cluster('NODES').catch(() => ''));
          const replicas = nodes.split('\n').filter((l) => (l.split(' ')[2] ?? '').split(',').includes('slave'));
          return replicas.length >= 3 * this.clusterReplicas ? true : undefined;
        },
        {
          timeoutMs: 60_000,
          what: "the Cluster's replicas",
          intervalMs: 200,
          onTimeout: () => new Error(`the Cluster's replicas did not attach: ${nodes}`),
        },
      );
    } finally {
      client.disconnect();
    }
  }

  /** Stops every member (by pid) and deletes the run directory. */
  stop(): Promise<string> {
    return this.script([this.kind, 'stop', String(this.base)]);
  }

  /** SIGKILL of the member on `port` (its append-only file is kept). */
  kill(port: number): Promise<string> {
    return this.script([this.kind, 'kill', String(port), String(this.base)]);
  }

  /** Starts the member on `port` again on its data. */
  startMember(port: number): Promise<string> {
    return this.script([this.kind, 'start-member', String(port), String(this.base)]);
  }

  private script(args: string[], env: Record<string, string> = {}): Promise<string> {
    return script('redis-topology.sh', args, 300_000, { REDIS_CLUSTER_REPLICAS: String(this.clusterReplicas), ...env });
  }

  /** A direct connection to one member (for SENTINEL and CLUSTER commands; as the admin user when secured). */
  member(port: number): Redis {
    const { tls, username, password } = this.adminOptions();
    const client = new Redis({
      host: '127.0.0.1',
      port,
      maxRetriesPerRequest: 1,
      lazyConnect: true,
      ...(tls ? { tls, username, password } : {}),
    });
    client.on('error', () => undefined);
    return client;
  }

  /**
   * Whether a Sentinel deployment could fail over now: all three Sentinels name the same primary, know each other
   * and see its replica with a working link, with no failover under way. Right after a failover they have to find
   * each other again through the new primary, and a primary lost before that is never replaced (redis/redis#1309).
   */
  async sentinelsSettled(): Promise<boolean> {
    const views = await Promise.all(
      [2, 3, 4].map(async (offset) => {
        const sentinel = this.member(this.base + offset);
        try {
          const fields = (list: unknown): Record<string, string> => {
            const flat = list as string[];
            return Object.fromEntries(
              Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]),
            );
          };
          const master = fields(await sentinel.call('SENTINEL', 'MASTER', 'bridge'));
          const replicas = ((await sentinel.call('SENTINEL', 'REPLICAS', 'bridge')) as unknown[]).map(fields);
          const replicaOk = replicas.some(
            (r) => r.flags === 'slave' && r['master-link-status'] === 'ok' && r['master-port'] === master.port,
          );
          const settled = master.flags === 'master' && master['num-other-sentinels'] === '2' && replicaOk;
          return settled ? master.port : null;
        } catch {
          return null;
        } finally {
          sentinel.disconnect();
        }
      }),
    );
    return views[0] !== null && views.every((port) => port === views[0]);
  }

  /**
   * What each member says of its replication (role, primary, link, replicas) and, for Sentinel, each Sentinel's
   * primary: one line per member, for a failed failover test to show where the topology stood.
   */
  async describe(): Promise<string> {
    const ports = Array.from({ length: this.kind === 'cluster' ? 6 : 5 }, (_, i) => this.base + i);
    const lines = await Promise.all(
      ports.map(async (port) => {
        const member = this.member(port);
        try {
          if (this.kind === 'sentinel' && port >= this.base + 2) {
            const reply = await member.call('SENTINEL', 'get-master-addr-by-name', 'bridge');
            return `${port} sentinel: primary ${JSON.stringify(reply)}`;
          }
          const info = String(await member.info('replication'));
          const pick = /^(role|master_port|master_link_status|connected_slaves|slave\d+):(.*)$/gm;
          const fields = [...info.matchAll(pick)].map((m) => `${m[1]}=${m[2]!.trim()}`);
          return `${port}: ${fields.join(' ')}`;
        } catch (err) {
          return `${port}: no answer (${err instanceof Error ? err.message : String(err)})`;
        } finally {
          member.disconnect();
        }
      }),
    );
    return lines.join('\n');
  }

  /** The port of the primary now: Sentinel's answer, or the Cluster primary serving `key`'s slot. */
  async primaryPort(key = ''): Promise<number> {
    if (this.kind === 'sentinel') {
      const sentinel = this.member(this.base + 2);
      try {
        const reply = (await sentinel.call('SENTINEL', 'get-master-addr-by-name', 'bridge')) as [string, string];
        return Number(reply[1]);
      } finally {
        sentinel.disconnect();
      }
    }
    for (let port = this.base; port < this.base + 6; port++) {
      const node = this.member(port);
      try {
        const slot = Number(await node.call('CLUSTER', 'KEYSLOT', key));
        const slots = (await node.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
        const range = slots.find(([from, to]) => slot >= from && slot <= to);
        if (range) return Number(range[2][1]);
      } catch {
        // A dead member: ask the next one.
      } finally {
        node.disconnect();
      }
    }
    throw new Error('no Cluster member answered CLUSTER SLOTS');
  }
}
