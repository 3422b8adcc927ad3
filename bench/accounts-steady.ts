import { setTimeout as sleep } from 'node:timers/promises';
import {
  awaitDelivery,
  leaders,
  makeChanges,
  matchChanges,
  ProcessMeter,
  spawnReplica,
  split,
  startFleet,
  StatusEvents,
  waitInitialLoads,
  type Change,
  type Replica,
} from './accounts-lib.js';
import { percentile, round, writeResult } from './lib.js';

// Steady state of many accounts on two replicas: BENCH_ACCOUNTS (default 100) accounts of one multi-account
// simulator (default throttle, 10 requests/s per account), served by two bridge replicas as child processes
// (`node --import tsx src/cli.ts run` with BRIDGE_ACCOUNTS_FILE, shared topics, INITIAL_LOAD_MODE=suppress, default
// poll timing: every POLL_MIN_INTERVAL_MS = 1 s while no sweep runs). After the initial loads (BENCH_REVIEWS, default
// 50 per account) and the 50/50 split of leadership, status changes on random accounts (BENCH_CHANGES_PER_S, default
// 10/s, for BENCH_DURATION_S, default 60 s), each timed from just before the control call to the consumer's receipt
// of its review.status_changed. CPU and RSS of each replica from /proc over the change phase.
// With BENCH_SWEEP_REVIEWS=N (latency benchmark, issue 19), account a001 holds N reviews and a sweep of it is
// requested once the loads are done: the changes are made while it runs (the phase ends with it or the duration),
// and its share of the ceiling (10 requests/s x 100 reviews) is reported.

const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100);
const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 50);
const PER_SECOND = Number(process.env.BENCH_CHANGES_PER_S ?? 10);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 60);
const SWEEP_REVIEWS = Number(process.env.BENCH_SWEEP_REVIEWS ?? 0);
const SWEEPER = 'a001';

const fleet = await startFleet(
  ACCOUNTS,
  { reviewCount: REVIEWS },
  { INITIAL_LOAD_MODE: 'suppress' },
  SWEEP_REVIEWS > 0 ? { [SWEEPER]: { reviewCount: SWEEP_REVIEWS } } : {},
);
const replicas: Replica[] = [];
const events = new StatusEvents();
try {
  const started = Date.now();
  replicas.push(await spawnReplica(fleet, 'replica-1'), await spawnReplica(fleet, 'replica-2'));
  const loadMs = await waitInitialLoads(fleet, 300_000);
  console.log(
    `${ACCOUNTS} initial loads done in ${round(loadMs / 1000)} s (replicas started ${round((Date.now() - started) / 1000)} s ago)`,
  );
  // Let the balance settle: each replica should lead ceil(accounts / 2).
  const share = Math.ceil(ACCOUNTS / 2);
  for (let i = 0; i < 120; i++) {
    const s = split(await leaders(fleet));
    if (replicas.every((r) => (s[String(r.child.pid)] ?? 0) >= ACCOUNTS - share)) break;
    await sleep(500);
  }
  const splitBefore = split(await leaders(fleet));
  await events.start(fleet.topics.statusChanged);
  const meter = new ProcessMeter(Object.fromEntries(replicas.map((r) => [r.name, r.child.pid])));
  const sent: Change[] = [];
  // The sweep of the large account, sampled every 200 ms from its checkpoint while the changes are made.
  const sweeper = fleet.stores.get(SWEEPER)!;
  const sweepSamples: { at: number; seen: number }[] = [];
  let sweepEnded = false;
  let sampling: Promise<void> = Promise.resolve();
  if (SWEEP_REVIEWS > 0) {
    await sweeper.requestSweep();
    while (!(await sweeper.checkpoint()).sweep) await sleep(50);
    sampling = (async () => {
      while (!sweepEnded) {
        const c = await sweeper.checkpoint();
        if (c.sweep) sweepSamples.push({ at: Date.now(), seen: c.sweep.seen });
        else sweepEnded = true;
        await sleep(200);
      }
    })();
  }
  const throttledBefore = fleet.ids.reduce((n, id) => n + fleet.sim.accounts.get(id)!.control.stats().throttled, 0);
  const end = Date.now() + DURATION_S * 1000;
  await makeChanges(fleet, REVIEWS, PER_SECOND, () => Date.now() >= end || (SWEEP_REVIEWS > 0 && sweepEnded), sent);
  const sweepRunningAtEnd = SWEEP_REVIEWS > 0 && !sweepEnded;
  sweepEnded = true;
  await sampling;
  const usage = meter.stop();
  const throttled =
    fleet.ids.reduce((n, id) => n + fleet.sim.accounts.get(id)!.control.stats().throttled, 0) - throttledBefore;
  const firstSample = sweepSamples[0];
  const lastSample = sweepSamples[sweepSamples.length - 1];
  const sweepRate =
    firstSample && lastSample && lastSample.at > firstSample.at
      ? (lastSample.seen - firstSample.seen) / ((lastSample.at - firstSample.at) / 1000)
      : null;
  await awaitDelivery(sent, events, 15_000);
  const splitAfter = split(await leaders(fleet));

  const { latencies, byAccount } = matchChanges(sent, events);
  const perAccountP99 = [...byAccount.values()]
    .filter((a) => a.latencies.length > 0)
    .map((a) => percentile(a.latencies, 99));
  const missing = [...byAccount.values()].reduce((s, a) => s + a.missing.length, 0);
  const named = (s: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(s).map(([pid, n]) => [replicas.find((r) => String(r.child.pid) === pid)?.name ?? pid, n]),
    );
  const perReplica = Object.fromEntries(
    replicas.map((r) => {
      const p = usage.processes[r.name];
      const led = named(splitAfter)[r.name] ?? 0;
      // A replica that exited during the window (a crash: see its log) has no figures; say so instead of failing.
      if (!p) return [r.name, { exited: true, log: `${fleet.dir}/${r.name}.log`, accountsLed: led }];
      return [
        r.name,
        {
          ...p,
          accountsLed: led,
          cpuPercentPerLedAccount: led ? round(p.cpuPercentOfOneCore / led, 2) : null,
          rssMiBPerConfiguredAccount: round(p.rssMiB.p50 / ACCOUNTS, 2),
        },
      ];
    }),
  );
  const figures = {
    changes: sent.length,
    received: latencies.length,
    missing,
    duplicates: events.duplicates(),
    throttled,
    sweep:
      SWEEP_REVIEWS > 0
        ? {
            account: SWEEPER,
            reviews: SWEEP_REVIEWS,
            reviewsPerSecond: sweepRate === null ? null : round(sweepRate, 0),
            shareOfCeiling: sweepRate === null ? null : round(sweepRate / 1000, 3),
            runningAtPhaseEnd: sweepRunningAtEnd,
          }
        : null,
    overall: {
      p50Ms: percentile(latencies, 50),
      p95Ms: percentile(latencies, 95),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
    },
    perAccountP99Ms: {
      accounts: perAccountP99.length,
      changesPerAccountMedian: percentile(
        [...byAccount.values()].map((a) => a.made),
        50,
      ),
      median: percentile(perAccountP99, 50),
      p90: percentile(perAccountP99, 90),
      max: Math.max(...perAccountP99),
    },
    split: { beforeChanges: named(splitBefore), afterChanges: named(splitAfter) },
    window: { seconds: usage.seconds, machineBusyPercentOfAllCores: usage.machineBusyPercentOfAllCores },
    replicas: perReplica,
  };
  const file = writeResult(process.env.BENCH_RESULT ?? 'accounts-steady', {
    settings: {
      accounts: ACCOUNTS,
      reviewsPerAccount: REVIEWS,
      changesPerSecond: PER_SECOND,
      durationS: DURATION_S,
      sweepReviews: SWEEP_REVIEWS,
    },
    initialLoadsSeconds: round(loadMs / 1000),
    ...figures,
    perAccount: Object.fromEntries(
      [...byAccount].map(([id, a]) => [
        id,
        { made: a.made, missing: a.missing.length, p99Ms: a.latencies.length ? percentile(a.latencies, 99) : null },
      ]),
    ),
  });
  console.log(JSON.stringify(figures, null, 2));
  console.log(`written ${file}`);
} finally {
  await events.stop();
  await Promise.all(replicas.map((r) => r.child.stop()));
  await fleet.close();
}
