import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { startApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/config.js';
import { accountKeys, connectRedis } from '../src/redis/connection.js';
import { SnapshotStore } from '../src/redis/snapshot-store.js';
import { startSimulator } from '../src/simulator/index.js';
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

// Polls under a sustained stream of status changes, at the bridge's default settings (polls every 1 s, the learned
// lookback) and the simulator's default throttle (10 requests/s, pages of 100: a ceiling of 1,000 reviews/s).
//
// BENCH_POLL_MODE=sustained (default): one account of BENCH_REVIEWS reviews (default: enough for the fastest phase,
// INITIAL_LOAD_MODE=suppress), then per rate of BENCH_POLL_RATES (default 20,100,300 changes/s) a phase of
// BENCH_POLL_PHASE_S (default 180) seconds of status changes, each on another review, made at an even pace by the
// control interface, with a sweep requested at the phase's start (its rate is what polls leave it). Per phase:
// p50/p95/p99/max latency of a change to its review.status_changed in a kafkajs consumer (read_committed), missing
// changes, and over the steady state (after BENCH_POLL_WARMUP_S, default 30 s): reviews read by polls per change
// found (reviews_processed_total{pass="incremental"} / poll_changes_total), the polls' share of the upstream's
// budget (their requests over 10/s), polls that overran their interval, the lookback, the sweep's reviews/s.
//
// BENCH_AHEAD_MS (sustained): before each phase, one status change stamped that far ahead of the present (a writer
// whose clock runs fast, issue 45): the phase's figures then say whether it hid anything; its own delivery is printed.
//
// BENCH_POLL_MODE=late (issue 45): as sustained, without a sweep, and BENCH_LATE_SHARE (default 0.1) of the changes
// shown BENCH_LATE_MIN_S..BENCH_LATE_MAX_S (10..20) s after their updated_date (the listing shows the review as it was
// until then). Per phase: p50/p99 from visibility of the on-time and the late changes, the largest delay of a late one,
// missing, reviews read by polls and trailing reads per change, the trailing reads' requests over the 10/s budget
// (no sweep runs: the limiter's non-poll queue is theirs), each tier's window and bound, late changes by finder.
//
// BENCH_POLL_MODE=soak: one account of BENCH_SOAK_REVIEWS (default 20,000) reviews, sweeps due every
// BENCH_SOAK_SWEEP_MS (default 120,000 = SWEEP_INTERVAL_MS), BENCH_SOAK_RATE (default 10) status changes/s and
// BENCH_SOAK_EDITS_PER_S (default 1) edits/s that keep updated_date (only sweeps find those) for BENCH_SOAK_S
// (default 600) s. Every sweep must complete, every status change arrive, every edit made before the last sweep
// that completed began arrive as review.updated; RSS and heap of this process (bridge, simulator and consumer) are
// sampled every 10 s, and the latency's p99 per minute is reported.

const MODE = process.env.BENCH_POLL_MODE ?? 'sustained';
const RATES = (process.env.BENCH_POLL_RATES ?? '20,100,300').split(',').map(Number);
const PHASE_S = Number(process.env.BENCH_POLL_PHASE_S ?? 180);
const WARMUP_S = Number(process.env.BENCH_POLL_WARMUP_S ?? 30);
const SOAK_S = Number(process.env.BENCH_SOAK_S ?? 600);
const LATE_SHARE = Number(process.env.BENCH_LATE_SHARE ?? 0.1);
const LATE_MIN_S = Number(process.env.BENCH_LATE_MIN_S ?? 10);
const LATE_MAX_S = Number(process.env.BENCH_LATE_MAX_S ?? 20);
const SOAK_RATE = Number(process.env.BENCH_SOAK_RATE ?? 10);
const SOAK_EDITS = Number(process.env.BENCH_SOAK_EDITS_PER_S ?? 1);
const SOAK_SWEEP_MS = Number(process.env.BENCH_SOAK_SWEEP_MS ?? 120_000);
/** sustained: before each phase, one status change stamped this far ahead of the present (issue 45; 0: none). */
const AHEAD_MS = Number(process.env.BENCH_AHEAD_MS ?? 0);
const REVIEWS =
  MODE === 'soak'
    ? Number(process.env.BENCH_SOAK_REVIEWS ?? 20_000)
    : Number(
        process.env.BENCH_REVIEWS ??
          // late: every phase changes reviews of its own (a late one must not be overtaken by a later change).
          Math.ceil((MODE === 'late' ? RATES.reduce((a, b) => a + b, 0) : Math.max(...RATES)) * PHASE_S * 1.1),
      );
const BUDGET_RPS = 10;
const { kafkaBrokers, redisUrl } = services();

const sim = await startSimulator({ reviewCount: REVIEWS, seed: 38 });
const account = uniqueName(`bench-polls-${MODE}`);
const config = loadConfig(
  benchEnv(account, sim.url, {
    INITIAL_LOAD_MODE: 'suppress',
    SWEEP_INTERVAL_MS: MODE === 'soak' ? String(SOAK_SWEEP_MS) : MODE === 'late' ? '0' : '86400000',
  }),
);
const redis = connectRedis(redisUrl);
const keys = accountKeys(BENCH_KEY_PREFIX, account);
const store = new SnapshotStore(redis, keys);
// review id|updated_date of each status_changed event, and review ids of each review.updated, at receipt.
const received = new Map<string, number>();
const updated = new Set<number>();
const kafka = new Kafka({ clientId: 'bench-polls', brokers: kafkaBrokers, logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId: `${account}-consumer`,
  maxWaitTimeInMs: 50,
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
});
const app = await startApp(config, pino({ level: 'warn' }));

/** Samples of the bridge's counters that the figures are differences of. */
async function counters() {
  const text = await app.metrics.registry.metrics();
  const value = (name: string, label = '') => {
    for (const m of text.matchAll(new RegExp(`^reviews_bridge_${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) {
      if ((m[1] ?? '').includes(label)) return Number(m[2]);
    }
    return 0;
  };
  return {
    at: Date.now(),
    pollReads: value('reviews_processed_total', 'pass="incremental"'),
    pollChanges: value('poll_changes_total'),
    pollRequests: value('rate_limiter_wait_seconds_count', 'pass="incremental"'),
    overruns: value('polls_overrun_total'),
    lookbackS: value('poll_lookback_seconds'),
    polls: value('passes_total', 'pass="incremental"'),
    lateByPoll: value('late_changes_total', 'found_by="poll"'),
    lateBySweep: value('late_changes_total', 'found_by="sweep"'),
    lateByTrailing: [1, 2, 3, 4, 5].map((n) => value('late_changes_total', `found_by="trailing_${n}"`)),
    trailingRequests: value('rate_limiter_wait_seconds_count', 'pass="sweep"'),
    trailingRequestsByTier: [1, 2, 3, 4, 5].map((n) => value('trailing_requests_total', `tier="${n}"`)),
    tiers: [1, 2, 3, 4, 5]
      .map((n) => ({
        tier: n,
        windowS: value('trailing_window_seconds', `tier="${n}"`),
        boundS: value('trailing_bound_seconds', `tier="${n}"`),
        shareRps: value('trailing_share_rps', `tier="${n}"`),
      }))
      .filter((t) => t.windowS > 0),
    freshnessBoundS: value('freshness_bound_seconds'),
    requests: sim.control.stats().requests,
    throttled: sim.control.stats().throttled,
  };
}
type Counters = Awaited<ReturnType<typeof counters>>;

function steadyFigures(a: Counters, b: Counters) {
  const seconds = (b.at - a.at) / 1000;
  const changes = b.pollChanges - a.pollChanges;
  return {
    windowS: round(seconds, 0),
    readsPerChange: changes > 0 ? round((b.pollReads - a.pollReads) / changes, 2) : null,
    pollRequestsPerS: round((b.pollRequests - a.pollRequests) / seconds, 2),
    pollShareOfBudget: round((b.pollRequests - a.pollRequests) / seconds / BUDGET_RPS, 3),
    upstreamRequestsPerS: round((b.requests - a.requests) / seconds, 2),
    throttled: b.throttled - a.throttled,
    pollsCompleted: b.polls - a.polls,
    pollsOverran: b.overruns - a.overruns,
    lookbackSAtEnd: b.lookbackS,
    lateChanges: { poll: b.lateByPoll - a.lateByPoll, sweep: b.lateBySweep - a.lateBySweep },
  };
}

/** The long pass running now (initial load or sweep) and how many reviews it has seen. */
async function runningPass(): Promise<{ kind: string; seen: number; startedAt: number } | null> {
  const c = await store.checkpoint();
  return c.sweep ? { kind: c.sweep.kind, seen: c.sweep.seen, startedAt: c.sweep.startedAt } : null;
}

/** A change on `id` to the other status than it has; resolves the key its event will carry and when it was made. */
function change(id: number): { key: string; at: number } {
  const to = sim.control.get(id)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
  const at = Date.now();
  const review = sim.control.setStatus(id, { client: to });
  return { key: `${id}|${review.updated_date}`, at };
}

/** `rate` changes a second for `seconds`, each on another review (from a shuffled order); `tick` runs each 20 ms. */
async function drive(rate: number, seconds: number, tick?: (elapsedMs: number) => void) {
  const sent: { key: string; at: number }[] = [];
  // The last review is kept for the change stamped ahead (BENCH_AHEAD_MS).
  const order = shuffled(AHEAD_MS > 0 ? REVIEWS - 1 : REVIEWS);
  const start = Date.now();
  while (Date.now() - start < seconds * 1000) {
    const elapsed = Date.now() - start;
    const due = Math.min(order.length, Math.floor((rate * elapsed) / 1000));
    while (sent.length < due) sent.push(change(order[sent.length]!));
    tick?.(elapsed);
    await sleep(20);
  }
  return sent;
}

function shuffled(n: number): number[] {
  const ids = Array.from({ length: n }, (_, i) => i + 1);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return ids;
}

/** Waits (at most `ms`) for every sent change's event; resolves the latencies of those received. */
async function latencies(sent: { key: string; at: number }[], ms = 30_000) {
  const deadline = Date.now() + ms;
  while (sent.some((s) => !received.has(s.key)) && Date.now() < deadline) await sleep(100);
  return sent.filter((s) => received.has(s.key)).map((s) => received.get(s.key)! - s.at);
}

function latencyFigures(values: number[]) {
  return {
    p50Ms: percentile(values, 50),
    p95Ms: percentile(values, 95),
    p99Ms: percentile(values, 99),
    maxMs: values.length > 0 ? Math.max(...values) : null,
  };
}

async function sustained() {
  const phases: Record<string, unknown>[] = [];
  for (const rate of RATES) {
    const load = [loadavg()[0]!];
    await store.requestSweep();
    const sweep: { first?: { at: number; seen: number }; last?: { at: number; seen: number }; ended?: number } = {};
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const pass = await runningPass();
        if (pass?.kind === 'sweep') {
          const sample = { at: Date.now(), seen: pass.seen };
          sweep.first ??= sample;
          sweep.last = sample;
        } else if (sweep.first && sweep.ended === undefined) sweep.ended = Date.now();
        await sleep(500);
      }
    })();
    // A writer whose clock runs fast: one change stamped AHEAD_MS ahead, made before the phase; it must hide none
    // of the phase's changes, and goes out with the first poll after it shows.
    let ahead: { key: string; at: number } | null = null;
    if (AHEAD_MS > 0) {
      const to = sim.control.get(REVIEWS)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
      const at = Date.now();
      ahead = { key: `${REVIEWS}|${sim.control.setStatusLate(REVIEWS, { client: to }, -AHEAD_MS).updated_date}`, at };
    }
    let warm: Promise<Counters> | null = null;
    const phaseStart = Date.now();
    const sent = await drive(rate, PHASE_S, (elapsed) => {
      if (warm === null && elapsed >= WARMUP_S * 1000) warm = counters();
    });
    const end = await counters();
    const steady = steadyFigures(await (warm ?? counters()), end);
    const all = await latencies(sent);
    const afterWarmup = sent
      .filter((s) => s.at - phaseStart >= WARMUP_S * 1000 && received.has(s.key))
      .map((s) => received.get(s.key)! - s.at);
    sampling = false;
    await sampler;
    load.push(loadavg()[0]!);
    const sweepRate =
      sweep.first && sweep.last && sweep.last.at > sweep.first.at
        ? (sweep.last.seen - sweep.first.seen) / ((sweep.last.at - sweep.first.at) / 1000)
        : null;
    const result = {
      changesPerS: rate,
      seconds: PHASE_S,
      changes: sent.length,
      received: all.length,
      missing: sent.length - all.length,
      latency: latencyFigures(all),
      latencyAfterWarmup: latencyFigures(afterWarmup),
      ...(ahead === null
        ? {}
        : {
            stampedAhead: {
              aheadMs: AHEAD_MS,
              deliveredAfterMs: received.has(ahead.key) ? received.get(ahead.key)! - ahead.at : null,
            },
          }),
      steadyState: steady,
      concurrentSweep: {
        reviewsPerS: sweepRate === null ? null : round(sweepRate, 0),
        shareOfCeiling: sweepRate === null ? null : round(sweepRate / (BUDGET_RPS * 100), 3),
        completedWithinPhase: sweep.ended !== undefined,
      },
      loadAverage1m: { start: round(load[0]!, 2), end: round(load[1]!, 2) },
    };
    console.log(JSON.stringify(result));
    phases.push(result);
    // The next phase starts with no sweep running, so that it requests its own.
    const deadline = Date.now() + 180_000;
    while ((await runningPass()) !== null && Date.now() < deadline) await sleep(500);
  }
  return { phases };
}

/** A change on `id` shown `lagMs` after its stamp, made now: the listing shows it only then (see late()). */
function showLate(id: number, lagMs: number): { key: string; at: number } {
  const to = sim.control.get(id)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
  const review = sim.control.setStatusLate(id, { client: to }, lagMs);
  return { key: `${id}|${review.updated_date}`, at: Date.now() };
}

async function late() {
  const phases: Record<string, unknown>[] = [];
  const order = shuffled(REVIEWS);
  let next = 0;
  for (const rate of RATES) {
    const load = [loadavg()[0]!];
    const onTime: { key: string; at: number }[] = [];
    const shown: { key: string; at: number }[] = [];
    const pending: { id: number; showAt: number; lagMs: number }[] = [];
    const start = Date.now();
    let warm: Counters | null = null;
    const showDue = () => {
      const now = Date.now();
      while (pending.length > 0 && pending[0]!.showAt <= now) {
        const p = pending.shift()!;
        shown.push(showLate(p.id, now - p.showAt + p.lagMs));
      }
    };
    let made = 0;
    while (Date.now() - start < PHASE_S * 1000) {
      const elapsed = Date.now() - start;
      const due = Math.floor((rate * elapsed) / 1000);
      while (made < due && next < order.length) {
        const id = order[next++]!;
        made++;
        if (Math.random() < LATE_SHARE) {
          const lagMs = (LATE_MIN_S + Math.random() * (LATE_MAX_S - LATE_MIN_S)) * 1000;
          pending.push({ id, showAt: Date.now() + lagMs, lagMs });
          pending.sort((a, b) => a.showAt - b.showAt);
        } else onTime.push(change(id));
      }
      showDue();
      if (warm === null && elapsed >= WARMUP_S * 1000) warm = await counters();
      await sleep(20);
    }
    // The last late ones still show, at their time.
    while (pending.length > 0) {
      showDue();
      await sleep(20);
    }
    const end = await counters();
    const a = warm ?? end;
    const onTimeMs = await latencies(onTime, 60_000);
    const lateMs = await latencies(shown, 90_000);
    load.push(loadavg()[0]!);
    const seconds = (end.at - a.at) / 1000;
    const changes = end.pollChanges - a.pollChanges;
    const trailingReads = end.lateByTrailing.map((n, i) => n - a.lateByTrailing[i]!);
    const result = {
      changesPerS: rate,
      seconds: PHASE_S,
      lateShare: LATE_SHARE,
      lateLagS: [LATE_MIN_S, LATE_MAX_S],
      onTime: { changes: onTime.length, missing: onTime.length - onTimeMs.length, ...latencyFigures(onTimeMs) },
      late: { changes: shown.length, missing: shown.length - lateMs.length, ...latencyFigures(lateMs) },
      steadyState: steadyFigures(a, end),
      // Reviews read by polls and trailing reads (both incremental listings) over the changes polls found: the late
      // ones found by trailing reads are not in poll_changes_total, so this overstates reads per change a little.
      readsPerChangeAll: changes > 0 ? round((end.pollReads - a.pollReads) / changes, 2) : null,
      trailingShareOfBudget: round((end.trailingRequests - a.trailingRequests) / seconds / BUDGET_RPS, 3),
      // Each tier's requests over the budget (trailing_requests_total), beside the share it was allotted at the end.
      tierShareOfBudget: end.trailingRequestsByTier
        .map((n, i) => ({ tier: i + 1, share: round((n - a.trailingRequestsByTier[i]!) / seconds / BUDGET_RPS, 3) }))
        .filter((t) => t.tier <= end.tiers.length),
      lateFoundByTrailingTier: trailingReads,
      tiersAtEnd: end.tiers,
      freshnessBoundSAtEnd: end.freshnessBoundS,
      loadAverage1m: { start: round(load[0]!, 2), end: round(load[1]!, 2) },
    };
    console.log(JSON.stringify(result));
    phases.push(result);
  }
  return { phases };
}

async function soak() {
  const rss: {
    atS: number;
    rssMiB: number;
    heapUsedMiB: number;
    heapTotalMiB: number;
    externalMiB: number;
    arrayBuffersMiB: number;
  }[] = [];
  const sweeps = new Map<number, { startedAt: number; endedAt: number | null }>();
  const edits: { id: number; at: number }[] = [];
  const start = Date.now();
  let sampling = true;
  const sampler = (async () => {
    let lastRss = 0;
    while (sampling) {
      const pass = await runningPass();
      const c = await store.checkpoint();
      if (pass?.kind === 'sweep' && !sweeps.has(pass.startedAt)) {
        sweeps.set(pass.startedAt, { startedAt: pass.startedAt, endedAt: null });
      }
      for (const s of sweeps.values()) {
        if (s.endedAt === null && pass?.startedAt !== s.startedAt && (c.lastSweepAt ?? 0) >= s.startedAt) {
          s.endedAt = c.lastSweepAt;
        }
      }
      if (Date.now() - lastRss >= 10_000) {
        lastRss = Date.now();
        const m = process.memoryUsage();
        rss.push({
          atS: round((lastRss - start) / 1000, 0),
          rssMiB: round(m.rss / 2 ** 20),
          heapUsedMiB: round(m.heapUsed / 2 ** 20),
          heapTotalMiB: round(m.heapTotal / 2 ** 20),
          externalMiB: round(m.external / 2 ** 20),
          arrayBuffersMiB: round(m.arrayBuffers / 2 ** 20),
        });
      }
      await sleep(500);
    }
  })();
  const before = await counters();
  // Edits from the highest id down (a review may also get a status change: its edit then arrives either way).
  let nextEdit = REVIEWS;
  const sent = await drive(SOAK_RATE, SOAK_S, (elapsed) => {
    while (edits.length < Math.floor((SOAK_EDITS * elapsed) / 1000) && nextEdit > 0) {
      sim.control.edit(nextEdit, { headline: `soak edit ${nextEdit}` });
      edits.push({ id: nextEdit, at: Date.now() });
      nextEdit--;
    }
  });
  const after = await counters();
  const all = await latencies(sent);
  sampling = false;
  await sampler;
  const completed = [...sweeps.values()].filter((s) => s.endedAt !== null);
  const lastCompletedStart = Math.max(0, ...completed.map((s) => s.startedAt));
  const editsCovered = edits.filter((e) => e.at < lastCompletedStart);
  const editsMissing = editsCovered.filter((e) => !updated.has(e.id)).length;
  const perMinute: { minute: number; changes: number; p99Ms: number }[] = [];
  for (let minute = 0; minute * 60 < SOAK_S; minute++) {
    const inMinute = sent.filter((s) => Math.floor((s.at - start) / 60_000) === minute && received.has(s.key));
    perMinute.push({
      minute,
      changes: inMinute.length,
      p99Ms: percentile(
        inMinute.map((s) => received.get(s.key)! - s.at),
        99,
      ),
    });
  }
  const firstMinute = rss.filter((r) => r.atS <= 120);
  const lastMinute = rss.filter((r) => r.atS >= SOAK_S - 120);
  const median = (xs: number[]) => percentile(xs, 50);
  return {
    seconds: SOAK_S,
    changesPerS: SOAK_RATE,
    changes: sent.length,
    received: all.length,
    missing: sent.length - all.length,
    latency: latencyFigures(all),
    p99PerMinute: perMinute,
    sweepIntervalMs: SOAK_SWEEP_MS,
    sweeps: {
      started: sweeps.size,
      completed: completed.length,
      // A sweep still running when the soak ended is not a failure to complete; one that ended without lastSweepAt is.
      runningAtEnd: [...sweeps.values()].filter((s) => s.endedAt === null).length,
      durationsS: completed.map((s) => round((s.endedAt! - s.startedAt) / 1000, 0)),
    },
    edits: { made: edits.length, beforeLastCompletedSweep: editsCovered.length, missing: editsMissing },
    whole: steadyFigures(before, after),
    rss: {
      medianFirst2MinMiB: median(firstMinute.map((r) => r.rssMiB)),
      medianLast2MinMiB: median(lastMinute.map((r) => r.rssMiB)),
      heapUsedMedianFirst2MinMiB: median(firstMinute.map((r) => r.heapUsedMiB)),
      heapUsedMedianLast2MinMiB: median(lastMinute.map((r) => r.heapUsedMiB)),
      heapTotalMedianFirst2MinMiB: median(firstMinute.map((r) => r.heapTotalMiB)),
      heapTotalMedianLast2MinMiB: median(lastMinute.map((r) => r.heapTotalMiB)),
      maxMiB: Math.max(...rss.map((r) => r.rssMiB)),
      samples: rss,
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
      await consumer.subscribe({
        topics: [config.kafka.topics.statusChanged, config.kafka.topics.updated],
        fromBeginning: true,
      });
      break;
    } catch (err) {
      if (attempt >= 100) throw err;
      await sleep(300);
    }
  }
  await consumer.run({
    eachMessage: async ({ topic, message }) => {
      const at = Date.now();
      const event = JSON.parse(message.value!.toString()) as {
        subject: string;
        data: { review: { updated_date: number } };
      };
      if (topic === config.kafka.topics.updated) updated.add(Number(event.subject));
      else received.set(`${event.subject}|${event.data.review.updated_date}`, at);
    },
  });
  while (!joined) await sleep(50);
  const loadStarted = Date.now();
  while (!(await store.checkpoint()).initialDone) await sleep(200);
  const initialLoadS = round((Date.now() - loadStarted) / 1000, 0);
  const figures = MODE === 'soak' ? await soak() : MODE === 'late' ? await late() : await sustained();
  const result = {
    setup:
      `mode ${MODE}; bridge defaults (poll interval ${config.poll.intervalMs} ms, lookback ${config.poll.lookback}, ` +
      `floor ${config.poll.lookbackFloorMs} ms, POLL_OVERLAP_MS ${config.poll.overlapMs}), simulator default throttle ` +
      `(10 requests/s, pages of 100), ${REVIEWS} reviews, INITIAL_LOAD_MODE=suppress, SWEEP_INTERVAL_MS ` +
      `${config.sweep.intervalMs}; bridge, simulator and consumer in one process; consumer maxWaitTimeInMs 50`,
    runtime: process.version,
    initialLoadS,
    ...figures,
  };
  const file = writeResult(process.env.BENCH_RESULT ?? `polls-${MODE}`, result);
  console.log(JSON.stringify({ ...result, rss: undefined }, null, 2));
  console.log(`written ${file}`);
} finally {
  await consumer.disconnect().catch(() => undefined);
  await app.stop();
  await sim.close();
  await dropAccount(redis, keys);
  await redis.quit();
  await dropTopics(kafkaBrokers, Object.values(config.kafka.topics));
}
