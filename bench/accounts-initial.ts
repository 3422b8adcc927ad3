import { setTimeout as sleep } from 'node:timers/promises';
import { checkpoints, ProcessMeter, servicePids, spawnReplica, startFleet, type Replica } from './accounts-lib.js';
import { percentile, round, writeResult } from './lib.js';

// Ten initial loads at once in one bridge process: BENCH_INITIAL_ACCOUNTS (default 10) accounts of one
// multi-account simulator (this process), each with its own default throttle (10 requests/s, pages of 100: a
// ceiling of 1,000 reviews/s per account) and BENCH_INITIAL_REVIEWS reviews (default 20,000), loaded by one bridge
// process (`node --import tsx src/cli.ts run`, shared topics, INITIAL_LOAD_MODE=mark: every review.created
// published and acknowledged). Per account: reviews/s from its checkpoint (sweep.startedAt to lastSweepAt) and its
// share of the ceiling; the total; CPU of the bridge, of this process (the simulator), of Kafka and Redis, and of
// the machine, so that the bound (upstream throttle, CPU, Kafka/Redis) can be read off.

const ACCOUNTS = Number(process.env.BENCH_INITIAL_ACCOUNTS ?? 10);
const REVIEWS = Number(process.env.BENCH_INITIAL_REVIEWS ?? 20_000);
const MODE = process.env.BENCH_INITIAL_LOAD_MODE ?? 'mark';
const CEILING = 10 * 100;

const fleet = await startFleet(ACCOUNTS, { reviewCount: REVIEWS }, { INITIAL_LOAD_MODE: MODE });
let bridge: Replica | null = null;
try {
  bridge = await spawnReplica(fleet, 'bridge');
  // Pass times from the checkpoints, sampled every 100 ms: an initial load's sweep.startedAt while it runs, its
  // lastSweepAt once done. The CPU window starts when the first load has started (not the process's start-up).
  const startedAt = new Map<string, number>();
  const finishedAt = new Map<string, number>();
  let meter: ProcessMeter | null = null;
  const windowStart = Date.now();
  while (finishedAt.size < ACCOUNTS) {
    for (const [id, c] of await checkpoints(fleet)) {
      if (c.sweep && !startedAt.has(id)) startedAt.set(id, c.sweep.startedAt);
      if (c.initialDone && c.lastSweepAt !== null && !finishedAt.has(id)) finishedAt.set(id, c.lastSweepAt);
    }
    if (meter === null && startedAt.size > 0) {
      const services = servicePids();
      meter = new ProcessMeter({
        bridge: bridge.child.pid,
        'simulator+bench': process.pid,
        ...(services.kafka ? { kafka: services.kafka } : {}),
        ...(services.redis ? { redis: services.redis } : {}),
      });
    }
    if (Date.now() - windowStart > 30 * 60_000)
      throw new Error(`initial loads: ${finishedAt.size} of ${ACCOUNTS} done`);
    await sleep(100);
  }
  if (meter === null || startedAt.size < ACCOUNTS)
    throw new Error('a load finished before its start was sampled: use more reviews');
  const sizes = new Map(
    await Promise.all(fleet.ids.map(async (id) => [id, await fleet.stores.get(id)!.size()] as const)),
  );
  const usage = meter.stop();
  const perAccount = Object.fromEntries(
    fleet.ids.map((id) => {
      const seconds = (finishedAt.get(id)! - startedAt.get(id)!) / 1000;
      const reviews = sizes.get(id)!;
      const stats = fleet.sim.accounts.get(id)!.control.stats();
      return [
        id,
        {
          reviews,
          seconds: round(seconds),
          reviewsPerSecond: round(reviews / seconds, 0),
          shareOfCeiling: round(reviews / seconds / CEILING, 3),
          requests: stats.requests,
          throttled: stats.throttled,
        },
      ];
    }),
  );
  const rates = Object.values(perAccount).map((a) => a.reviewsPerSecond);
  const first = Math.min(...startedAt.values());
  const last = Math.max(...finishedAt.values());
  const total = [...sizes.values()].reduce((s, n) => s + n, 0);
  const figures = {
    perAccountReviewsPerSecond: {
      min: Math.min(...rates),
      median: percentile(rates, 50),
      max: Math.max(...rates),
      shareOfCeilingMedian: round(percentile(rates, 50) / CEILING, 3),
    },
    total: {
      reviews: total,
      seconds: round((last - first) / 1000),
      reviewsPerSecond: round(total / ((last - first) / 1000), 0),
      ceiling: CEILING * ACCOUNTS,
    },
    throttled: Object.values(perAccount).reduce((s, a) => s + a.throttled, 0),
    requests: Object.values(perAccount).reduce((s, a) => s + a.requests, 0),
    cpu: usage,
    cpuMsPer1000Reviews: round((1000 * 1000 * usage.processes.bridge!.cpuSeconds) / total, 0),
  };
  const file = writeResult('accounts-initial', {
    settings: { accounts: ACCOUNTS, reviewsPerAccount: REVIEWS, initialLoadMode: MODE, ceilingPerAccount: CEILING },
    ...figures,
    perAccount,
  });
  console.log(JSON.stringify({ ...figures, perAccount }, null, 2));
  console.log(`written ${file}`);
} finally {
  await bridge?.child.stop();
  await fleet.close();
}
