import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { waitForKafka } from '../../scripts/kafka/ready.js';
import { freePort } from './processes.js';
import { stopTestRegistry } from './registry.js';

// One Kafka broker and one Redis for the integration and e2e projects, from the first source that applies:
//   1. KAFKA_BROKERS / REDIS_URL in the environment (scripts/test.sh sets them from scripts/services.sh),
//   2. containers, when a Docker engine answers (testcontainers),
//   3. the project's own scripts (scripts/kafka.sh, scripts/redis.sh) on free ports.
// TEST_SERVICES=docker|scripts forces 2 or 3. Each project runs this file; the first one that starts services
// exports their addresses, so the second reuses them, and the first one's teardown stops them after all tests.

// Docker path images. Kafka: the same line as scripts/kafka/pom.xml (4.2; docs/compatibility.md).
const KAFKA_IMAGE = 'apache/kafka:4.2.2';
const REDIS_IMAGE = 'redis:7.4.2-alpine';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Started {
  address: string;
  stop: () => Promise<void>;
}

/** Vitest global setup: provides 'kafkaBrokers' and 'redisUrl', and returns the teardown of what it started. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const needKafka = !process.env.KAFKA_BROKERS;
  const needRedis = !process.env.REDIS_URL;
  const started: Started[] = [];
  try {
    if (needKafka || needRedis) {
      const mode = await chooseMode();
      const [kafka, redis] = await Promise.allSettled([
        needKafka ? (mode === 'docker' ? kafkaContainer() : kafkaScript()) : undefined,
        needRedis ? (mode === 'docker' ? redisContainer() : redisScript()) : undefined,
      ]);
      for (const result of [kafka, redis])
        if (result.status === 'fulfilled' && result.value) started.push(result.value);
      if (kafka.status === 'rejected') throw kafka.reason;
      if (redis.status === 'rejected') throw redis.reason;
      // Child processes that tests spawn (the bridge CLI in e2e) inherit the addresses.
      if (kafka.value) process.env.KAFKA_BROKERS = kafka.value.address;
      if (redis.value) process.env.REDIS_URL = redis.value.address;
      console.log(
        `global-setup (${mode}): KAFKA_BROKERS=${process.env.KAFKA_BROKERS} REDIS_URL=${process.env.REDIS_URL}`,
      );
    }
  } catch (error) {
    await stopAll(started);
    throw error;
  }
  project.provide('kafkaBrokers', process.env.KAFKA_BROKERS ?? '');
  project.provide('redisUrl', process.env.REDIS_URL ?? '');
  // A replicated Redis for the bridges of the e2e tests (scripts/test.sh with TEST_TOPOLOGY=sentinel|cluster);
  // REDIS_URL stays the plain server that integration tests talk to directly.
  const topology = Object.fromEntries(
    ['REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_CLUSTER_NODES']
      .filter((name) => process.env[name])
      .map((name) => [name, process.env[name]!]),
  );
  if (Object.keys(topology).length > 0) console.log(`global-setup: bridges use ${JSON.stringify(topology)}`);
  project.provide('bridgeRedisEnv', topology);
  // The schema registry is started by the first test that needs one (test/helpers/registry.ts), once per run:
  // the first project's setup names its state file, and its teardown stops it.
  const ownsRegistry = !process.env.TEST_REGISTRY_STATE;
  if (ownsRegistry) process.env.TEST_REGISTRY_STATE = `${ROOT}.run/test-registry-${process.pid}.json`;
  project.provide('registryState', process.env.TEST_REGISTRY_STATE!);
  return async () => {
    if (ownsRegistry) {
      await stopTestRegistry(process.env.TEST_REGISTRY_STATE!).catch((err: unknown) =>
        console.error(`global-setup: stopping the schema registry failed: ${String(err)}`),
      );
      delete process.env.TEST_REGISTRY_STATE;
    }
    if (started.length === 0) return;
    if (needKafka) delete process.env.KAFKA_BROKERS;
    if (needRedis) delete process.env.REDIS_URL;
    await stopAll(started);
  };
}

async function stopAll(started: Started[]): Promise<void> {
  const results = await Promise.allSettled(started.map((s) => s.stop()));
  for (const r of results) if (r.status === 'rejected') console.error(`global-setup: teardown failed: ${r.reason}`);
}

async function chooseMode(): Promise<'docker' | 'scripts'> {
  const forced = process.env.TEST_SERVICES;
  if (forced === 'docker' || forced === 'scripts') return forced;
  if (forced) throw new Error(`TEST_SERVICES must be 'docker' or 'scripts', not '${forced}'`);
  return (await dockerAnswers()) ? 'docker' : 'scripts';
}

// `docker info` fails fast when the client exists but no engine runs; the timeout covers a hanging socket.
function dockerAnswers(): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('docker', ['info'], { timeout: 5_000 }, (error) => resolve(error === null));
  });
}

function runScript(script: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('bash', [`scripts/${script}`, ...args], { cwd: ROOT, timeout: 300_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`scripts/${script} ${args.join(' ')} failed:\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

async function kafkaScript(): Promise<Started> {
  const port = String(await freePort());
  await runScript('kafka.sh', ['start', port]);
  return { address: `127.0.0.1:${port}`, stop: () => runScript('kafka.sh', ['stop', port, '--clean']) };
}

async function redisScript(): Promise<Started> {
  const port = String(await freePort());
  await runScript('redis.sh', ['start', port]);
  return { address: `redis://127.0.0.1:${port}`, stop: () => runScript('redis.sh', ['stop', port]) };
}

// Not exercised on the project's CI machine (no Docker engine there); kept small and type-checked.
async function kafkaContainer(): Promise<Started> {
  const { GenericContainer, Wait } = await import('testcontainers');
  // Same port number inside and outside, so the advertised address is right for clients on both sides.
  const port = await freePort();
  const container = await new GenericContainer(KAFKA_IMAGE)
    .withExposedPorts({ container: port, host: port })
    .withEnvironment({
      KAFKA_NODE_ID: '1',
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_LISTENERS: `PLAINTEXT://0.0.0.0:${port},CONTROLLER://localhost:9093`,
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://localhost:${port}`,
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
      KAFKA_INTER_BROKER_LISTENER_NAME: 'PLAINTEXT',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
      KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS: '1000',
      KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
      KAFKA_NUM_PARTITIONS: '1',
    })
    .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
    .withStartupTimeout(120_000)
    .start();
  const address = `localhost:${port}`;
  await waitForKafka([address], { timeoutMs: 60_000 });
  return { address, stop: async () => void (await container.stop()) };
}

async function redisContainer(): Promise<Started> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer(REDIS_IMAGE)
    .withExposedPorts(6379)
    .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
    .start();
  return {
    address: `redis://${container.getHost()}:${container.getMappedPort(6379)}`,
    stop: async () => void (await container.stop()),
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaBrokers: string;
    redisUrl: string;
    bridgeRedisEnv: Record<string, string>;
    registryState: string;
  }
}
