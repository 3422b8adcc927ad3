import { writeFileSync, mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { constants, PerformanceObserver, type PerformanceObserverEntryList } from 'node:perf_hooks';
import { Session } from 'node:inspector/promises';
import { applyHeapFlags } from '../src/app/node-flags.js';
import {
  benchPasses,
  cpuMeter,
  dropAccount,
  dropTopics,
  InMemorySource,
  PROJECT_ROOT,
  round,
  services,
  settle,
  speedProbe,
  writeResult,
} from './lib.js';

// CPU of the page path per 1,000 reviews, for new reviews (the initial load: every review.created published) and
// for unchanged reviews (a sweep of an account that did not change). What runs is the bridge's own code in this
// process: an in-memory source (each page's JSON body parsed and validated record by record, as the upstream client
// does with a response; no HTTP), the real passes and pipeline (diff, fingerprints, events, field policy, event
// sizing), the real KafkaPublisher (exactly-once transactions, acks=all) and SnapshotStore (the fenced Lua commit)
// against a real Kafka broker and a real Redis. process.cpuUsage() of this process around each pass: Kafka and
// Redis run in other processes and are not counted, the client side of both (kafkajs encoding, ioredis) is.
//
// Then one more pass of each case under the V8 profiler (node:inspector, as `node --cpu-prof` records it, but only
// around the pass): the top frames by self time, and self time by area (file), go to the result; the .cpuprofile
// files to .run/cpu-profiles/ (open them in Chrome DevTools); then one more of each under the sampling heap
// profiler (bytes allocated per review, by function; BENCH_CPU_ALLOC_SURVIVORS=1: only what survived a young
// collection, which is what V8 copies and promotes). Each measured pass records the collector's pauses by kind.
//
// A speed probe runs before and after each measured pass (speedProbe in lib.ts): this machine's speed changes by up
// to a factor of two from one minute to the next, so each run is also given scaled to the fastest probe seen.
//
// BENCH_CPU_REVIEWS (default 20000) reviews, BENCH_CPU_REPEAT (default 3) measured runs on fresh accounts (each
// reported, median in the verdict: the machine is shared), BENCH_CPU_LABEL names the result file
// (bench/results/cpu-<label>.json, default cpu.json), BENCH_CPU_PROFILE=0 skips the profiled pass.

// Under the heap flags `run` gives a bridge of one account (the process re-executes itself with them, as `run`
// does; flags given on the command line or in NODE_OPTIONS win): V8's heap sizing changes the CPU of this path.
applyHeapFlags(1);

const N = Number(process.env.BENCH_CPU_REVIEWS ?? 20_000);
const REPEAT = Number(process.env.BENCH_CPU_REPEAT ?? 3);
const LABEL = process.env.BENCH_CPU_LABEL ?? '';
const PROFILE = process.env.BENCH_CPU_PROFILE !== '0';
const TARGETS = { newReviews: 50, unchangedReviews: 10 };
const { kafkaBrokers, redisUrl } = services();

interface CaseFigures {
  reviews: number;
  events: number;
  seconds: number;
  cpuMs: number;
  userMs: number;
  systemMs: number;
  cpuMsPer1000Reviews: number;
  /** CPU of the main (JavaScript) thread only: no GC helper or libuv threads; varies less on a busy machine. */
  mainThreadCpuMsPer1000Reviews: number;
  /** The speed probe's ms around the pass (mean of the one before and the one after; see speedProbe). */
  probeMs: number;
  /** The collector's pauses of the JavaScript thread during the pass, by kind: how many, and ms in all. */
  gc: Record<string, { count: number; ms: number }>;
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'markCompact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakCallbacks',
};

/** Collects the GC entries Node reports (perf_hooks) until the returned function is called. */
function gcPauses(): () => CaseFigures['gc'] {
  const byKind: CaseFigures['gc'] = {};
  // A gc entry's detail holds its kind (Node's NodeGCPerformanceDetail).
  const add = (entries: ReturnType<PerformanceObserverEntryList['getEntries']>) => {
    for (const entry of entries) {
      const { detail } = entry as unknown as { detail: { kind: number } };
      const kind = GC_KINDS[detail.kind] ?? 'other';
      const k = (byKind[kind] ??= { count: 0, ms: 0 });
      k.count++;
      k.ms += entry.duration;
    }
  };
  const observer = new PerformanceObserver((list) => add(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return () => {
    add(observer.takeRecords());
    observer.disconnect();
    for (const k of Object.values(byKind)) k.ms = round(k.ms, 1);
    return byKind;
  };
}

/** Every speed probe of this process: the fastest is the machine's undisturbed speed, as far as this run saw it. */
const probes: number[] = [];

async function measure(run: () => Promise<{ reviews: number; events: number }>): Promise<CaseFigures> {
  const probeBefore = speedProbe();
  const gc = gcPauses();
  const cpu = cpuMeter();
  const thread0 = process.threadCpuUsage();
  const t0 = performance.now();
  const { reviews, events } = await run();
  const seconds = (performance.now() - t0) / 1000;
  const c = cpu();
  const thread = process.threadCpuUsage(thread0);
  const pauses = gc();
  const probeAfter = speedProbe();
  const probeMs = (probeBefore + probeAfter) / 2;
  probes.push(probeBefore, probeAfter);
  return {
    reviews,
    events,
    seconds: round(seconds, 2),
    cpuMs: c.totalMs,
    userMs: c.userMs,
    systemMs: c.systemMs,
    cpuMsPer1000Reviews: round(c.totalMs / (reviews / 1000), 1),
    mainThreadCpuMsPer1000Reviews: round((thread.user + thread.system) / 1000 / (reviews / 1000), 1),
    probeMs: round(probeMs, 2),
    gc: pauses,
  };
}

/** One fresh account: its initial load (new reviews), then a sweep of the same reviews (unchanged). */
async function account<T>(
  source: InMemorySource,
  body: (sweep: () => Promise<{ reviews: number; events: number }>) => Promise<T>,
): Promise<T> {
  const bp = await benchPasses(source, { redisUrl, kafkaBrokers, prefix: 'bench-cpu' });
  try {
    return await body(() => bp.sweep());
  } finally {
    await dropAccount(bp.redis, bp.keys);
    await bp.close();
    await dropTopics(kafkaBrokers, Object.values(bp.topics));
  }
}

/** A profile frame's file, relative to the project (node_modules/..., src/..., bench/...). */
function frameFile(url: string): string {
  return url.replace(/^file:\/\//, '').replace(/^.*?\/(node_modules|src|bench)\//, '$1/');
}

/** A profile frame's name: the function, then file:line. */
function frameName({ functionName, url, lineNumber }: ProfileNode['callFrame']): string {
  const file = frameFile(url);
  return `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

/** Self time by function and by area of a V8 CPU profile. */
function summarise(profile: { nodes: ProfileNode[]; samples?: number[]; timeDeltas?: number[] }, top = 25) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));
  // Waiting (idle) and the profiler's own stop are not the page path's work: left out of the shares.
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === '(idle)' || url === 'node:inspector') {
      idleUs += us;
      selfUs.delete(id);
    }
  }
  const total = [...selfUs.values()].reduce((s, v) => s + v, 0);
  const frames = new Map<string, number>();
  const areas = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const { callFrame } = byId.get(id)!;
    const { functionName, url } = callFrame;
    const file = frameFile(url);
    const name = frameName(callFrame);
    frames.set(name, (frames.get(name) ?? 0) + us);
    const area = !url
      ? functionName.startsWith('(')
        ? functionName
        : '(native)'
      : url.startsWith('node:')
        ? url
        : file.startsWith('node_modules/')
          ? file
              .split('/')
              .slice(0, file.startsWith('node_modules/@') ? 3 : 2)
              .join('/')
          : file;
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const rank = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: round(us / 1000, 1), percent: round((100 * us) / total, 1) }));
  return {
    busyMs: round(total / 1000),
    idleMs: round(idleUs / 1000),
    topFrames: rank(frames),
    topAreas: rank(areas),
  };
}

interface HeapNode {
  callFrame: ProfileNode['callFrame'];
  selfSize: number;
  children: HeapNode[];
}

/** Bytes allocated by function (self) from a V8 sampling heap profile, top first. */
function allocations(root: HeapNode, reviews: number, top = 20) {
  const bytes = new Map<string, number>();
  let total = 0;
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const name = frameName(node.callFrame);
    bytes.set(name, (bytes.get(name) ?? 0) + node.selfSize);
    total += node.selfSize;
    stack.push(...node.children);
  }
  return {
    bytesPerReview: Math.round(total / reviews),
    top: [...bytes.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, b]) => ({ name, bytesPerReview: Math.round(b / reviews), percent: round((100 * b) / total, 1) })),
  };
}

/**
 * Bytes allocated per review, by function: V8's sampling heap profiler with the young generation's garbage kept
 * in the samples (what the collector has to sweep, not only what survives).
 */
async function allocationProfiled(run: () => Promise<{ reviews: number }>) {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.BENCH_CPU_ALLOC_SURVIVORS !== '1',
  });
  const { reviews } = await run();
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  return allocations(profile.head as unknown as HeapNode, reviews);
}

async function profiled(name: string, run: () => Promise<unknown>) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  await run();
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  const dir = new URL('.run/cpu-profiles/', PROJECT_ROOT);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`${name}${LABEL ? `-${LABEL}` : ''}.cpuprofile`, dir);
  writeFileSync(file, JSON.stringify(profile));
  return { file: file.pathname.replace(/^.*\/\.run\//, '.run/'), ...summarise(profile as never) };
}

const loadAverageAtStart = loadavg().map((l) => round(l, 2));
const source = new InMemorySource({ count: N, precompute: true });
// Warm-up, a run of the same size: the JIT sees every path (and the broker every request kind), and the heap grows
// to its working size, before anything is measured. What is measured is a long-running bridge, not its first pass.
await account(source, async (sweep) => {
  await sweep();
  await sweep();
});
// The machine's undisturbed speed, as far as this run can see it: probes spread over a few seconds of idle.
for (let i = 0; i < 10; i++) {
  probes.push(speedProbe());
  await new Promise((resolve) => setTimeout(resolve, 300));
}
const runs: { newReviews: CaseFigures; unchangedReviews: CaseFigures; loadAverage: number[]; settledMs: number }[] = [];
for (let r = 0; r < REPEAT; r++) {
  const settledMs = await settle();
  const loadAverage = loadavg().map((l) => round(l, 2));
  const run = await account(source, async (sweep) => {
    const created = await measure(sweep);
    await settle();
    const unchanged = await measure(sweep);
    return { newReviews: created, unchangedReviews: unchanged, loadAverage, settledMs };
  });
  if (run.newReviews.events !== N || run.unchangedReviews.events !== 0) {
    throw new Error(`unexpected events: ${run.newReviews.events}, ${run.unchangedReviews.events}`);
  }
  runs.push(run);
  console.log(
    `run ${r + 1}: new ${run.newReviews.cpuMsPer1000Reviews} ms CPU/1,000 ` +
      `(main thread ${run.newReviews.mainThreadCpuMsPer1000Reviews}, ${run.newReviews.seconds} s, ` +
      `probe ${run.newReviews.probeMs} ms), ` +
      `unchanged ${run.unchangedReviews.cpuMsPer1000Reviews} ms CPU/1,000 ` +
      `(main thread ${run.unchangedReviews.mainThreadCpuMsPer1000Reviews}, ${run.unchangedReviews.seconds} s, ` +
      `probe ${run.unchangedReviews.probeMs} ms), ` +
      `load ${loadAverage.join(' ')}`,
  );
}
const profiles = PROFILE
  ? await account(source, async (sweep) => ({
      newReviews: await profiled('new-reviews', sweep),
      unchangedReviews: await profiled('unchanged-reviews', sweep),
    }))
  : null;
const allocation = PROFILE
  ? await account(source, async (sweep) => ({
      newReviews: await allocationProfiled(sweep),
      unchangedReviews: await allocationProfiled(sweep),
    }))
  : null;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
const probeReferenceMs = round(Math.min(...probes), 2);
const verdict = Object.fromEntries(
  (['newReviews', 'unchangedReviews'] as const).map((k) => {
    const measured = median(runs.map((r) => r[k].cpuMsPer1000Reviews));
    const all = runs.map((r) => r[k].cpuMsPer1000Reviews);
    // Each run scaled to the fastest speed the probe saw: what the same work costs on the undisturbed machine.
    const atFastest = runs.map((r) => round((r[k].cpuMsPer1000Reviews * probeReferenceMs) / r[k].probeMs, 1));
    return [
      k,
      {
        targetMsPer1000: TARGETS[k],
        medianMsPer1000: measured,
        // The least disturbed run: on a shared machine contention only ever adds CPU time.
        minMsPer1000: Math.min(...all),
        allRuns: all,
        mainThreadAllRuns: runs.map((r) => r[k].mainThreadCpuMsPer1000Reviews),
        met: measured <= TARGETS[k],
        probeReferenceMs,
        atFastestSpeed: {
          medianMsPer1000: median(atFastest),
          allRuns: atFastest,
          met: median(atFastest) <= TARGETS[k],
        },
      },
    ];
  }),
);
const result = {
  label: LABEL || null,
  setup:
    `${N} reviews, pages of 100, one process: JSON.parse + per-record validation (bounds + zod) + passes + ` +
    `pipeline + KafkaPublisher (exactly-once transactions, acks=all, ${kafkaBrokers.join(',')}) + SnapshotStore ` +
    `(Lua commit, ${redisUrl}); CPU = process.cpuUsage() of this process around the pass (the broker and Redis ` +
    `are other processes); INITIAL_LOAD_MODE=mark, default field policy, no deletion detection`,
  runtime: process.version,
  nodeFlags: process.execArgv,
  loadAverageAtStart,
  loadAverageAtEnd: loadavg().map((l) => round(l, 2)),
  verdict,
  runs,
  profiles,
  allocation,
};
const file = writeResult(LABEL ? `cpu-${LABEL}` : 'cpu', result);
console.log(JSON.stringify({ verdict, profiles, allocation }, null, 2));
console.log(`written ${file}`);
process.exit(0);
