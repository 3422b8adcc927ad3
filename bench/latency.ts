import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import type { ReviewStatusChangedEvent } from '../src/events.js';
import { accountKeys, connectRedis } from '../src/redis.js';
import { startSimulator } from '../src/simulator/index.js';
import { SnapshotStore } from '../src/snapshot/store.js';
import {
  BENCH_KEY_PREFIX,
  benchEnv,
  dropAccount,
  dropTopics,
  percentile,
  round,
  services,
  uniqueName,
  writeResult,
} from './lib.js';

// Latency from a status change in the simulator to its review.status_changed event in a Kafka consumer, at the
// bridge's default poll interval (5 s) and the simulator's default throttle (10 requests/s). BENCH_CHANGES
// (default 80) changes on distinct reviews, spaced uniformly at random between 0.2 and 2.5 s so they fall at every
// phase of the poll cycle; each timed from just before the control call to the consumer's receipt of the event.

const CHANGES = Number(process.env.BENCH_CHANGES ?? 80);
const POLL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 5_000);
const { kafkaBrokers, redisUrl } = services();

const sim = await startSimulator({ reviewCount: 2_000, seed: 9 });
const account = uniqueName('bench-latency');
// Scheduled sweeps keep their default (daily): none is due within the run.
const config = loadConfig(
  benchEnv(account, sim.url, { POLL_INTERVAL_MS: String(POLL_MS), SWEEP_INTERVAL_MS: '86400000' }),
);
const redis = connectRedis(redisUrl);
const keys = accountKeys(BENCH_KEY_PREFIX, account);
const store = new SnapshotStore(redis, keys);
const app = await startApp(config, pino({ level: 'warn' }));
const kafka = new Kafka({ clientId: 'bench-latency', brokers: kafkaBrokers, logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId: `${account}-consumer`,
  maxWaitTimeInMs: 50,
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
});
try {
  for (;;) {
    if ((await store.checkpoint()).initialDone) break;
    await sleep(100);
  }
  const received = new Map<string, number>();
  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true;
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [config.kafka.topics.statusChanged], fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const at = Date.now();
      const event = JSON.parse(message.value!.toString()) as ReviewStatusChangedEvent;
      received.set(`${event.subject}|${event.data.review.updated_date}`, at);
    },
  });
  while (!joined) await sleep(50);

  const sent: { key: string; at: number }[] = [];
  const ids = new Set<number>();
  while (sent.length < CHANGES) {
    const id = 1 + Math.floor(Math.random() * 2_000);
    if (ids.has(id)) continue;
    ids.add(id);
    const current = sim.control.get(id)!;
    const to = current.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    const at = Date.now();
    const review = sim.control.setStatus(id, { client: to });
    sent.push({ key: `${id}|${review.updated_date}`, at });
    await sleep(200 + Math.random() * 2_300);
  }
  const deadline = Date.now() + 3 * POLL_MS + 30_000;
  while (sent.some((s) => !received.has(s.key)) && Date.now() < deadline) await sleep(50);
  const latencies = sent.filter((s) => received.has(s.key)).map((s) => received.get(s.key)! - s.at);
  const missing = sent.length - latencies.length;
  const figures = {
    changes: sent.length,
    received: latencies.length,
    missing,
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
    minMs: Math.min(...latencies),
    meanMs: round(latencies.reduce((a, b) => a + b, 0) / latencies.length, 0),
  };
  const targetMs = POLL_MS + 1_000;
  const result = {
    setup: `POLL_INTERVAL_MS=${POLL_MS} (default), simulator default throttle, 2000 reviews, changes on distinct reviews spaced 0.2-2.5 s; consumer maxWaitTimeInMs 50`,
    figures,
    target: { p99Ms: `<= poll interval + 1 s = ${targetMs}`, met: missing === 0 && figures.p99Ms <= targetMs },
    latenciesMs: latencies,
  };
  const file = writeResult('latency', result);
  console.log(JSON.stringify({ figures, target: result.target }, null, 2));
  console.log(`written ${file}`);
} finally {
  await consumer.disconnect().catch(() => undefined);
  await app.stop();
  await sim.close();
  await dropAccount(redis, keys);
  await redis.quit();
  await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
}
