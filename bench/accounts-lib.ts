import { execSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { accountKeys, connectRedis, type BridgeRedis } from '../src/redis/connection.js';
import { startMultiSimulator, type MultiSimulator } from '../src/simulator/index.js';
import type { SimulatorOptions } from '../src/simulator/types.js';
import { SnapshotStore, type Checkpoint, type PassProgress } from '../src/redis/snapshot-store.js';
import { freePort, ROOT, spawnLogged, type Child } from '../test/helpers/processes.js';
import { dropTopics, imageNodeFlags, percentile, round, services, uniqueName } from './lib.js';

// Pieces of the multi-account benchmarks: a fleet (one multi-account simulator in this process, an accounts file,
// a key prefix and shared topics of its own), bridge replicas as child processes with their CPU and RSS read from
// /proc, the account leases in Redis, a consumer that times review.status_changed events, and status changes.

/** A fleet of accounts on one simulator, with what a replica needs to serve them. */
export interface Fleet {
  /** Account ids, a001..aNNN. */
  ids: string[];
  sim: MultiSimulator;
  /** Key prefix of the run in Redis (its own replica registry, leases, snapshots). */
  prefix: string;
  topics: { created: string; statusChanged: string; all: string[] };
  /** The environment of every replica (BRIDGE_ACCOUNTS_FILE and the shared settings); add HTTP_PORT. */
  env: Record<string, string>;
  /** Where replica logs and the accounts file are. */
  dir: string;
  redis: BridgeRedis;
  /** Each account's snapshot store (checkpoint, pass progress). */
  stores: Map<string, SnapshotStore>;
  close(): Promise<void>;
}

/**
 * Starts the simulator for `count` accounts and writes the accounts file; overrides go into every replica's env,
 * `perAccount` simulator options into the named accounts' (e.g. one large account among small ones).
 */
export async function startFleet(
  count: number,
  simOptions: Omit<SimulatorOptions, 'host' | 'port'>,
  overrides: Record<string, string> = {},
  perAccount: Record<string, Partial<Omit<SimulatorOptions, 'host' | 'port'>>> = {},
): Promise<Fleet> {
  const { kafkaBrokers, redisUrl } = services();
  const run = uniqueName('bench-acc');
  const prefix = `rbb-${run.slice('bench-acc-'.length)}`;
  const dir = join(ROOT, '.run', 'bench', run);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ids = Array.from({ length: count }, (_, i) => `a${String(i + 1).padStart(3, '0')}`);
  const sim = await startMultiSimulator(ids.map((id) => ({ id, options: { ...simOptions, ...perAccount[id] } })));
  const entries = [...sim.accounts.values()].map((account) => {
    const secretFile = join(dir, `${account.id}.secret`);
    writeFileSync(secretFile, account.clientSecret, { mode: 0o600 });
    return {
      id: account.id,
      upstream: { baseUrl: account.url, clientId: account.clientId, clientSecretFile: secretFile },
    };
  });
  const file = join(dir, 'accounts.json');
  writeFileSync(file, JSON.stringify({ accounts: entries }, null, 2));
  const names = ['created', 'status_changed', 'updated', 'dead_letter', 'state', 'deleted', 'heartbeat'];
  const all = names.map((n) => `${run}.${n}`);
  const env: Record<string, string> = {
    BRIDGE_ACCOUNTS_FILE: file,
    KAFKA_BROKERS: kafkaBrokers.join(','),
    FINGERPRINT_KEY_GENERATE: 'true',
    // Shared topics (no {account}): keys become <account>:<review id>, as a many-account deployment would run.
    KAFKA_TOPIC_CREATED: `${run}.created`,
    KAFKA_TOPIC_STATUS_CHANGED: `${run}.status_changed`,
    KAFKA_TOPIC_UPDATED: `${run}.updated`,
    KAFKA_TOPIC_DEAD_LETTER: `${run}.dead_letter`,
    KAFKA_TOPIC_STATE: `${run}.state`,
    KAFKA_TOPIC_DELETED: `${run}.deleted`,
    KAFKA_TOPIC_HEARTBEAT: `${run}.heartbeat`,
    KAFKA_TOPIC_CHANGELOG: `${run}.changelog`,
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: prefix,
    SWEEP_INTERVAL_MS: '86400000',
    HTTP_HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ...overrides,
  };
  const redis = connectRedis(redisUrl);
  const stores = new Map(ids.map((id) => [id, new SnapshotStore(redis, accountKeys(prefix, id))]));
  return {
    ids,
    sim,
    prefix,
    topics: { created: `${run}.created`, statusChanged: `${run}.status_changed`, all },
    env,
    dir,
    redis,
    stores,
    async close() {
      await sim.close();
      await dropPrefix(redis, prefix);
      await redis.quit();
      await dropTopics(kafkaBrokers, all);
    },
  };
}

/** Deletes every key of the run's prefix. */
async function dropPrefix(redis: BridgeRedis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (found.length > 0) await redis.unlink(...found);
  } while (cursor !== '0');
}

/** A bridge replica: `node --import tsx src/cli.ts run` serving the fleet, with its ops port. */
export interface Replica {
  name: string;
  child: Child;
  port: number;
}

/** Starts a replica of the fleet as a child process. */
export async function spawnReplica(fleet: Fleet, name: string, env: Record<string, string> = {}): Promise<Replica> {
  const port = await freePort();
  const child = spawnLogged(
    process.execPath,
    bridgeCommand(),
    { ...fleet.env, HTTP_PORT: String(port), ...env },
    join(fleet.dir, `${name}.log`),
  );
  return { name, child, port };
}

/**
 * How a replica is started: BENCH_BRIDGE=dist runs the compiled build as the image does (`npm run build` first);
 * the default runs the sources under tsx, as `npm start` does. tsx keeps function names by wrapping every closure
 * it creates in a helper call, which the compiled build does not pay. BENCH_NODE_FLAGS go first (imageNodeFlags).
 */
export function bridgeCommand(): string[] {
  const flags = imageNodeFlags();
  return process.env.BENCH_BRIDGE === 'dist'
    ? [...flags, 'dist/src/cli.js', 'run']
    : [...flags, '--import', 'tsx', 'src/cli.ts', 'run'];
}

/** The replica id's pid part (<host>:<pid>:<random>), which is how a lease names its holder's process. */
export function holderPid(holder: string): number {
  const parts = holder.split(':');
  return Number(parts[parts.length - 2]);
}

/** Who holds each account's lease now (the holder's pid), null when nobody does. */
export async function leaders(fleet: Fleet): Promise<Map<string, number | null>> {
  const values = await fleet.redis.mget(...fleet.ids.map((id) => accountKeys(fleet.prefix, id).lease));
  const out = new Map<string, number | null>();
  fleet.ids.forEach((id, i) => {
    const v = values[i];
    out.set(id, v ? holderPid(v.slice(0, v.lastIndexOf('|'))) : null);
  });
  return out;
}

/** Accounts led per pid (and 'none'). */
export function split(leads: Map<string, number | null>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pid of leads.values()) out[String(pid ?? 'none')] = (out[String(pid ?? 'none')] ?? 0) + 1;
  return out;
}

/** Every account's checkpoint. */
export async function checkpoints(fleet: Fleet): Promise<Map<string, Checkpoint>> {
  const list = await Promise.all(fleet.ids.map((id) => fleet.stores.get(id)!.checkpoint()));
  return new Map(fleet.ids.map((id, i) => [id, list[i]!]));
}

/** The pass progress (initial load, sweep) the leader of each account wrote. */
export async function progresses(fleet: Fleet): Promise<Map<string, PassProgress | null>> {
  const list = await Promise.all(fleet.ids.map((id) => fleet.stores.get(id)!.passProgress()));
  return new Map(fleet.ids.map((id, i) => [id, list[i] ?? null]));
}

/** Resolves once every account finished its initial load (throws after timeoutMs). */
export async function waitInitialLoads(fleet: Fleet, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const done = [...(await checkpoints(fleet)).values()].filter((c) => c.initialDone).length;
    if (done === fleet.ids.length) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`initial loads: ${done} of ${fleet.ids.length} done`);
    await sleep(250);
  }
}

const CLK_TCK = Number(execSync('getconf CLK_TCK').toString().trim()) || 100;
const PAGE_SIZE = Number(execSync('getconf PAGESIZE').toString().trim()) || 4096;

/** CPU seconds (user + system) and RSS bytes of a process, from /proc/<pid>/stat; null once it is gone. */
export function procStat(pid: number): { cpuSeconds: number; rssBytes: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields from 3 (state) on: utime is field 14, stime 15, rss (pages) 24.
    return {
      cpuSeconds: (Number(fields[11]) + Number(fields[12])) / CLK_TCK,
      rssBytes: Number(fields[21]) * PAGE_SIZE,
    };
  } catch {
    return null;
  }
}

/** Busy and total CPU seconds of the whole machine (all cores), from /proc/stat. */
export function machineCpu(): { busySeconds: number; totalSeconds: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((s, x) => s + x, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busySeconds: (total - idle) / CLK_TCK, totalSeconds: total / CLK_TCK };
}

/** Pids of the shared services (the Kafka JVM of the broker's port, the redis-server of Redis's port), when found. */
export function servicePids(): { kafka: number | null; redis: number | null } {
  const { kafkaBrokers, redisUrl } = services();
  const kafkaPort = kafkaBrokers[0]!.split(':').pop()!;
  const redisPort = new URL(redisUrl).port;
  let kafka: number | null = null;
  let redis: number | null = null;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (cmd.startsWith('java') && cmd.includes(`kafka-${kafkaPort}`) && cmd.includes('kafka.Kafka'))
      kafka = Number(entry);
    if (cmd.startsWith('redis-server') && cmd.includes(`:${redisPort}`)) redis = Number(entry);
  }
  return { kafka, redis };
}

/** CPU and RSS of some processes between start() and stop(); RSS sampled every second. */
export class ProcessMeter {
  private readonly start = new Map<string, { cpu: number; at: number }>();
  private readonly rss = new Map<string, number[]>();
  /** CPU % of one core in each 1 s sample interval. */
  private readonly cpu = new Map<string, { last: number; at: number; percents: number[] }>();
  private readonly machineStart = machineCpu();
  private readonly startedAt = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pids: Record<string, number>) {
    for (const [name, pid] of Object.entries(pids)) {
      const s = procStat(pid);
      if (s) {
        this.start.set(name, { cpu: s.cpuSeconds, at: Date.now() });
        this.cpu.set(name, { last: s.cpuSeconds, at: Date.now(), percents: [] });
      }
      this.rss.set(name, []);
    }
    this.timer = setInterval(() => this.sample(), 1_000);
    this.sample();
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = procStat(pid);
      if (!s) continue;
      this.rss.get(name)!.push(s.rssBytes);
      const c = this.cpu.get(name);
      const now = Date.now();
      if (c && now - c.at >= 500) {
        c.percents.push((100 * (s.cpuSeconds - c.last)) / ((now - c.at) / 1000));
        c.last = s.cpuSeconds;
        c.at = now;
      }
    }
  }

  /** Per process: CPU as % of one core over the window, RSS MiB (p50, max); and the machine's busy share. */
  stop(): {
    seconds: number;
    processes: Record<
      string,
      {
        cpuPercentOfOneCore: number;
        cpuSeconds: number;
        /** Per 1 s interval: how busy the process was at its busiest. */
        cpuPercentPerSecond: { p50: number; p90: number; max: number };
        rssMiB: { p50: number; max: number };
      }
    >;
    machineBusyPercentOfAllCores: number;
  } {
    clearInterval(this.timer);
    this.sample();
    const seconds = (Date.now() - this.startedAt) / 1000;
    const processes: ReturnType<ProcessMeter['stop']>['processes'] = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = procStat(pid);
      const first = this.start.get(name);
      if (!s || !first) continue;
      const cpu = s.cpuSeconds - first.cpu;
      const rss = this.rss.get(name)!;
      processes[name] = {
        cpuPercentOfOneCore: round((100 * cpu) / seconds),
        cpuSeconds: round(cpu, 2),
        cpuPercentPerSecond: {
          p50: round(percentile(this.cpu.get(name)!.percents, 50)),
          p90: round(percentile(this.cpu.get(name)!.percents, 90)),
          max: round(Math.max(...this.cpu.get(name)!.percents)),
        },
        rssMiB: { p50: round(percentile(rss, 50) / 2 ** 20), max: round(Math.max(...rss) / 2 ** 20) },
      };
    }
    const m = machineCpu();
    const busy = m.busySeconds - this.machineStart.busySeconds;
    const total = m.totalSeconds - this.machineStart.totalSeconds;
    return { seconds: round(seconds), processes, machineBusyPercentOfAllCores: round((100 * busy) / total) };
  }
}

/** Receipt time of every review.status_changed event, by `<account>|<review id>|<updated_date>`. */
export class StatusEvents {
  readonly received = new Map<string, number>();
  /** Deliveries of each event id (duplicates are allowed, counted). */
  readonly deliveries = new Map<string, number>();
  private consumer: Consumer | null = null;

  /** Subscribes (from the beginning) and resolves once the consumer has joined its group. */
  async start(topic: string): Promise<void> {
    const kafka = new Kafka({
      clientId: 'bench-accounts',
      brokers: services().kafkaBrokers,
      logLevel: logLevel.NOTHING,
    });
    const consumer = (this.consumer = kafka.consumer({
      groupId: uniqueName('bench-acc-consumer'),
      maxWaitTimeInMs: 50,
      sessionTimeout: 6_000,
      heartbeatInterval: 500,
    }));
    let joined = false;
    consumer.on(consumer.events.GROUP_JOIN, () => {
      joined = true;
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const at = Date.now();
        const event = JSON.parse(message.value!.toString()) as {
          id: string;
          source: string;
          subject: string;
          data: { review: { updated_date: number } };
        };
        const account = event.source.slice(event.source.lastIndexOf(':') + 1);
        const key = `${account}|${event.subject}|${event.data.review.updated_date}`;
        if (!this.received.has(key)) this.received.set(key, at);
        this.deliveries.set(event.id, (this.deliveries.get(event.id) ?? 0) + 1);
      },
    });
    while (!joined) await sleep(50);
  }

  /** Extra deliveries of an event id already received. */
  duplicates(): number {
    let n = 0;
    for (const c of this.deliveries.values()) n += c - 1;
    return n;
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect().catch(() => undefined);
  }
}

/** One status change made: which account and review, and when (wall clock, before the control call). */
export interface Change {
  account: string;
  key: string;
  at: number;
}

/**
 * Makes status changes on random accounts at `perSecond` until `until()` says stop: each on a review of the
 * account not changed before (so no two changes of one review can collapse into one poll), client status flipped.
 */
export async function makeChanges(
  fleet: Fleet,
  reviewsPerAccount: number,
  perSecond: number,
  until: () => boolean,
  sent: Change[],
  random: () => number = Math.random,
): Promise<void> {
  const used = new Map<string, Set<number>>(fleet.ids.map((id) => [id, new Set()]));
  const statuses = ['PENDING', 'APPROVED', 'REJECTED'];
  const start = Date.now();
  let n = 0;
  while (!until()) {
    const account = fleet.ids[Math.floor(random() * fleet.ids.length)]!;
    const taken = used.get(account)!;
    if (taken.size >= reviewsPerAccount) throw new Error(`account ${account}: every review changed once already`);
    let id: number;
    do id = 1 + Math.floor(random() * reviewsPerAccount);
    while (taken.has(id));
    taken.add(id);
    const control = fleet.sim.accounts.get(account)!.control;
    const current = String(control.get(id)!.client_publication_status);
    const next = statuses.filter((s) => s !== current)[Math.floor(random() * 2)]!;
    const at = Date.now();
    const review = control.setStatus(id, { client: next });
    sent.push({ account, key: `${account}|${id}|${String(review.updated_date)}`, at });
    n += 1;
    // Paced against the start (Poisson-free, evenly spaced on average) so the rate holds whatever a call costs.
    const due = start + (n * 1000) / perSecond;
    await sleep(Math.max(0, due - Date.now()) * (0.5 + random()));
  }
}

/** Latencies (ms) of the changes received, and the keys of those not received, per account. */
export function matchChanges(
  sent: readonly Change[],
  events: StatusEvents,
): { latencies: number[]; byAccount: Map<string, { made: number; latencies: number[]; missing: string[] }> } {
  const byAccount = new Map<string, { made: number; latencies: number[]; missing: string[] }>();
  const latencies: number[] = [];
  for (const c of sent) {
    const a = byAccount.get(c.account) ?? { made: 0, latencies: [], missing: [] };
    byAccount.set(c.account, a);
    a.made += 1;
    const got = events.received.get(c.key);
    if (got === undefined) a.missing.push(c.key);
    else {
      a.latencies.push(got - c.at);
      latencies.push(got - c.at);
    }
  }
  return { latencies, byAccount };
}

/** Waits until every change was received or timeoutMs passed. */
export async function awaitDelivery(sent: readonly Change[], events: StatusEvents, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until && sent.some((c) => !events.received.has(c.key))) await sleep(200);
}

/** Reads a replica's /metrics and returns the value of a metric without labels (null if absent). */
export async function metric(port: number, name: string): Promise<number | null> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => null);
  if (!res?.ok) return null;
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : null;
}
