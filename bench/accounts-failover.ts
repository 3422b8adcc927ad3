import { setTimeout as sleep } from 'node:timers/promises';
import {
  awaitDelivery,
  leaders,
  makeChanges,
  matchChanges,
  spawnReplica,
  split,
  startFleet,
  StatusEvents,
  waitInitialLoads,
  type Change,
  type Replica,
} from './accounts-lib.js';
import { percentile, writeResult } from './lib.js';

// Failover of many accounts: BENCH_FAILOVER_ACCOUNTS (default 20) accounts on two replicas (child processes, lease
// ttl BENCH_LEASE_TTL_MS, default the bridge's 15 s), status changes on random accounts throughout
// (BENCH_CHANGES_PER_S, default 5/s; each on a review not changed before, so none can collapse into another). After
// BENCH_BEFORE_KILL_S (default 15 s) one replica is SIGKILLed; the leases in Redis are polled every 100 ms to time
// until each of its accounts is led by the survivor, then changes go on for BENCH_AFTER_TAKEOVER_S (default 15 s).
// Every change must arrive as a review.status_changed (duplicates allowed, counted): per account, made vs delivered.

const ACCOUNTS = Number(process.env.BENCH_FAILOVER_ACCOUNTS ?? 20);
const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 500);
const PER_SECOND = Number(process.env.BENCH_CHANGES_PER_S ?? 5);
const TTL_MS = Number(process.env.BENCH_LEASE_TTL_MS ?? 15_000);
const BEFORE_KILL_S = Number(process.env.BENCH_BEFORE_KILL_S ?? 15);
const AFTER_S = Number(process.env.BENCH_AFTER_TAKEOVER_S ?? 15);

const fleet = await startFleet(
  ACCOUNTS,
  { reviewCount: REVIEWS },
  { INITIAL_LOAD_MODE: 'suppress', LEASE_TTL_MS: String(TTL_MS) },
);
const replicas: Replica[] = [];
const events = new StatusEvents();
let stopChanges = false;
try {
  replicas.push(await spawnReplica(fleet, 'replica-1'), await spawnReplica(fleet, 'replica-2'));
  await waitInitialLoads(fleet, 300_000);
  const share = Math.ceil(ACCOUNTS / 2);
  for (let i = 0; i < 120; i++) {
    const s = split(await leaders(fleet));
    if (replicas.every((r) => (s[String(r.child.pid)] ?? 0) >= ACCOUNTS - share)) break;
    await sleep(500);
  }
  await events.start(fleet.topics.statusChanged);
  const sent: Change[] = [];
  const changing = makeChanges(fleet, REVIEWS, PER_SECOND, () => stopChanges, sent);

  await sleep(BEFORE_KILL_S * 1000);
  const [survivor, victim] = replicas as [Replica, Replica];
  const before = await leaders(fleet);
  const victimAccounts = fleet.ids.filter((id) => before.get(id) === victim.child.pid);
  const killedAt = Date.now();
  await victim.child.kill();
  const takenAt = new Map<string, number>();
  const unledSince = new Map<string, number>();
  while (takenAt.size < victimAccounts.length && Date.now() - killedAt < 10 * TTL_MS) {
    const now = await leaders(fleet);
    for (const id of victimAccounts) {
      const holder = now.get(id);
      if (holder === null && !unledSince.has(id)) unledSince.set(id, Date.now());
      if (holder === survivor.child.pid && !takenAt.has(id)) takenAt.set(id, Date.now());
    }
    await sleep(100);
  }
  const allLedAt = takenAt.size === victimAccounts.length ? Math.max(...takenAt.values()) : null;
  const changesAtKill = sent.filter((c) => c.at < killedAt).length;
  await sleep(AFTER_S * 1000);
  stopChanges = true;
  await changing;
  await awaitDelivery(sent, events, 30_000);
  const byName = Object.fromEntries(replicas.map((r) => [String(r.child.pid), r.name]));
  const after = Object.fromEntries(
    Object.entries(split(await leaders(fleet))).map(([pid, n]) => [byName[pid] ?? pid, n]),
  );

  const { latencies, byAccount } = matchChanges(sent, events);
  const victimSet = new Set(victimAccounts);
  const takeover = [...takenAt.values()].map((t) => t - killedAt);
  const perAccount = Object.fromEntries(
    fleet.ids.map((id) => {
      const a = byAccount.get(id) ?? { made: 0, latencies: [], missing: [] };
      return [
        id,
        {
          ledByKilled: victimSet.has(id),
          takeoverMs: takenAt.has(id) ? takenAt.get(id)! - killedAt : null,
          made: a.made,
          delivered: a.latencies.length,
          lost: a.missing.length,
          maxLatencyMs: a.latencies.length ? Math.max(...a.latencies) : null,
        },
      ];
    }),
  );
  const latencyOf = (victims: boolean) =>
    [...byAccount].filter(([id]) => victimSet.has(id) === victims).flatMap(([, a]) => a.latencies);
  const figures = {
    split: {
      beforeKill: {
        'replica-1 (survivor)': ACCOUNTS - victimAccounts.length,
        'replica-2 (killed)': victimAccounts.length,
      },
      afterTakeover: after,
    },
    takeover: {
      accounts: victimAccounts.length,
      allLedBySurvivorAfterMs: allLedAt === null ? null : allLedAt - killedAt,
      perAccountMs: { min: Math.min(...takeover), median: percentile(takeover, 50), max: Math.max(...takeover) },
    },
    changes: {
      made: sent.length,
      madeBeforeKill: changesAtKill,
      delivered: latencies.length,
      lost: sent.length - latencies.length,
      accountsWithLoss: Object.values(perAccount).filter((a) => a.lost > 0).length,
      duplicateDeliveries: events.duplicates(),
    },
    latencyMs: {
      killedReplicasAccounts: { p50: percentile(latencyOf(true), 50), max: Math.max(...latencyOf(true)) },
      survivorsAccounts: { p50: percentile(latencyOf(false), 50), max: Math.max(...latencyOf(false)) },
    },
  };
  const file = writeResult('accounts-failover', {
    settings: {
      accounts: ACCOUNTS,
      reviewsPerAccount: REVIEWS,
      changesPerSecond: PER_SECOND,
      leaseTtlMs: TTL_MS,
      beforeKillS: BEFORE_KILL_S,
      afterTakeoverS: AFTER_S,
    },
    ...figures,
    perAccount,
  });
  console.log(JSON.stringify(figures, null, 2));
  console.log(`written ${file}`);
} finally {
  stopChanges = true;
  await events.stop();
  await Promise.all(replicas.map((r) => r.child.stop()));
  await fleet.close();
}
