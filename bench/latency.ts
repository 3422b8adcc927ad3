import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { startApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/config.js';
import type { ReviewStatusChangedEvent } from '../src/core/events.js';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { startSimulator } from '../src/simulator/index.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
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

// Latency from a status change in the simulator to its review.status_changed event in a Kafka consumer, with the
// bridge's defaults (polls every POLL_INTERVAL_MS = 1 s, whatever else runs) and the simulator's default throttle
// (10 requests/s). Two phases of BENCH_CHANGES (default 40) changes on
// distinct reviews, spaced uniformly at random between 0.2 and 2.5 s so they fall at every phase of the poll cycle,
// each timed from just before the control call to the consumer's receipt of the event: (1) no sweep running,
// (2) during a reconciliation sweep, whose rate is measured against the ceiling (10 requests/s x 100 reviews).

const CHANGES = Number(process.env.BENCH_CHANGES ?? 200);
const POLL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 1_000);
const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 80_000);
const CEILING_PER_S = 10 * 100;
const { kafkaBrokers, redisUrl } = services();

const sim = await startSimulator({ reviewCount: REVIEWS, seed: 9 });
const account = uniqueName('bench-latency');
// Scheduled sweeps keep their default (daily): the only sweep of the run is the one phase 2 requests.
const config = loadConfig(
  benchEnv(account, sim.url, {
    POLL_INTERVAL_MS: String(POLL_MS),
    SWEEP_INTERVAL_MS: '86400000',
    INITIAL_LOAD_MODE: 'suppress',
  }),
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

  const ids = new Set<number>();
  /** Makes CHANGES status changes (or fewer, when `until` says stop) and measures each one's latency. */
  async function phase(until: () => Promise<boolean> = async () => false) {
    const sent: { key: string; at: number }[] = [];
    while (sent.length < CHANGES && !(await until())) {
      const id = 1 + Math.floor(Math.random() * REVIEWS);
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
    return {
      figures: {
        changes: sent.length,
        received: latencies.length,
        missing: sent.length - latencies.length,
        p50Ms: percentile(latencies, 50),
        p95Ms: percentile(latencies, 95),
        p99Ms: percentile(latencies, 99),
        maxMs: Math.max(...latencies),
        minMs: Math.min(...latencies),
        meanMs: round(latencies.reduce((a, b) => a + b, 0) / latencies.length, 0),
      },
      latenciesMs: latencies,
    };
  }

  const idle = await phase();
  const budgetShare = /reviews_bridge_poll_budget_share\{[^}]*\} ([0-9.e-]+)/.exec(
    await app.metrics.registry.metrics(),
  )?.[1];

  await store.requestSweep();
  let sweepStart: { at: number; seen: number } | null = null;
  while (!sweepStart) {
    const ckpt = await store.checkpoint();
    if (ckpt.sweep) sweepStart = { at: Date.now(), seen: ckpt.sweep.seen };
    else await sleep(50);
  }
  let sweepLast = { ...sweepStart };
  const sweeping = await phase(async () => {
    const ckpt = await store.checkpoint();
    if (!ckpt.sweep) return true;
    sweepLast = { at: Date.now(), seen: ckpt.sweep.seen };
    return false;
  });
  const sweepRate = (sweepLast.seen - sweepStart.seen) / ((sweepLast.at - sweepStart.at) / 1000);
  const duringTargetMs = POLL_MS + 1_000;
  const result = {
    setup: `defaults (POLL_INTERVAL_MS=${POLL_MS}), simulator default throttle, ${REVIEWS} reviews, changes on distinct reviews spaced 0.2-2.5 s; consumer maxWaitTimeInMs 50`,
    idle: {
      ...idle.figures,
      pollBudgetShare: budgetShare === undefined ? null : Number(budgetShare),
      target: { p99Ms: '<= 1500', met: idle.figures.missing === 0 && idle.figures.p99Ms <= 1_500 },
    },
    duringSweep: {
      ...sweeping.figures,
      sweepReviewsPerSecond: round(sweepRate, 0),
      sweepShareOfCeiling: round(sweepRate / CEILING_PER_S, 3),
      target: {
        p99Ms: `<= poll interval + 1 s = ${duringTargetMs}`,
        sweepShare: '>= 0.9',
        met:
          sweeping.figures.missing === 0 &&
          sweeping.figures.p99Ms <= duringTargetMs &&
          sweepRate / CEILING_PER_S >= 0.9,
      },
    },
    latenciesMs: { idle: idle.latenciesMs, duringSweep: sweeping.latenciesMs },
  };
  const file = writeResult('latency', result);
  console.log(JSON.stringify({ idle: result.idle, duringSweep: result.duringSweep }, null, 2));
  console.log(`written ${file}`);
} finally {
  await consumer.disconnect().catch(() => undefined);
  await app.stop();
  await sim.close();
  await dropAccount(redis, keys);
  await redis.quit();
  await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
}
