import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { accountKeys } from '../src/redis/connection.js';
import { Lease } from '../src/redis/lease.js';
import { freePort, spawnLogged } from '../test/helpers/processes.js';
import {
  awaitDelivery,
  checkpoints,
  leaders,
  makeChanges,
  matchChanges,
  procStat,
  ProcessMeter,
  split,
  startFleet,
  StatusEvents,
  waitInitialLoads,
  type Change,
  type Fleet,
  type Replica,
} from './accounts-lib.js';
import { imageNodeFlags, memoryFigures, percentile, round, writeResult } from './lib.js';

// Memory per account: BENCH_ACCOUNTS (default 1,000) accounts of one multi-account simulator (src/simulator/multi.ts,
// default throttle), served by two replicas of the compiled bridge started as the image starts it (`node dist/src/cli.js run`: `run`
// caps its own heap by the number of accounts; BENCH_NODE_FLAGS adds flags), BRIDGE_ACCOUNTS_FILE, shared topics, suppressed initial
// loads of BENCH_REVIEWS, default 20, reviews per account).
//  1. Configured, not led: this benchmark holds every account's lease itself, so the replicas (and a third one
//     configured with a single account, the base) start and stand by. RSS of each (median of 10 s of samples);
//     per configured account = (RSS with all accounts - RSS with one) / (accounts - 1). Start time: from spawn until
//     the replica's liveness reports every account standing by.
//  2. Led: the leases are released; the two replicas split the accounts and run their initial loads. Per led
//     account = (RSS while leading half - RSS while leading none) / accounts led.
//  3. Steady state: status changes on random accounts (BENCH_CHANGES_PER_S, default 10/s, for BENCH_DURATION_S,
//     default 60 s), each timed from just before the control call to the receipt of its review.status_changed.
// BENCH_START_CONCURRENCY sets the replicas' LEADERSHIP_START_CONCURRENCY; BENCH_RESULT names the result file.
// While the replicas take the accounts on, a line every 5 s says how many leases each holds, how many accounts have
// finished their initial load and each replica's RSS: where a run that does not finish stood.

const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 1_000);
const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 20);
const PER_SECOND = Number(process.env.BENCH_CHANGES_PER_S ?? 10);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 60);
const TARGET_PER_CONFIGURED_MIB = 0.5;
/** LEADERSHIP_START_CONCURRENCY of the replicas (unset: the bridge's default). */
const START_CONCURRENCY = process.env.BENCH_START_CONCURRENCY;

const flags = imageNodeFlags();

/** A replica of the compiled bridge, as the image starts it; `accountsFile` replaces the fleet's. */
async function spawnImageReplica(fleet: Fleet, name: string, accountsFile?: string): Promise<Replica> {
  const port = await freePort();
  const env: Record<string, string> = { ...fleet.env, HTTP_PORT: String(port), NODE_OPTIONS: '' };
  if (START_CONCURRENCY) env.LEADERSHIP_START_CONCURRENCY = START_CONCURRENCY;
  if (accountsFile) env.BRIDGE_ACCOUNTS_FILE = accountsFile;
  const child = spawnLogged(
    process.execPath,
    [...flags, 'dist/src/cli.js', 'run'],
    env,
    join(fleet.dir, `${name}.log`),
  );
  return { name, child, port };
}

/** The roles of a replica's accounts, from its liveness detail; null while it does not answer. */
async function roles(port: number): Promise<Record<string, number> | null> {
  try {
    const body = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as Record<string, unknown>;
    const detail = (body.detail ?? body) as Record<string, unknown>;
    if (typeof detail.accounts === 'number') {
      return { accounts: detail.accounts, standby: Number(detail.standby ?? 0), leader: Number(detail.leader ?? 0) };
    }
    // One account: its own role.
    return { accounts: 1, standby: detail.role === 'standby' ? 1 : 0, leader: detail.role === 'leader' ? 1 : 0 };
  } catch {
    return null;
  }
}

/** Waits until every account of the replica stands by; resolves the ms since spawnedAt. */
async function allStandingBy(replica: Replica, accounts: number, spawnedAt: number): Promise<number> {
  for (;;) {
    const r = await roles(replica.port);
    if (r && r.accounts === accounts && r.standby === accounts) return Date.now() - spawnedAt;
    if (!replica.child.alive) throw new Error(`bench: ${replica.name} exited (${replica.child.logFile})`);
    await sleep(100);
  }
}

/** The kernel's peak RSS of a process so far (VmHWM, MiB), so that no peak falls between samples; null once gone. */
function peakRss(pid: number): number | null {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? round(Number(kb) / 1024) : null;
  } catch {
    return null;
  }
}

/** Median RSS (MiB) of each process over `seconds`, sampled every 500 ms. */
async function medianRss(pids: Record<string, number>, seconds: number): Promise<Record<string, number>> {
  const samples = new Map<string, number[]>(Object.keys(pids).map((n) => [n, []]));
  for (let i = 0; i < seconds * 2; i++) {
    for (const [name, pid] of Object.entries(pids)) {
      const s = procStat(pid);
      if (s) samples.get(name)!.push(s.rssBytes / 2 ** 20);
    }
    await sleep(500);
  }
  return Object.fromEntries([...samples].map(([n, list]) => [n, round(percentile(list, 50))]));
}

const fleet = await startFleet(ACCOUNTS, { reviewCount: REVIEWS }, { INITIAL_LOAD_MODE: 'suppress' });
const replicas: Replica[] = [];
const events = new StatusEvents();
try {
  // 1. Every lease held here: the replicas can only stand by.
  const held = fleet.ids.map((id) => new Lease(fleet.redis, accountKeys(fleet.prefix, id), 600_000, Date.now, 'bench'));
  await Promise.all(held.map((l) => l.renew()));
  const oneFile = join(fleet.dir, 'one-account.json');
  const entries = JSON.parse(readFileSync(fleet.env.BRIDGE_ACCOUNTS_FILE!, 'utf8')) as { accounts: unknown[] };
  writeFileSync(oneFile, JSON.stringify({ accounts: entries.accounts.slice(0, 1) }));

  const spawnedAt = Date.now();
  replicas.push(await spawnImageReplica(fleet, 'replica-1'), await spawnImageReplica(fleet, 'replica-2'));
  const startMs = await Promise.all(replicas.map((r) => allStandingBy(r, ACCOUNTS, spawnedAt)));
  const baseAt = Date.now();
  const base = await spawnImageReplica(fleet, 'one-account', oneFile);
  const baseStartMs = await allStandingBy(base, 1, baseAt);
  console.log(
    `replicas standing by for ${ACCOUNTS} accounts after ${startMs.join(', ')} ms (one account: ${baseStartMs} ms)`,
  );
  const standby = await medianRss(
    { ...Object.fromEntries(replicas.map((r) => [r.name, r.child.pid])), base: base.child.pid },
    10,
  );
  const heapStandby = await Promise.all(replicas.map((r) => memoryFigures(r.port)));
  await base.child.stop();
  const perConfigured = replicas.map((r) => (standby[r.name]! - standby.base!) / (ACCOUNTS - 1));
  console.log(
    'RSS standing by',
    JSON.stringify(standby),
    'per configured account MiB',
    perConfigured.map((v) => round(v, 3)),
  );

  // 2. The leases go; the replicas split the accounts and load them.
  const releasedAt = Date.now();
  await Promise.all(held.map((l) => l.release()));
  // Progress every 5 s while the replicas take the accounts on (which replica leads how many, RSS): the log says
  // where a run that does not finish stood.
  let loading = true;
  const progress = (async () => {
    while (loading) {
      const s = split(await leaders(fleet));
      const loaded = [...(await checkpoints(fleet)).values()].filter((c) => c.initialDone).length;
      const rss = replicas.map((r) => `${r.name} ${round((procStat(r.child.pid)?.rssBytes ?? 0) / 2 ** 20)} MiB`);
      const at = round((Date.now() - releasedAt) / 1000);
      console.log(`+${at} s leases ${JSON.stringify(s)} loaded ${loaded} rss ${rss.join(', ')}`);
      await sleep(5_000);
    }
  })();
  const loadMs = await waitInitialLoads(fleet, 900_000).finally(() => (loading = false));
  await progress;
  const share = Math.ceil(ACCOUNTS / 2);
  for (let i = 0; i < 240; i++) {
    const s = split(await leaders(fleet));
    if (replicas.every((r) => (s[String(r.child.pid)] ?? 0) >= ACCOUNTS - share)) break;
    await sleep(500);
  }
  const ledAfterMs = Date.now() - releasedAt;
  const peakTakingOn = Object.fromEntries(replicas.map((r) => [r.name, peakRss(r.child.pid)]));
  console.log(
    `initial loads done ${round(loadMs / 1000)} s, split settled ${round(ledAfterMs / 1000)} s after release`,
  );

  // 3. Steady state.
  await events.start(fleet.topics.statusChanged);
  const meter = new ProcessMeter(Object.fromEntries(replicas.map((r) => [r.name, r.child.pid])));
  const sent: Change[] = [];
  const end = Date.now() + DURATION_S * 1000;
  await makeChanges(fleet, REVIEWS, PER_SECOND, () => Date.now() >= end, sent);
  const usage = meter.stop();
  const heapLeading = await Promise.all(replicas.map((r) => memoryFigures(r.port)));
  await awaitDelivery(sent, events, 15_000);
  const leads = split(await leaders(fleet));
  const { latencies } = matchChanges(sent, events);

  const perReplica = Object.fromEntries(
    replicas.map((r, i) => {
      const p = usage.processes[r.name]!;
      const led = leads[String(r.child.pid)] ?? 0;
      return [
        r.name,
        {
          startToAllStandingByMs: startMs[i],
          rssMiBStandingBy: standby[r.name],
          heapMiBStandingBy: heapStandby[i],
          accountsLed: led,
          rssMiBLeading: p.rssMiB,
          heapMiBLeading: heapLeading[i],
          peakRssMiBTakingOn: peakTakingOn[r.name],
          peakRssMiBOverall: peakRss(r.child.pid),
          rssMiBPerConfiguredAccount: round(perConfigured[i]!, 3),
          rssMiBPerLedAccount: led ? round((p.rssMiB.p50 - standby[r.name]!) / led, 3) : null,
          cpuPercentOfOneCore: p.cpuPercentOfOneCore,
        },
      ];
    }),
  );
  const worstPerConfigured = Math.max(...perConfigured);
  const result = {
    settings: {
      accounts: ACCOUNTS,
      replicas: 2,
      reviewsPerAccount: REVIEWS,
      changesPerSecond: PER_SECOND,
      durationS: DURATION_S,
      command: `node ${[...flags, 'dist/src/cli.js', 'run'].join(' ')}`,
      leadershipStartConcurrency: START_CONCURRENCY ? Number(START_CONCURRENCY) : 'default',
    },
    oneAccountReplica: { startToStandingByMs: baseStartMs, rssMiBStandingBy: standby.base },
    replicas: perReplica,
    initialLoadsSeconds: round(loadMs / 1000),
    splitSettledSecondsAfterRelease: round(ledAfterMs / 1000),
    steadyState: {
      changes: sent.length,
      received: latencies.length,
      duplicates: events.duplicates(),
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
      machineBusyPercentOfAllCores: usage.machineBusyPercentOfAllCores,
    },
    targets: {
      rssPerConfiguredAccountMiB: {
        target: `<= ${TARGET_PER_CONFIGURED_MIB}`,
        measured: round(worstPerConfigured, 3),
        met: worstPerConfigured <= TARGET_PER_CONFIGURED_MIB,
      },
    },
  };
  const file = writeResult(process.env.BENCH_RESULT ?? 'accounts-memory', result);
  console.log(JSON.stringify(result, null, 2));
  console.log(`written ${file}`);
} finally {
  await events.stop();
  await Promise.all(replicas.map((r) => r.child.stop()));
  await fleet.close();
}
