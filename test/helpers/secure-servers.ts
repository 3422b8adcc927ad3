import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitForKafka } from '../../scripts/kafka/ready.js';
import { freePort, probeTcp, ROOT, runDir, spawnLogged, type Child } from './processes.js';
import { pollUntil } from './wait.js';

// Servers that need credentials or TLS, for the transport and secret-leak tests: a throw-away certificate
// authority, redis-server with a password, an ACL user and a TLS port, and a Kafka broker with SSL and SASL_SSL
// listeners and SCRAM users. Each runs as a direct child of the test process on free ports and is stopped by pid.

/** PEM files of a test CA, a server certificate (localhost, 127.0.0.1) and a client certificate. */
export interface TestCerts {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** Removes the directory. */
  remove(): void;
}

/** Makes a CA and two certificates it signed, with openssl (a second or so). */
export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'rb-certs-'));
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=test-ca',
  );
  const sign = (name: string, cn: string, san: string) => {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    );
  };
  sign('server', 'localhost', 'DNS:localhost,IP:127.0.0.1');
  sign('client', 'bridge-client', 'DNS:bridge-client');
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function waitForPort(port: number, child: Child, what: string, timeoutMs = 20_000): Promise<void> {
  await pollUntil(
    async () => {
      if (!child.alive) throw new Error(`${what} exited; see ${child.logFile}`);
      return (await probeTcp(port)) ? true : undefined;
    },
    { timeoutMs, what: `${what} to listen on ${port}`, intervalMs: 50 },
  );
}

/** A running secured redis-server. */
export interface SecureRedis {
  /** redis:// URL of the plain port (password required), without credentials. */
  url: string;
  /** rediss:// URL of the TLS port (client certificate required), or null without TLS. */
  tlsUrl: string | null;
  stop(): Promise<void>;
}

/**
 * Starts redis-server with `requirepass` (the default user's password), and optionally an ACL user and a TLS
 * port that requires a client certificate signed by the test CA.
 */
export async function startSecureRedis(options: {
  password: string;
  user?: { name: string; password: string };
  certs?: TestCerts;
}): Promise<SecureRedis> {
  const port = await freePort();
  const tlsPort = options.certs ? await freePort() : null;
  const dir = runDir(`secure-redis-${port}`);
  const args = ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'];
  args.push('--requirepass', options.password);
  if (options.user) args.push('--user', options.user.name, 'on', `>${options.user.password}`, '~*', '&*', '+@all');
  if (options.certs && tlsPort) {
    const c = options.certs;
    args.push('--tls-port', String(tlsPort), '--tls-cert-file', c.serverCert, '--tls-key-file', c.serverKey);
    args.push('--tls-ca-cert-file', c.ca, '--tls-auth-clients', 'yes');
  }
  const child = spawnLogged('redis-server', args, {}, `${dir}/redis.log`);
  await waitForPort(port, child, 'redis-server');
  if (tlsPort) await waitForPort(tlsPort, child, 'redis-server (TLS)');
  return {
    url: `redis://127.0.0.1:${port}`,
    tlsUrl: tlsPort ? `rediss://localhost:${tlsPort}` : null,
    stop: async () => {
      await child.stop(5_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A running Kafka broker with TLS and SASL listeners. */
export interface SecureKafka {
  /** PLAINTEXT listener (no auth): for test setup and reading topics back. */
  plaintext: string;
  /** SSL listener that requires a client certificate (mutual TLS). */
  mtls: string;
  /** SASL_SSL listener: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, server authenticated by the test CA. */
  saslSsl: string;
  stop(): Promise<void>;
}

/** The SASL users of the secure broker (the same password for PLAIN and both SCRAM mechanisms). */
export const KAFKA_USERS = { bridge: 'bridge-password-7f3a', other: 'other-password-91c2' } as const;

// The jars scripts/kafka.sh fetches (KAFKA_VERSION, else the version of scripts/kafka/pom.xml).
const KAFKA_VERSION =
  process.env.KAFKA_VERSION ??
  /<kafka\.version>(.*)<\/kafka\.version>/.exec(readFileSync(`${ROOT}scripts/kafka/pom.xml`, 'utf8'))?.[1];
const KAFKA_LIBS = `${ROOT}.cache/kafka/${KAFKA_VERSION}/libs`;

/**
 * Starts a single-node KRaft broker with a PLAINTEXT, an SSL (client certificate required) and a SASL_SSL
 * listener; SCRAM users are added when the storage is formatted (`--add-scram`), PLAIN users in the JAAS line.
 */
export async function startSecureKafka(certs: TestCerts): Promise<SecureKafka> {
  if (!existsSync(KAFKA_LIBS)) execFileSync('bash', ['scripts/kafka.sh', 'fetch'], { cwd: ROOT, stdio: 'pipe' });
  const [plain, mtls, sasl, controller] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const dir = runDir(`secure-kafka-${plain}`);
  rmSync(dir, { recursive: true, force: true });
  const data = join(runDir(`secure-kafka-${plain}`), 'data');
  // PEM key stores (Kafka >= 2.7): the key and its chain in one file, no keytool needed.
  const keystore = join(dir, 'server-keystore.pem');
  writeFileSync(keystore, readFileSync(certs.serverKey, 'utf8') + readFileSync(certs.serverCert, 'utf8'));
  const plainUsers = Object.entries(KAFKA_USERS)
    .map(([u, p]) => `user_${u}="${p}"`)
    .join(' ');
  const properties = `
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controller}
listeners=PLAINTEXT://127.0.0.1:${plain},SSL://127.0.0.1:${mtls},SASL_SSL://127.0.0.1:${sasl},CONTROLLER://127.0.0.1:${controller}
advertised.listeners=PLAINTEXT://127.0.0.1:${plain},SSL://localhost:${mtls},SASL_SSL://localhost:${sasl}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
log.dirs=${data}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
num.network.threads=2
num.io.threads=2
background.threads=2
ssl.keystore.type=PEM
ssl.keystore.location=${keystore}
ssl.truststore.type=PEM
ssl.truststore.location=${certs.ca}
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ${plainUsers};
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
`;
  writeFileSync(join(dir, 'server.properties'), properties);
  writeFileSync(
    join(dir, 'log4j.properties'),
    `log4j.rootLogger=WARN, file\nlog4j.appender.file=org.apache.log4j.FileAppender\nlog4j.appender.file.File=${dir}/server.log\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\nlog4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n`,
  );
  // Kafka 4.x logs through log4j 2, 3.x through log4j 1: each reads its own file.
  writeFileSync(
    join(dir, 'log4j2.properties'),
    `status = warn\nappender.file.type = File\nappender.file.name = file\nappender.file.fileName = ${dir}/server.log\nappender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = warn\nrootLogger.appenderRef.file.ref = file\n`,
  );
  const jvm = [
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    `-Dlog4j.configuration=file:${dir}/log4j.properties`,
    `-Dlog4j2.configurationFile=${dir}/log4j2.properties`,
  ];
  const scram = Object.entries(KAFKA_USERS).flatMap(([u, p]) =>
    ['SCRAM-SHA-256', 'SCRAM-SHA-512'].flatMap((m) => ['--add-scram', `${m}=[name=${u},password=${p}]`]),
  );
  execFileSync(
    'java',
    [
      ...jvm,
      '-cp',
      `${KAFKA_LIBS}/*`,
      'kafka.tools.StorageTool',
      'format',
      // One argument (`--cluster-id=`): a random id may start with '-' (1 in 64), which the tool's parser would
      // take for an option.
      `--cluster-id=${randomBytes(16).toString('base64url')}`,
      '-c',
      join(dir, 'server.properties'),
      ...scram,
    ],
    { stdio: 'pipe' },
  );
  const child = spawnLogged(
    'java',
    ['-Xms128m', '-Xmx384m', ...jvm, '-cp', `${KAFKA_LIBS}/*`, 'kafka.Kafka', join(dir, 'server.properties')],
    {},
    join(dir, 'kafka.out'),
  );
  try {
    await waitForKafka([`127.0.0.1:${plain}`], { timeoutMs: 90_000, isAlive: () => child.alive });
  } catch (err) {
    await child.kill();
    throw err;
  }
  return {
    plaintext: `127.0.0.1:${plain}`,
    mtls: `localhost:${mtls}`,
    saslSsl: `localhost:${sasl}`,
    stop: async () => {
      await child.stop(15_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
