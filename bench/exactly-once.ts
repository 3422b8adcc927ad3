import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { startApp } from '../src/app/app.js';
import { restoreFromChangelog } from '../src/bridge/restore.js';
import { EMPTY_CHANGELOG_CHECKPOINT } from '../src/core/changelog.js';
import { FingerprintKey } from '../src/core/fingerprint-key.js';
import { fingerprint, type SnapshotEntry } from '../src/core/snapshot-entry.js';
import { loadConfig } from '../src/config/config.js';
import { KafkaPublisher } from '../src/kafka/publisher.js';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { Lease } from '../src/redis/lease.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import { generateBaseReview } from '../src/simulator/data.js';
import type { Review } from '../src/core/review.js';
import { startSimulator } from '../src/simulator/index.js';
import {
  BENCH_KEY_PREFIX,
  benchEnv,
  dropAccount,
  dropTopics,
  round,
  services,
  uniqueName,
  writeResult,
} from './lib.js';

// What Kafka as the source of truth costs, and what it buys back:
// 1. the initial load's share of the 1,000 reviews/s ceiling with KAFKA_EXACTLY_ONCE on and off (the real bridge,
//    startApp, against the simulator's default throttle), and the changelog bytes per review it wrote;
// 2. restore time and rate of a Redis that lost everything, for BENCH_RESTORE_SIZES entries (default 100,000 and
//    1,000,000), the changelog written directly (transactions of 5,000 entries).
// Figures are printed and written to bench/results/exactly-once.json.

const LOAD_REVIEWS = Number(process.env.BENCH_EOS_REVIEWS ?? 20_000);
const SIZES = (process.env.BENCH_RESTORE_SIZES ?? '100000,1000000').split(',').map(Number);
const CEILING = 1_000;
const { kafkaBrokers, redisUrl } = services();
const logger = pino({ level: 'warn' });

async function initialLoad(exactlyOnce: boolean) {
  const sim = await startSimulator({ reviewCount: LOAD_REVIEWS, seed: 11 });
  const account = uniqueName(`bench-eos-${exactlyOnce ? 'on' : 'off'}`);
  const config = loadConfig(benchEnv(account, sim.url, { KAFKA_EXACTLY_ONCE: exactlyOnce ? 'on' : 'off' }));
  const redis = connectRedis(redisUrl);
  const keys = accountKeys(BENCH_KEY_PREFIX, account);
  const store = new SnapshotStore(redis, keys);
  const app = await startApp(config, logger);
  try {
    let startedAt: number | null = null;
    for (;;) {
      const c = await store.checkpoint();
      if (c.sweep) startedAt ??= c.sweep.startedAt;
      if (c.initialDone && startedAt !== null && c.lastSweepAt !== null) {
        const seconds = (c.lastSweepAt - startedAt) / 1000;
        const bytes = await changelogBytes(config.kafka, account);
        return {
          reviews: LOAD_REVIEWS,
          seconds: round(seconds, 2),
          fractionOfCeiling: round(LOAD_REVIEWS / seconds / CEILING, 3),
          throttled: sim.control.stats().throttled,
          changelogBytesPerReview: round(bytes / LOAD_REVIEWS, 1),
        };
      }
      await sleep(20);
    }
  } finally {
    await app.stop();
    await sim.close();
    await dropAccount(redis, keys);
    await redis.quit();
    await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
  }
}

// Key, value and header bytes of every changelog record (before compaction and record-batch overhead).
async function changelogBytes(kafka: ReturnType<typeof loadConfig>['kafka'], account: string): Promise<number> {
  const publisher = new KafkaPublisher({ ...kafka, createTopics: false }, account, logger);
  await publisher.connect();
  let bytes = 0;
  try {
    await publisher.beginTransactions();
    await publisher.readChangelog({}, async (records) => {
      for (const r of records) if (r.key !== 'restore-marker') bytes += r.key.length + (r.value?.length ?? 0) + 16;
    });
  } finally {
    await publisher.disconnect();
  }
  return bytes;
}

async function restore(size: number) {
  const account = uniqueName('bench-restore');
  const config = loadConfig(benchEnv(account, 'http://127.0.0.1:1'));
  const redis = connectRedis(redisUrl);
  const keys = accountKeys(BENCH_KEY_PREFIX, account);
  const store = new SnapshotStore(redis, keys);
  const publisher = new KafkaPublisher(config.kafka, account, logger);
  await publisher.connect();
  await publisher.beginTransactions();
  const key = new FingerprintKey(Buffer.alloc(32, 3));
  try {
    // The changelog of an account of `size` reviews, as its commits would have written it.
    const t0 = performance.now();
    const BATCH = 5_000;
    for (let first = 1, txn = 1; first <= size; first += BATCH, txn++) {
      const entries: Array<[number, SnapshotEntry]> = [];
      for (let id = first; id < Math.min(first + BATCH, size + 1); id++) {
        const r = generateBaseReview(11, id) as unknown as Review;
        const fp = fingerprint(r, key);
        entries.push([
          id,
          {
            client: r.client_publication_status,
            pwr: r.pwr_publication_status,
            updatedDate: r.updated_date,
            sequence: 1,
            observedAt: Date.now(),
            ...fp,
          },
        ]);
      }
      const checkpoint = { ...EMPTY_CHANGELOG_CHECKPOINT, initialDone: first + BATCH > size, txn, epoch: 1 };
      await publisher.publish([], [], [], { entries, checkpoint });
    }
    const writeSeconds = (performance.now() - t0) / 1000;
    const lease = new Lease(redis, keys, 60_000);
    const epoch = await lease.renew();
    const rss0 = process.memoryUsage().rss;
    let rssMax = rss0;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 100);
    const r0 = performance.now();
    const outcome = await restoreFromChangelog(
      {
        changelogState: () => store.changelogState(),
        clearForRestore: () => store.clearForRestore(),
        restoreEntries: (e, verify) => store.restoreEntries(e, verify),
        restoreFinish: (e, c, o, cl) => store.restoreFinish(e, c, o, cl),
        setKafkaCluster: (c) => store.setKafkaCluster(c),
        seal: (e) => store.seal(e),
        sealIfComplete: (e) => store.sealIfComplete(e),
        readChangelog: (from, onRecords) => publisher.readChangelog(from, onRecords),
        clusterId: () => publisher.clusterId(),
      },
      { logger, metrics: { restoreFinished: () => undefined }, clock: Date.now },
      epoch,
    );
    const seconds = (performance.now() - r0) / 1000;
    clearInterval(sampler);
    const restored = await store.size();
    return {
      entries: size,
      restoredEntries: restored,
      changelogWriteSeconds: round(writeSeconds, 1),
      restoreSeconds: round(seconds, 2),
      entriesPerSecond: Math.round(outcome.entries / seconds),
      rssGrowthMiB: round((rssMax - rss0) / 2 ** 20, 1),
      met: restored === size && outcome.entries / seconds >= 50_000,
    };
  } finally {
    await publisher.disconnect();
    await dropAccount(redis, keys);
    await redis.quit();
    await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
  }
}

const load = { on: await initialLoad(true), off: await initialLoad(false) };
console.log('initial load', JSON.stringify(load));
const restores: Record<string, unknown> = {};
for (const size of SIZES) {
  restores[String(size)] = await restore(size);
  console.log(`restore ${size}`, JSON.stringify(restores[String(size)]));
}
const lost = round((load.off.fractionOfCeiling - load.on.fractionOfCeiling) * 100, 1);
const result = {
  setup: `initial load of ${LOAD_REVIEWS} reviews through startApp against the simulator's default throttle; restores into an empty account namespace; shared Kafka ${kafkaBrokers.join(',')} and Redis ${redisUrl}`,
  initialLoad: load,
  pointsLostWithTransactions: lost,
  restores,
  targets: {
    'restore at least 50,000 entries/s': Object.values(restores).every((r) => (r as { met: boolean }).met),
    'transactions cost at most 5 points of the ceiling': lost <= 5,
  },
};
console.log(`written ${writeResult('exactly-once', result)}`);
