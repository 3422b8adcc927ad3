import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { accountKeys, connectRedisFromConfig, type BridgeRedis } from '../../src/redis/connection.js';
import { probeReplicas } from '../../src/redis/durability.js';
import { bridgeForTest, eventually, initialLoadDone, simulatorForTest, testEnv } from '../helpers/bridge.js';
import { runCli, waitFor } from '../helpers/processes.js';
import { RedisTopology } from '../helpers/topologies.js';

// TLS on Redis Sentinel and Redis Cluster (issue 21): secured topologies from scripts/redis-topology.sh
// (REDIS_TOPOLOGY_TLS=yes) serve TLS only, require a client certificate and have the default user off, so anything
// that works against them used TLS, the client certificate and the ACL user. The bridge runs in-process with the
// settings an operator would give (REDIS_TLS=true, REDIS_TLS_*_FILE, REDIS_USERNAME, REDIS_PASSWORD_FILE and, for
// the Sentinels, REDIS_SENTINEL_USERNAME and REDIS_SENTINEL_PASSWORD_FILE), commits its initial load, holds its
// lease, answers the `status` command, and keeps committing across a failover.

const sentinel = await RedisTopology.onFreePorts('sentinel', 1, true);
let cluster = await RedisTopology.onFreePorts('cluster', 1, true);
// Both were free when picked; they must not be the same ports either (the Cluster's bus ports are at +10000).
while ([0, 10_000].some((bus) => Math.abs(cluster.base + bus - sentinel.base) < 10)) {
  cluster = await RedisTopology.onFreePorts('cluster', 1, true);
}
beforeAll(() => Promise.all([sentinel.start(), cluster.start()]), 120_000);
afterAll(() => Promise.allSettled([sentinel.stop(), cluster.stop()]), 60_000);

const clients: BridgeRedis[] = [];
afterAll(() => clients.forEach((c) => c.disconnect()));

/** What a member answers to PING sent in clear text (a TLS-only port closes the connection without PONG). */
function plainTextAnswer(port: number): Promise<string> {
  return new Promise((resolve) => {
    let answer = '';
    const socket = netConnect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('error', (err) => (answer += `[${err.message}]`));
    socket.on('close', () => resolve(answer));
    socket.setTimeout(5_000, () => socket.destroy());
  });
}

/** What a member answers to PING over TLS without a client certificate (refused: the certificate is required). */
function noCertificateAnswer(topology: RedisTopology, port: number): Promise<string> {
  return new Promise((resolve) => {
    let answer = '';
    const socket = tlsConnect({ port, host: '127.0.0.1', ca: readFileSync(`${topology.tlsDir}/ca.pem`) }, () =>
      socket.write('PING\r\n'),
    );
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('error', (err) => (answer += `[${err.message}]`));
    socket.on('close', () => resolve(answer));
    socket.setTimeout(5_000, () => socket.destroy());
  });
}

/** The answer to PING over TLS with the client certificate but no AUTH (the default user is off). */
async function anonymousAnswer(topology: RedisTopology, port: number): Promise<string> {
  const { tls } = topology.adminOptions();
  const client = new Redis({ host: '127.0.0.1', port, tls, lazyConnect: true, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    return await client.ping();
  } catch (err) {
    return (err as Error).message;
  } finally {
    client.disconnect();
  }
}

async function expectSecured(topology: RedisTopology, ports: number[]): Promise<void> {
  for (const port of ports) {
    const plain = await plainTextAnswer(port);
    expect(plain, `plain text to ${port}`).not.toContain('PONG');
    const noCert = await noCertificateAnswer(topology, port);
    expect(noCert, `TLS without a client certificate to ${port}`).not.toContain('PONG');
    expect(await anonymousAnswer(topology, port), `TLS without AUTH to ${port}`).toMatch(/NOAUTH/);
  }
}

/** A bridge of its own account on the topology, past its initial load of `reviews` reviews. */
async function runningBridge(topology: RedisTopology, reviews: number) {
  const sim = await simulatorForTest({ reviewCount: reviews, seed: 21 });
  const env = testEnv(sim.url, { ...topology.env, UPSTREAM_PAGE_SIZE: '50', LEASE_TTL_MS: '5000' });
  const b = await bridgeForTest(env);
  await initialLoadDone(b);
  const redis = connectRedisFromConfig(b.config.redis);
  clients.push(redis);
  return { sim, env, b, redis };
}

/** Waits until the bridge has committed review `id` with client status `status`; resolves the time it took. */
async function committed(b: Awaited<ReturnType<typeof runningBridge>>['b'], id: number, status: string) {
  const t0 = Date.now();
  await eventually(
    async () => ((await b.store.read([id])).get(id)?.client === status ? true : undefined),
    60_000,
    `review ${id} committed as ${status}`,
  );
  return Date.now() - t0;
}

describe('Redis Sentinel over TLS', () => {
  it('refuses plain text; the bridge commits, leads and survives a SENTINEL FAILOVER over TLS with an ACL user', async () => {
    await expectSecured(sentinel, [sentinel.base, sentinel.base + 1, sentinel.base + 2]);
    const { sim, env, b, redis } = await runningBridge(sentinel, 200);
    expect(await redis.call('ACL', 'WHOAMI')).toBe('bridge');
    expect(await b.store.size()).toBe(200);

    // The command line connects the same way (Sentinels, primary, durability probe through the Sentinels).
    const status = JSON.parse(await runCli('status', env));
    expect(status).toMatchObject({ initialLoadDone: true, snapshotReviews: 200, redisDurability: null });
    expect(status.lease?.holder).toBe(b.app.replica);

    const before = await sentinel.primaryPort();
    const admin = sentinel.member(sentinel.base + 2);
    try {
      expect(await admin.call('SENTINEL', 'FAILOVER', 'bridge')).toBe('OK');
    } finally {
      admin.disconnect();
    }
    const failedOverAt = Date.now();
    const after = await waitFor(
      async () => {
        const now = await sentinel.primaryPort();
        return now !== before ? now : undefined;
      },
      30_000,
      'Sentinel to promote the replica',
      100,
    );
    // The demoted primary rejoins as a replica only seconds later (Sentinel waits before reconfiguring it): until
    // then only the Sentinels, asked over TLS with their ACL user, know the replica exists.
    expect(await probeReplicas(redis, b.config.redis.target)).toEqual([
      expect.objectContaining({ known: 1, connected: 0 }),
    ]);

    sim.control.setStatus(5, { client: 'REJECTED' });
    const recoverMs = await committed(b, 5, 'REJECTED');
    const leaseAfter = await redis.get(accountKeys(b.config.redis.keyPrefix, b.config.account).lease);
    expect(leaseAfter?.startsWith(`${b.app.replica}|`)).toBe(true);
    console.log(
      `TLS Sentinel failover ${before} -> ${after}: change committed ${recoverMs} ms after the promotion ` +
        `(${Date.now() - failedOverAt} ms after SENTINEL FAILOVER)`,
    );
  }, 120_000);

  it("a rotated Sentinel password file is read at the next reconnect (the Sentinels' own ACL user)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rb-sentinel-pw-'));
    const passwordFile = join(dir, 'sentinel-password');
    const sentinels = [2, 3, 4].map((offset) => sentinel.member(sentinel.base + offset));
    const onEverySentinel = (...args: string[]) => Promise.all(sentinels.map((s) => s.call('ACL', ...args)));
    let client: BridgeRedis | null = null;
    // The client's failover detector subscribes to every Sentinel it knows after each connection. Its connections
    // get no error listener from ioredis: one still authenticating when the old password goes, or closed half-way
    // through, would print its error. So each step waits until they are all subscribed.
    const detectorSubscribed = () =>
      waitFor(
        async () => {
          const lists = await Promise.all(sentinels.map((s) => s.call('CLIENT', 'LIST') as Promise<string>));
          const mine = lists.map((l) => l.split('\n').filter((c) => c.includes(' user=rotating ')));
          const subscribed = mine.every((m) => m.length > 0 && m.every((c) => c.includes(' cmd=subscribe ')));
          return subscribed ? true : undefined;
        },
        10_000,
        "the failover detector's subscriptions",
        50,
      );
    try {
      await onEverySentinel('SETUSER', 'rotating', 'on', '>first-pw-5e1a', '~*', '&*', '+@all');
      writeFileSync(passwordFile, 'first-pw-5e1a\n');
      const env = testEnv('http://127.0.0.1:9', {
        ...sentinel.env,
        REDIS_SENTINEL_USERNAME: 'rotating',
        REDIS_SENTINEL_PASSWORD_FILE: passwordFile,
      });
      client = connectRedisFromConfig(loadConfig(env).redis);
      expect(await client.ping()).toBe('PONG');
      await detectorSubscribed();
      // Rotation: the new password added on every Sentinel, the file replaced, the old password removed.
      await onEverySentinel('SETUSER', 'rotating', '>second-pw-77c0', '<first-pw-5e1a');
      writeFileSync(passwordFile, 'second-pw-77c0\n');
      client.disconnect(true);
      expect(await client.ping()).toBe('PONG');
      expect((client as Redis).options.sentinelPassword).toBe('second-pw-77c0');
      await detectorSubscribed();
    } finally {
      client?.disconnect();
      sentinels.forEach((s) => s.disconnect());
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('Redis Cluster over TLS', () => {
  it('refuses plain text; the bridge commits on every node it needs and follows a CLUSTER FAILOVER over TLS', async () => {
    await expectSecured(cluster, [cluster.base, cluster.base + 3]);
    const { sim, env, b, redis } = await runningBridge(cluster, 200);
    expect(await redis.call('ACL', 'WHOAMI')).toBe('bridge');
    expect(await b.store.size()).toBe(200);
    const status = JSON.parse(await runCli('status', env));
    expect(status).toMatchObject({ initialLoadDone: true, snapshotReviews: 200, redisDurability: null });
    expect(status.lease?.holder).toBe(b.app.replica);

    // The account's slot moves to its replica (a manual failover, over the TLS cluster bus); the bridge learns the
    // new owner from a MOVED answer and connects to it with the same TLS options and ACL user.
    const slotKey = accountKeys(b.config.redis.keyPrefix, b.config.account).checkpoint;
    const before = await cluster.primaryPort(slotKey);
    const node = cluster.member(before);
    const myId = String(await node.call('CLUSTER', 'MYID'));
    node.disconnect();
    const nodes = String(await (redis as unknown as Redis).call('CLUSTER', 'NODES'));
    const replica = nodes
      .split('\n')
      .map((l) => l.split(' '))
      .find((f) => f[3] === myId && (f[2] ?? '').includes('slave'));
    expect(replica, 'a replica of the account primary').toBeDefined();
    const replicaPort = Number(replica![1]!.split('@')[0]!.split(':')[1]);
    const promoted = cluster.member(replicaPort);
    try {
      expect(await promoted.call('CLUSTER', 'FAILOVER')).toBe('OK');
    } finally {
      promoted.disconnect();
    }
    await waitFor(
      async () => ((await cluster.primaryPort(slotKey)) === replicaPort ? true : undefined),
      30_000,
      'the replica to take the slot',
      100,
    );
    sim.control.setStatus(7, { client: 'REJECTED' });
    const recoverMs = await committed(b, 7, 'REJECTED');
    console.log(`TLS Cluster failover ${before} -> ${replicaPort}: change committed ${recoverMs} ms after it`);
  }, 120_000);
});
