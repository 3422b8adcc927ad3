import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BridgeConfig } from '../../src/config/config.js';
import { createdEvent } from '../../src/core/events.js';
import { KafkaPublisher } from '../../src/kafka/publisher.js';
import { connectRedis, redisOptions } from '../../src/redis/connection.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { createUpstreamClient } from '../../src/upstream/client.js';
import { fileOrEnvCredentials } from '../../src/upstream/credentials.js';
import { freePort, spawnBridge, waitFor, type Child } from '../helpers/processes.js';
import {
  KAFKA_USERS,
  makeCerts,
  startSecureKafka,
  startSecureRedis,
  type SecureKafka,
  type SecureRedis,
  type TestCerts,
} from '../helpers/secure-servers.js';
import { uniqueName } from '../helpers/services.js';
import { testEnv } from '../helpers/bridge.js';

// Transport security and secrets against real servers: a Kafka broker with SSL (client certificate required) and
// SASL_SSL listeners with SCRAM users, redis-server with a password, an ACL user and a TLS port, an https front of
// the simulator and a CONNECT proxy. Then the bridge itself with a wrong Redis password, a wrong SASL password
// and a wrong upstream secret: the secret appears nowhere in its output or its health answers.

const REDIS_PASSWORD = 'redis-default-pw-5d1e';
const REDIS_USER = { name: 'bridge', password: 'redis-acl-pw-0b7c' };
const quiet = pino({ level: 'silent' });

let certs: TestCerts;
let kafka: SecureKafka;
let redis: SecureRedis;
let dir: string;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  certs = makeCerts();
  dir = mkdtempSync(join(tmpdir(), 'rb-security-'));
  [kafka, redis] = await Promise.all([
    startSecureKafka(certs),
    startSecureRedis({ password: REDIS_PASSWORD, user: REDIS_USER, certs }),
  ]);
});

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await Promise.allSettled([kafka?.stop(), redis?.stop()]);
  certs?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${content}\n`);
  return path;
}

function kafkaConfig(brokers: string, over: Partial<BridgeConfig['kafka']>): BridgeConfig['kafka'] {
  const id = uniqueName('sec');
  return {
    brokers: [brokers],
    clientId: id,
    ssl: true,
    tls: { caFile: certs.ca, certFile: null, keyFile: null },
    sasl: null,
    topics: {
      created: `${id}.c`,
      statusChanged: `${id}.s`,
      updated: `${id}.u`,
      deadLetter: `${id}.d`,
      state: `${id}.state`,
      deleted: `${id}.deleted`,
      heartbeat: `${id}.heartbeat`,
      changelog: `${id}.changelog`,
    },
    exactlyOnce: false,
    transactionalId: `${id}.tx`,
    transactionTimeoutMs: 60_000,
    createTopics: true,
    partitions: 1,
    replicationFactor: 1,
    ...over,
  };
}

const event = createdEvent(
  {
    source: 'urn:test',
    review: { id: 1, updated_date: 1, client_publication_status: 'PENDING', pwr_publication_status: 'PENDING' },
    previous: null,
    detection: 'initial',
    stateDigest: 'x',
  },
  1,
);

/** Publishes one event through the given configuration and counts the records of its topic (plain listener). */
async function publishOne(config: BridgeConfig['kafka']): Promise<number> {
  const publisher = new KafkaPublisher(config, 'sec', quiet);
  await publisher.connect();
  try {
    await publisher.publish([event], []);
  } finally {
    await publisher.disconnect();
  }
  const admin = new Kafka({ clientId: 'sec-check', brokers: [kafka.plaintext], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(config.topics.created);
    return offsets.reduce((n, p) => n + Number(p.high), 0);
  } finally {
    await admin.disconnect();
  }
}

describe('Kafka transport', () => {
  it.each(['plain', 'scram-sha-256', 'scram-sha-512'] as const)(
    'SASL %s over TLS with a custom CA publishes',
    async (mechanism) => {
      const password = { file: file(`kafka-${mechanism}`, KAFKA_USERS.bridge) };
      const config = kafkaConfig(kafka.saslSsl, { sasl: { mechanism, username: 'bridge', password } });
      expect(await publishOne(config)).toBe(1);
    },
  );

  it('mutual TLS: a client certificate is required and accepted', async () => {
    const withCert = kafkaConfig(kafka.mtls, {
      tls: { caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey },
    });
    expect(await publishOne(withCert)).toBe(1);
    const noCert = new KafkaPublisher(kafkaConfig(kafka.mtls, {}), 'sec', quiet);
    await expect(noCert.connect()).rejects.toThrow();
  });

  it('a wrong SCRAM password is refused without echoing it, and a corrected file is read on the next connection', async () => {
    const wrong = 'wrong-scram-password-4e9d';
    const path = file('kafka-rotating', wrong);
    const config = kafkaConfig(kafka.saslSsl, {
      sasl: { mechanism: 'scram-sha-512', username: 'bridge', password: { file: path } },
    });
    const publisher = new KafkaPublisher(config, 'sec', quiet);
    const err = await publisher.connect().then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.name).toMatch(/SASL|Authentication/i);
    expect(`${err?.message} ${err?.stack}`).not.toContain(wrong);
    writeFileSync(path, KAFKA_USERS.bridge);
    await publisher.connect();
    await publisher.publish([event], []);
    await publisher.disconnect();
  });
});

describe('Redis transport', () => {
  it('password from a file on the plain port; a wrong one fails', async () => {
    const url = redis.url;
    const good = connectRedis(url, redisOptions({ url, password: { file: file('redis-pw', REDIS_PASSWORD) } }));
    cleanups.push(() => void good.disconnect());
    expect(await good.ping()).toBe('PONG');
    const bad = connectRedis(url, {
      ...redisOptions({ url, password: { value: 'not-it-123' } }),
      retryStrategy: () => null,
    });
    cleanups.push(() => void bad.disconnect());
    await expect(bad.ping()).rejects.toThrow();
  });

  it('a rotated password file is used at the next reconnect', async () => {
    const url = redis.url;
    const admin = connectRedis(url, { password: REDIS_PASSWORD });
    cleanups.push(() => void admin.disconnect());
    await admin.call('ACL', 'SETUSER', 'rotating', 'on', '>first-pw-2a', '~*', '&*', '+@all');
    const path = file('redis-rotating', 'first-pw-2a');
    const config = { url, username: 'rotating', password: { file: path } };
    const client = connectRedis(url, redisOptions(config), config.password);
    cleanups.push(() => void client.disconnect());
    expect(await client.ping()).toBe('PONG');
    // Rotation: the new password is added, the file replaced, the old password removed.
    await admin.call('ACL', 'SETUSER', 'rotating', '>second-pw-8f', '<first-pw-2a');
    writeFileSync(path, 'second-pw-8f\n');
    client.disconnect(true);
    expect(await client.call('ACL', 'WHOAMI')).toBe('rotating');
  });

  it('rediss:// with a custom CA, a client certificate and an ACL user', async () => {
    const url = redis.tlsUrl!;
    const client = connectRedis(
      url,
      redisOptions({
        url,
        username: REDIS_USER.name,
        password: { value: REDIS_USER.password },
        tls: { caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey },
      }),
    );
    cleanups.push(() => void client.disconnect());
    expect(await client.call('ACL', 'WHOAMI')).toBe(REDIS_USER.name);
    await client.set('sec:k', 'v');
    expect(await client.get('sec:k')).toBe('v');
  });
});

/** An https front of the simulator with the test server certificate. */
async function httpsFront(sim: Simulator): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(sim.url);
  const server = createHttpsServer(
    { key: readFileSync(certs.serverKey), cert: readFileSync(certs.serverCert) },
    (req, res) => {
      const upstream = httpRequest(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    },
  );
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `https://localhost:${port}`, close: () => closeServer(server) };
}

function closeServer(server: Server | ReturnType<typeof createHttpsServer>): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A CONNECT proxy that counts the tunnels it opened. */
async function connectProxy(): Promise<{ url: string; tunnels: () => number; close: () => Promise<void> }> {
  let tunnels = 0;
  const server = createHttpServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req, socket, head) => {
    tunnels += 1;
    const [host, port] = (req.url ?? '').split(':');
    const out = netConnect(Number(port), host === 'localhost' ? '127.0.0.1' : host!, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      out.write(head);
      out.pipe(socket);
      socket.pipe(out);
    });
    out.on('error', () => socket.destroy());
    socket.on('error', () => out.destroy());
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${port}`, tunnels: () => tunnels, close: () => closeServer(server) };
}

describe('upstream transport', () => {
  const credentials = fileOrEnvCredentials({
    clientId: { value: 'demo-client' },
    clientSecret: { value: 'demo-secret' },
  });

  async function firstPage(baseUrl: string, extra: { ca?: Buffer; env?: NodeJS.ProcessEnv } = {}): Promise<number> {
    // The client reads the proxy settings from the process environment, as the bridge does.
    const saved = { HTTPS_PROXY: process.env.HTTPS_PROXY, NO_PROXY: process.env.NO_PROXY };
    Object.assign(process.env, extra.env ?? {});
    const client = createUpstreamClient({ baseUrl, credentials, maxRetries: 0, ...(extra.ca ? { ca: extra.ca } : {}) });
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    try {
      for await (const page of client.pages({ kind: 'sweep' })) return page.reviews.length;
      return 0;
    } finally {
      await client.close();
    }
  }

  it('https with a custom CA; without it the certificate is refused', async () => {
    const sim = await startSimulator({ reviewCount: 5, rateLimit: null });
    const front = await httpsFront(sim);
    cleanups.push(() => sim.close(), front.close);
    expect(await firstPage(front.url, { ca: readFileSync(certs.ca) })).toBe(5);
    await expect(firstPage(front.url)).rejects.toMatchObject({ kind: 'network' });
  });

  it('HTTPS_PROXY is used (CONNECT), NO_PROXY bypasses it', async () => {
    const sim = await startSimulator({ reviewCount: 3, rateLimit: null });
    const front = await httpsFront(sim);
    const proxy = await connectProxy();
    cleanups.push(() => sim.close(), front.close, proxy.close);
    const ca = readFileSync(certs.ca);
    expect(await firstPage(front.url, { ca, env: { HTTPS_PROXY: proxy.url } })).toBe(3);
    const viaProxy = proxy.tunnels();
    expect(viaProxy).toBeGreaterThan(0);
    expect(await firstPage(front.url, { ca, env: { HTTPS_PROXY: proxy.url, NO_PROXY: 'localhost' } })).toBe(3);
    expect(proxy.tunnels()).toBe(viaProxy);
  });
});

describe('secrets never leak from the running bridge', () => {
  // How the probes report a failure: the loop's last error kind (/healthz), or not ready (/readyz).
  const REPORTED = /"lastError":"[A-Za-z]+|"status":"not_ready"/;

  async function runUntilFailing(name: string, env: Record<string, string>, failure: RegExp) {
    const port = await freePort();
    const child: Child = spawnBridge(
      testEnv(env.UPSTREAM_BASE_URL!, {
        HTTP_PORT: String(port),
        LOG_LEVEL: 'debug',
        LEASE_TTL_MS: '2000',
        ...env,
      }),
      join(dir, `${name}.log`),
    );
    cleanups.push(() => child.stop(5_000).then(() => undefined));
    await waitFor(
      () => ((child.log().match(failure) ?? []).length >= 2 ? true : undefined),
      60_000,
      `${name} failures`,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; log tail:\n${child.log().slice(-3000)}`);
    });
    // The failures can be logged before the HTTP server listens (the dependency checks start first), and before the
    // loop or the dependency monitor reports them: wait until the probes say so (by kind; the secret is checked below).
    const bodies = await waitFor(
      async () => {
        const answers = await Promise.all(
          ['/healthz', '/readyz'].map((p) => fetch(`http://127.0.0.1:${port}${p}`).then((r) => r.text())),
        );
        return REPORTED.test(answers.join('\n')) ? answers : undefined;
      },
      30_000,
      `${name}: /healthz or /readyz reporting the failure`,
    );
    await child.stop(10_000);
    return { output: child.log(), health: bodies.join('\n') };
  }

  it('a wrong Redis password, a wrong SASL password and a wrong upstream secret are nowhere in the output', async () => {
    const sim = await startSimulator({ reviewCount: 10, rateLimit: null });
    cleanups.push(() => sim.close());
    const wrong = {
      redis: 'wrong-redis-password-a71c',
      sasl: 'wrong-sasl-password-c3d8',
      upstream: 'wrong-upstream-secret-9e2f',
    };
    const base = { UPSTREAM_BASE_URL: sim.url, UPSTREAM_CLIENT_SECRET: 'demo-secret' };
    const runs = await Promise.all([
      runUntilFailing(
        'redis-pw',
        { ...base, REDIS_URL: redis.url, REDIS_PASSWORD_FILE: file('bridge-redis-pw', wrong.redis) },
        // The refusal itself, not any error line (a fresh broker's retried coordinator answers are errors too).
        /WRONGPASS|NOAUTH/g,
      ),
      runUntilFailing(
        'sasl-pw',
        {
          ...base,
          KAFKA_BROKERS: kafka.saslSsl,
          KAFKA_SSL_CA_FILE: certs.ca,
          KAFKA_SASL_MECHANISM: 'scram-sha-256',
          KAFKA_SASL_USERNAME: 'bridge',
          KAFKA_SASL_PASSWORD_FILE: file('bridge-sasl-pw', wrong.sasl),
        },
        /cannot connect to Kafka yet|kafka auth_failed/g,
      ),
      runUntilFailing(
        'upstream-secret',
        { ...base, UPSTREAM_CLIENT_SECRET: '', UPSTREAM_CLIENT_SECRET_FILE: file('bridge-upstream', wrong.upstream) },
        /401/g,
      ),
    ]);
    for (const [run, secret] of [
      [runs[0]!, wrong.redis],
      [runs[1]!, wrong.sasl],
      [runs[2]!, wrong.upstream],
    ] as const) {
      expect(run.output.length).toBeGreaterThan(0);
      expect(run.output).not.toContain(secret);
      expect(run.health).not.toContain(secret);
      // The error is still reported, by kind.
      expect(run.health).toMatch(REPORTED);
    }
    expect(runs[0]!.output).toMatch(/WRONGPASS|NOAUTH|ReplyError|MaxRetriesPerRequest/);
    expect(runs[1]!.output).toMatch(/SASL/);
    expect(runs[2]!.output).toMatch(/401|auth/);
  });
});
