import { PrivateRedis } from '../test/helpers/processes.js';
import {
  benchPasses,
  dropAccount,
  dropTopics,
  InMemorySource,
  round,
  RssSampler,
  services,
  writeResult,
} from './lib.js';

// Memory of the bridge process during passes over a million reviews, and the size of the snapshot in Redis.
//  - Pass 1: initial load of BENCH_REVIEWS (default 1,000,000) reviews with INITIAL_LOAD_MODE=suppress: every
//    review read, validated, diffed and written to the snapshot, no events (publish NOT included: a million
//    created events would put ~1.5 GB on the shared broker).
//  - Pass 2: a sweep over the same million, unchanged (nothing to publish by nature).
//  - Pass 3: initial load of BENCH_PUBLISH_REVIEWS (default 200,000) other reviews in 'mark' mode: publish
//    included, every review.created sent to Kafka and acknowledged.
// Pages are generated on demand (the simulator's generator, serialised and parsed again per page), so the source
// holds nothing. RSS sampled every 100 ms. Redis bytes per review: MEMORY USAGE summed over the account's bucket
// keys (and the INFO used_memory delta) of a private redis-server (no persistence) divided by the review count.

const N = Number(process.env.BENCH_REVIEWS ?? 1_000_000);
const N_PUBLISH = Number(process.env.BENCH_PUBLISH_REVIEWS ?? 200_000);
const REDIS_PORT = Number(process.env.BENCH_REDIS_PORT ?? 36579);
const { kafkaBrokers } = services();

const redisServer = new PrivateRedis(REDIS_PORT, 'bench-redis', 'none');
redisServer.wipe();
await redisServer.start();
try {
  const bp = await benchPasses(new InMemorySource({ count: N }), {
    redisUrl: redisServer.url,
    kafkaBrokers,
    initialLoadMode: 'suppress',
  });
  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await bp.redis.info('memory'))?.[1]);
  const memoryBefore = await usedMemory();

  const passes: Record<string, unknown> = {};
  const pass = async (name: string, count: number, run: () => Promise<{ events: number }>) => {
    const rss = new RssSampler();
    const t0 = performance.now();
    const { events } = await run();
    const seconds = (performance.now() - t0) / 1000;
    passes[name] = {
      reviews: count,
      events,
      seconds: round(seconds, 1),
      reviewsPerSecond: Math.round(count / seconds),
      ...rss.stop(),
    };
    console.log(name, JSON.stringify(passes[name]));
  };

  await pass('initialLoadSuppressed', N, () => bp.sweep());
  await pass('sweepUnchanged', N, () => bp.sweep());

  // Snapshot size.
  const size = await bp.store.size();
  let bucketBytes = 0;
  let buckets = 0;
  const encodings: Record<string, number> = {};
  let cursor = '0';
  do {
    const [next, keys] = await bp.redis.scan(cursor, 'MATCH', bp.keys.bucketPattern, 'COUNT', 1000);
    cursor = next;
    const pipeline = bp.redis.pipeline();
    for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', '0').object('ENCODING', key);
    const results = (await pipeline.exec()) ?? [];
    for (let i = 0; i < results.length; i += 2) {
      const [err, bytes] = results[i]!;
      const [err2, enc] = results[i + 1]!;
      if (err || err2) throw err ?? err2;
      bucketBytes += Number(bytes);
      buckets += 1;
      encodings[String(enc)] = (encodings[String(enc)] ?? 0) + 1;
    }
  } while (cursor !== '0');
  const memoryAfter = await usedMemory();
  const snapshot = {
    reviews: size,
    bucketKeys: buckets,
    // Buckets hold 128 entries; Redis keeps a hash as a compact listpack only while every value is <= 64 bytes
    // (hash-max-listpack-value): an entry with a status outside PENDING/APPROVED/REJECTED is longer.
    bucketEncodings: encodings,
    bytesPerReviewMemoryUsage: round(bucketBytes / size, 1),
    bytesPerReviewUsedMemoryDelta: round((memoryAfter - memoryBefore) / size, 1),
    totalMiB: round(bucketBytes / 2 ** 20, 1),
  };
  console.log('snapshot', JSON.stringify(snapshot));
  await dropAccount(bp.redis, bp.keys);
  await bp.close();

  // Publish included, on a fresh account.
  const pub = await benchPasses(new InMemorySource({ count: N_PUBLISH }), { redisUrl: redisServer.url, kafkaBrokers });
  try {
    await pass('initialLoadPublished', N_PUBLISH, () => pub.sweep());
  } finally {
    await dropAccount(pub.redis, pub.keys);
    await pub.close();
    await dropTopics(kafkaBrokers, Object.values(pub.topics));
  }

  const maxRss = Math.max(...Object.values(passes).map((p) => (p as { rssMiB: { max: number } }).rssMiB.max));
  const result = {
    setup: `in-memory source generating pages on demand; real Passes/SnapshotStore/KafkaPublisher; private redis-server ${redisServer.url}`,
    passes,
    snapshot,
    targets: {
      rssMiB: { target: '< 256 (well under), flat', measuredMax: maxRss, met: maxRss < 256 },
      snapshotBytesPerReview: {
        target: 200,
        measured: snapshot.bytesPerReviewMemoryUsage,
        met: snapshot.bytesPerReviewMemoryUsage <= 200,
      },
    },
  };
  const file = writeResult('memory', result);
  console.log(JSON.stringify(result.targets, null, 2));
  console.log(`written ${file}`);
} finally {
  await redisServer.stop();
}
