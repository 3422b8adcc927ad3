import { loadavg } from 'node:os';
import { randomUUID } from 'node:crypto';
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
// (10 requests/s, pages of 100: a ceiling of 1,000 reviews/s). One account of BENCH_REVIEWS (default 100,000)
// reviews, INITIAL_LOAD_MODE=suppress (no created event per review: the broker is shared). Phases, each of
// BENCH_CHANGES (default 200) changes on distinct reviews, spaced uniformly at random between BENCH_SPACING_MS
// (default 50-450 ms: 200 changes fit in a pass of the account, and they fall at every phase of the poll cycle),
// each timed from just before the control call to the consumer's receipt of its event:
//  1. initial load: changes to reviews the load has already stored (the phase ends with the load);
//  2. idle: nothing but polls;
//  3. sweep with events: every BENCH_EDIT_EVERY-th review (default 2nd) edited upstream without moving its
//     updated_date first, so that the sweep's pages carry a review.updated per edited review;
//  4. resync of every review (state rows for all, events for real differences).
// A phase stops early when its pass ends (fewer changes then). Per phase: p50/p95/p99/max, the pass's share of the
// ceiling, the polls' waits in the client-side rate limiter (rate_limiter_wait_seconds{pass="incremental"}: mean
// and the bucket bound of its p99) and throttled requests (simulator).
// The many-accounts phase (100 accounts on 2 replicas while one sweeps) is bench/accounts-steady.ts with
// BENCH_SWEEP_REVIEWS.

const CHANGES = Number(process.env.BENCH_CHANGES ?? 200);
const POLL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 1_000);
const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 100_000);
const [SPACING_MIN, SPACING_MAX] = (process.env.BENCH_SPACING_MS ?? '50-450').split('-').map(Number) as [
  number,
  number,
];
const EDIT_EVERY = Number(process.env.BENCH_EDIT_EVERY ?? 2);
const TARGET_P99_MS = 1_500;
const CEILING_PER_S = 10 * 100;
const { kafkaBrokers, redisUrl } = services();
const loadAverageAtStart = loadavg().map((l) => round(l, 2));

const sim = await startSimulator({ reviewCount: REVIEWS, seed: 9 });
const account = uniqueName('bench-latency');
// Scheduled sweeps keep their default (daily): the only sweep of the run is the one phase 3 requests.
const config = loadConfig(
  benchEnv(account, sim.url, {
    ...(process.env.BENCH_POLL_INTERVAL_MS ? { POLL_INTERVAL_MS: String(POLL_MS) } : {}),
    SWEEP_INTERVAL_MS: '86400000',
    INITIAL_LOAD_MODE: 'suppress',
  }),
);
const redis = connectRedis(redisUrl);
const keys = accountKeys(BENCH_KEY_PREFIX, account);
const store = new SnapshotStore(redis, keys);
const received = new Map<string, number>();
const kafka = new Kafka({ clientId: 'bench-latency', brokers: kafkaBrokers, logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId: `${account}-consumer`,
  maxWaitTimeInMs: 50,
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
});
const app = await startApp(config, pino({ level: 'warn' }));

/** The polls' limiter waits so far: count, sum (s) and cumulative buckets. */
async function pollWaits(): Promise<{ count: number; sum: number; buckets: [number, number][] }> {
  const text = await app.metrics.registry.metrics();
  const line = (suffix: string) =>
    [
      ...text.matchAll(
        new RegExp(`^reviews_bridge_rate_limiter_wait_seconds_${suffix}\\{([^}]*)\\} ([0-9.e+-]+)$`, 'gm'),
      ),
    ]
      .filter((m) => m[1]!.includes('pass="incremental"'))
      .map((m) => [m[1]!, Number(m[2])] as const);
  const buckets = line('bucket').map(([labels, v]) => {
    const le = /le="([^"]+)"/.exec(labels)![1]!;
    return [le === '+Inf' ? Infinity : Number(le), v] as [number, number];
  });
  return { count: line('count')[0]?.[1] ?? 0, sum: line('sum')[0]?.[1] ?? 0, buckets };
}

function waitFigures(before: Awaited<ReturnType<typeof pollWaits>>, after: Awaited<ReturnType<typeof pollWaits>>) {
  const count = after.count - before.count;
  const cumulative = after.buckets.map(([le, v]): [number, number] => [
    le,
    v - (before.buckets.find((b) => b[0] === le)?.[1] ?? 0),
  ]);
  const p99 = cumulative.find(([, v]) => v >= 0.99 * count)?.[0] ?? null;
  return {
    pollRequests: count,
    meanMs: count > 0 ? round((1000 * (after.sum - before.sum)) / count, 0) : null,
    p99AtMostMs: count > 0 && p99 !== null ? (Number.isFinite(p99) ? p99 * 1000 : 'above the last bucket') : null,
  };
}

type Pass = { kind: string; seen: number } | null;

/** The long pass running now, from the checkpoint (initial load, sweep) or the pass progress (resync). */
async function runningPass(): Promise<Pass> {
  const c = await store.checkpoint();
  if (c.sweep) return { kind: c.sweep.kind, seen: c.sweep.seen };
  const p = await store.passProgress();
  if (p && p.kind === 'resync' && p.finishedAt === null) return { kind: 'resync', seen: p.seen };
  return null;
}

const ids = new Set<number>();

/**
 * Makes CHANGES status changes (fewer when `until` says stop) on reviews `eligible` accepts and measures each one's
 * latency; with `pass`, the rate of that pass over the phase (reviews/s from its `seen` counter).
 */
async function phase(options: { until?: () => boolean; eligible?: (id: number) => Promise<boolean> } = {}) {
  const sent: { key: string; at: number }[] = [];
  const waitsBefore = await pollWaits();
  const throttledBefore = sim.control.stats().throttled;
  const load = [loadavg()[0]!];
  while (sent.length < CHANGES && !options.until?.()) {
    const id = 1 + Math.floor(Math.random() * REVIEWS);
    if (ids.has(id) || !(await (options.eligible?.(id) ?? true))) continue;
    ids.add(id);
    const current = sim.control.get(id)!;
    const to = current.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
    const at = Date.now();
    const review = sim.control.setStatus(id, { client: to });
    sent.push({ key: `${id}|${review.updated_date}`, at });
    await sleep(SPACING_MIN + Math.random() * (SPACING_MAX - SPACING_MIN));
  }
  const deadline = Date.now() + 3 * POLL_MS + 30_000;
  while (sent.some((s) => !received.has(s.key)) && Date.now() < deadline) await sleep(50);
  load.push(loadavg()[0]!);
  const latencies = sent.filter((s) => received.has(s.key)).map((s) => received.get(s.key)! - s.at);
  const p99 = percentile(latencies, 99);
  return {
    changes: sent.length,
    received: latencies.length,
    missing: sent.length - latencies.length,
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    p99Ms: p99,
    maxMs: Math.max(...latencies),
    minMs: Math.min(...latencies),
    pollLimiterWaits: waitFigures(waitsBefore, await pollWaits()),
    throttled: sim.control.stats().throttled - throttledBefore,
    loadAverage1m: { start: round(load[0]!, 2), end: round(load[1]!, 2) },
    target: { p99Ms: `<= ${TARGET_P99_MS}`, met: sent.length - latencies.length === 0 && p99 <= TARGET_P99_MS },
    latenciesMs: latencies,
  };
}

/** Samples a pass's `seen` while `body` runs; resolves the body's result and the pass's rate over that window. */
async function withPassRate<T>(kind: string, body: (ended: () => boolean) => Promise<T>) {
  let first: { at: number; seen: number } | null = null;
  let last: { at: number; seen: number } | null = null;
  let ended = false;
  const sampler = (async () => {
    while (!ended) {
      const pass = await runningPass();
      if (pass?.kind === kind) {
        const sample = { at: Date.now(), seen: pass.seen };
        first ??= sample;
        last = sample;
      } else if (first) ended = true;
      await sleep(200);
    }
  })();
  const result = await body(() => ended);
  const stillRunning = !ended;
  ended = true;
  await sampler;
  const f = first as { at: number; seen: number } | null;
  const l = last as { at: number; seen: number } | null;
  const rate = f && l && l.at > f.at ? (l.seen - f.seen) / ((l.at - f.at) / 1000) : null;
  return {
    result,
    pass: {
      kind,
      reviewsPerSecond: rate === null ? null : round(rate, 0),
      shareOfCeiling: rate === null ? null : round(rate / CEILING_PER_S, 3),
      runningAtPhaseEnd: stillRunning,
    },
  };
}

try {
  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true;
  });
  await consumer.connect();
  // A topic created a moment ago may not be in every broker's metadata yet (UNKNOWN_TOPIC_OR_PARTITION): retried.
  for (let attempt = 0; ; attempt++) {
    try {
      await consumer.subscribe({ topics: [config.kafka.topics.statusChanged], fromBeginning: true });
      break;
    } catch (err) {
      if (attempt >= 100) throw err;
      await sleep(300);
    }
  }
  await consumer.run({
    eachMessage: async ({ message }) => {
      const at = Date.now();
      const event = JSON.parse(message.value!.toString()) as ReviewStatusChangedEvent;
      received.set(`${event.subject}|${event.data.review.updated_date}`, at);
    },
  });
  while (!joined) await sleep(50);

  // 1. During the initial load: only reviews the load has stored (a poll finds them as changes, not creates).
  while ((await runningPass())?.kind !== 'initial') await sleep(50);
  const initialLoad = await withPassRate('initial', (ended) =>
    phase({
      until: ended,
      eligible: async (id) => (await store.read([id])).has(id),
    }),
  );
  while (!(await store.checkpoint()).initialDone) await sleep(100);

  // 2. Idle.
  const idle = await phase();

  // 3. A sweep whose pages carry many events.
  let edited = 0;
  for (let id = 1; id <= REVIEWS; id += EDIT_EVERY) {
    sim.control.edit(id, { headline: `edited for the latency benchmark ${id}` });
    edited++;
  }
  await store.requestSweep();
  while ((await runningPass())?.kind !== 'sweep') await sleep(50);
  const sweep = await withPassRate('sweep', (ended) => phase({ until: ended }));
  while (await runningPass()) await sleep(100);

  // 4. A resync of every review.
  await store.requestResync({ id: randomUUID(), requestedAt: Date.now(), scope: { kind: 'all' } });
  while ((await runningPass())?.kind !== 'resync') await sleep(50);
  const resync = await withPassRate('resync', (ended) => phase({ until: ended }));

  const strip = <T extends { latenciesMs: number[] }>(p: T) => {
    const { latenciesMs: _, ...rest } = p;
    return rest;
  };
  const phases = {
    initialLoad: { ...strip(initialLoad.result), pass: initialLoad.pass },
    idle: strip(idle),
    sweepWithEvents: { ...strip(sweep.result), pass: sweep.pass, reviewsEditedBeforeTheSweep: edited },
    resync: { ...strip(resync.result), pass: resync.pass },
  };
  const result = {
    setup:
      `defaults (poll interval ${config.poll.intervalMs} ms), simulator default throttle, ` +
      `${REVIEWS} reviews, INITIAL_LOAD_MODE=suppress, ${CHANGES} changes per phase on distinct reviews spaced ` +
      `${SPACING_MIN}-${SPACING_MAX} ms; consumer maxWaitTimeInMs 50`,
    runtime: process.version,
    loadAverageAtStart,
    loadAverageAtEnd: loadavg().map((l) => round(l, 2)),
    met: Object.values(phases).every((p) => p.target.met),
    phases,
    latenciesMs: {
      initialLoad: initialLoad.result.latenciesMs,
      idle: idle.latenciesMs,
      sweepWithEvents: sweep.result.latenciesMs,
      resync: resync.result.latenciesMs,
    },
  };
  const file = writeResult(process.env.BENCH_RESULT ?? 'latency', result);
  console.log(JSON.stringify({ met: result.met, phases }, null, 2));
  console.log(`written ${file}`);
} finally {
  await consumer.disconnect().catch(() => undefined);
  await app.stop();
  await sim.close();
  await dropAccount(redis, keys);
  await redis.quit();
  await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
}
