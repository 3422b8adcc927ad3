import fc from 'fast-check';
import type { Review } from '../../src/core/review.js';
import { accountKeys } from '../../src/redis/connection.js';
import { RESTORING } from '../../src/redis/snapshot-restore.js';
import { checkDeployment, type CheckStats, type Violation, type Window } from './checker.js';
import { VirtualClock } from './clock.js';
import { Deployment, SIM_ENV, type PortWrappers } from './deployment.js';
import { DELETE_RETENTION_MS, SimKafka } from './kafka.js';
import { MUTANTS } from './mutants.js';
import { DEFAULT_FAULTS, planArb, QUIET_TAIL_MS, type Change, type Fault, type FaultClass, type Plan } from './plan.js';
import { SimRedisServer } from './redis.js';
import { PAGE_LATENCY_MS, SimUpstream } from './upstream.js';
import { World, type TraceLine } from './world.js';

const TXN_TIMEOUT_MS = Number(SIM_ENV.KAFKA_TRANSACTION_TIMEOUT_MS);

// Runs schedules: builds the world of a plan, lets the replicas run under fast-check's scheduler on the virtual
// clock through the fault phase and the quiet tail, then checks the contract on what Kafka committed.

/** Options of a simulation run. */
export interface SimulationOptions {
  /** Enabled fault classes (default DEFAULT_FAULTS). */
  faults?: readonly FaultClass[];
  /** A mutant of mutants.ts. */
  mutant?: string;
  /** Classes every schedule has at least one fault of (as a mutant's own classes; the mutation gate's trigger). */
  focus?: readonly FaultClass[];
}

/** What one schedule did. */
export interface ScheduleOutcome {
  violation: Violation | null;
  plan: Plan;
  trace: TraceLine[];
  steps: number;
  stats: CheckStats;
  /** A digest of the whole trace, every Kafka record and Redis's keys at the end: equal when a seed replays. */
  digest: string;
}

const START = Date.UTC(2026, 10, 27, 0, 0, 0);
const STATUSES = ['PENDING', 'APPROVED', 'REJECTED'];
// Steps of a schedule beyond which it is a livelock (a healthy schedule takes a few thousand).
const STEP_LIMIT = 400_000;

/** The fault classes of a run: the given (or default) ones plus the mutant's. */
export function faultsOf(options: SimulationOptions): Set<FaultClass> {
  const faults = new Set<FaultClass>(options.faults ?? DEFAULT_FAULTS);
  if (options.mutant) for (const f of mutant(options.mutant).faults) faults.add(f);
  for (const f of options.focus ?? []) faults.add(f);
  return faults;
}

/** The classes every schedule of a run has a fault of: the mutant's and the run's focus. */
function focusOf(options: SimulationOptions): FaultClass[] {
  return [...(options.mutant ? mutant(options.mutant).faults : []), ...(options.focus ?? [])];
}

function mutant(name: string) {
  const m = MUTANTS[name];
  if (!m) throw new Error(`unknown mutant ${name} (known: ${Object.keys(MUTANTS).join(', ')})`);
  return m;
}

/** A small deterministic generator (mulberry32) for the backoff jitter. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function initialReviews(upstream: SimUpstream, count: number, base: number): void {
  for (let i = 0; i < count; i++) {
    const id = base + i * 37;
    upstream.put({
      id,
      updated_date: upstream.now() - 600_000 + i * 1_000,
      client_publication_status: STATUSES[i % 3]!,
      pwr_publication_status: STATUSES[(i + 1) % 3]!,
      headline: `review ${id}`,
      helpful_votes: 0,
    });
  }
}

/** Runs one schedule on the given scheduler. */
export async function runSchedule(
  scheduler: fc.Scheduler,
  plan: Plan,
  faults: ReadonlySet<FaultClass>,
  mutantName?: string,
): Promise<ScheduleOutcome> {
  // Swarm testing: the schedule runs the classes its plan drew from the run's (plan.ts).
  if (plan.classes) faults = new Set(plan.classes.filter((c) => faults.has(c)));
  const clock = new VirtualClock(START);
  const draw = seeded(plan.jitterSeed ^ 0x5eed);
  const latency = (label: string): number => {
    const [, system, what] = /^(\S+) ?(\S*)/.exec(label) ?? [];
    if (system === 'redis') return 1 + Math.floor(draw() * 3);
    if (system === 'upstream')
      return PAGE_LATENCY_MS.min + Math.floor(draw() * (PAGE_LATENCY_MS.max - PAGE_LATENCY_MS.min));
    if (what === 'init') return 20 + Math.floor(draw() * 40);
    return system === 'kafka' ? 5 + Math.floor(draw() * 20) : 0;
  };
  const world = new World(clock, scheduler, START, latency);
  world.freezeHoldsInit = faults.has('kafka-only-fence');
  const kafka = new SimKafka(() => clock.now(), TXN_TIMEOUT_MS);
  const redis = new SimRedisServer(() => clock.now());
  const wrappers: PortWrappers = mutantName ? mutant(mutantName).wrappers : {};
  const random = seeded(plan.jitterSeed);

  const upstream = new SimUpstream(world, plan.order, plan.pageSize, plan.clockOffsetMs, plan.dateHeaderOffsetMs);
  initialReviews(upstream, plan.reviews, 1);
  const main = new Deployment(
    'main',
    world,
    redis,
    kafka,
    upstream,
    { BRIDGE_ACCOUNT: 'acct', UPSTREAM_PAGE_SIZE: String(plan.pageSize) },
    wrappers,
    random,
  );
  const deployments = [main];
  let mainStart = 0;
  if (faults.has('foreign-deployment')) {
    // A second deployment as docs/operations.md once described it: its own account, event topics and Redis prefix,
    // the default changelog topic. It starts first, so that the changelog holds its records when ours starts.
    const otherUpstream = new SimUpstream(world, 'id-asc', 5, 0);
    initialReviews(otherUpstream, 12, 5);
    const other = new Deployment(
      'other',
      world,
      redis,
      kafka,
      otherUpstream,
      {
        BRIDGE_ACCOUNT: 'other',
        REDIS_KEY_PREFIX: 'other',
        EVENT_SOURCE: 'urn:reviews-bridge:other',
        KAFKA_TOPIC_CREATED: 'other.review.created',
        KAFKA_TOPIC_STATUS_CHANGED: 'other.review.status_changed',
        KAFKA_TOPIC_UPDATED: 'other.review.updated',
        KAFKA_TOPIC_DELETED: 'other.review.deleted',
        KAFKA_TOPIC_STATE: 'other.review.state',
        KAFKA_TOPIC_DEAD_LETTER: 'other.review.dead-letter',
        KAFKA_TOPIC_HEARTBEAT: 'other.review.heartbeat',
      },
      {},
      random,
    );
    deployments.push(other);
    other.start(0);
    mainStart = 20_000;
  }

  // Upstream changes: applied at their time, visible after their lag.
  let created = 0;
  let malformed = 0;
  const apply = (change: Change): void => {
    const ids = [...upstream.reviews.keys()].sort((a, b) => a - b);
    const id = ids.length > 0 ? ids[change.pick % ids.length]! : null;
    const prev = id === null ? null : upstream.reviews.get(id)!;
    const now = upstream.now();
    const visibleAt = clock.now() + change.lagMs;
    const next = (fields: Partial<Review>, moves = true): Review => ({
      ...prev!,
      ...fields,
      updated_date: moves ? Math.max(prev!.updated_date + 1, now) : prev!.updated_date,
    });
    switch (change.kind) {
      case 'status':
        if (prev) {
          const field = change.pick % 2 === 0 ? 'client_publication_status' : 'pwr_publication_status';
          const status = STATUSES[(STATUSES.indexOf(String(prev[field])) + 1 + (change.pick % 2)) % 3]!;
          upstream.put(next({ [field]: status }), visibleAt);
        }
        break;
      case 'edit':
        if (prev) upstream.put(next({ headline: `${prev.headline ?? ''}!` }), visibleAt);
        break;
      case 'ahead':
        // Stamped minutes or hours past the upstream's present (a writer with a clock ahead).
        if (prev) {
          const ahead = next({ headline: `${prev.headline ?? ''}>` });
          upstream.put({ ...ahead, updated_date: Math.max(ahead.updated_date, now + change.aheadMs!) }, visibleAt);
        }
        break;
      case 'burst':
        // Up to 100 changes within a second, each a status change or an edit of a review drawn from the pick.
        for (let i = 0; i < change.count!; i++) {
          clock.at(clock.now() + Math.floor((i * 1_000) / change.count!), () =>
            apply({ ...change, kind: i % 3 === 2 ? 'edit' : 'status', pick: change.pick + i * 7 }),
          );
        }
        break;
      case 'silent-edit':
        if (prev) upstream.put(next({ helpful_votes: (prev.helpful_votes ?? 0) + 1 }, false), visibleAt);
        break;
      case 'create': {
        const nid = 5_000 + ++created * 53;
        upstream.put(
          {
            id: nid,
            updated_date: now,
            client_publication_status: 'PENDING',
            pwr_publication_status: 'PENDING',
            headline: `review ${nid}`,
            helpful_votes: 0,
          },
          visibleAt,
        );
        break;
      }
      case 'delete':
        // Never more than a few at once, so that the deletion guard (a fraction of the account) lets them through.
        if (id !== null && upstream.deleted.size < plan.reviews / 4) upstream.remove(id);
        break;
      case 'malformed': {
        // A record the real validator refuses, for 20 s: of an id of its own (unreadable, or failing the schema),
        // or an existing review's record turning malformed (a field of the wrong type, a date out of range, a
        // forbidden key).
        const variant = change.pick % 5;
        const own = variant < 2 || prev === null;
        const mid = own ? 900_000 + ++malformed : prev.id;
        if (upstream.malformed.has(mid)) break;
        const raw: unknown = own
          ? variant === 0
            ? `<not json ${mid}>`
            : { id: mid, rating: 'x' }
          : variant === 2
            ? { ...prev, client_publication_status: 42 }
            : variant === 3
              ? { ...prev, updated_date: now + 3 * 86_400_000 }
              : JSON.parse(`{"__proto__": {}, "id": ${prev.id}, "updated_date": ${prev.updated_date}}`);
        upstream.malformed.set(mid, { id: mid, raw });
        upstream.malformedEver.push({ id: mid, raw, from: clock.now(), to: clock.now() + 20_000 });
        if (!own)
          upstream.broken.set(mid, [
            ...(upstream.broken.get(mid) ?? []),
            { from: clock.now(), to: clock.now() + 20_000 },
          ]);
        clock.at(clock.now() + 20_000, () => upstream.malformed.delete(mid));
        break;
      }
    }
  };
  for (const change of plan.changes) clock.at(START + change.at, () => apply(change));

  // Faults, and when each disturbed the deployments (the checker's progress bound starts once they heal).
  const disturbed: Window[] = [{ from: START, to: START + mainStart }];
  // A commit request held past the transaction timeout disturbs from when it is sent until the coordinator's abort
  // (a timeout after it is due), whenever that is: the fault's own window below assumes it is sent at once.
  kafka.onDelayedCommit = (delayMs) => {
    disturbed.push({ from: clock.now(), to: clock.now() + delayMs + TXN_TIMEOUT_MS });
  };
  // freeze-in-restore's copies of Redis, taken before the fault rolls Redis back to them.
  const copies = new Map<Fault, ReturnType<SimRedisServer['copy']>>();
  for (const f of plan.faults) {
    if (f.kind === 'freeze-in-restore' && f.trigger === 'rollback') {
      clock.at(START + Math.max(0, f.at - f.backMs), () => copies.set(f, redis.copy()));
    }
  }
  for (const f of plan.faults) {
    clock.at(START + f.at, () => {
      world.note(`fault ${JSON.stringify(f)}`);
      // A commit held past the transaction timeout disturbs until the coordinator's abort, a timeout later.
      const after = f.kind === 'kafka-commit-lost' ? 5_000 : f.kind === 'kafka-txn-timeout' ? TXN_TIMEOUT_MS : 0;
      const lasts = 'ms' in f ? f.ms + after : 0;
      if (f.kind !== 'crash') disturbed.push({ from: clock.now(), to: clock.now() + lasts });
      switch (f.kind) {
        case 'crash': {
          const replica = main.replicas[f.replica];
          if (!replica || replica.actor.crashed) return;
          replica.actor.crashAt = { step: replica.actor.steps + f.afterSteps, after: f.after };
          const watch = (): void => {
            if (replica.actor.crashed) {
              disturbed.push({ from: clock.now() - 1_000, to: clock.now() + f.downMs });
              clock.at(clock.now() + f.downMs, () => main.start(f.replica));
            } else if (clock.now() < START + plan.phaseMs) clock.at(clock.now() + 1_000, watch);
            else replica.actor.crashAt = null;
          };
          watch();
          return;
        }
        case 'freeze': {
          const replica = main.replicas[f.replica];
          if (replica) replica.actor.frozenUntil = Math.max(replica.actor.frozenUntil, clock.now() + f.ms);
          return;
        }
        case 'redis-flush':
          return redis.flush();
        case 'redis-partial-loss': {
          if (f.keys !== 'buckets') {
            // One key alone (evicted, deleted by hand), of the deployment under test.
            const pattern = `${main.config.redis.keyPrefix}:${f.keys === 'checkpoint' ? '*:checkpoint' : 'fingerprint-key'}`;
            world.note(`lost ${redis.lose(pattern, (keys) => keys).join(', ') || 'nothing'}`);
            return;
          }
          const lost = redis.lose('*:s:*', (keys) => keys.filter((_, i) => (i * 0.618 + f.share) % 1 < f.share));
          world.note(`lost ${lost.length} bucket(s)`);
          return;
        }
        case 'redis-loss-mid-commit': {
          // Armed until a commit of the deployment under test writes into a bucket that exists: that bucket goes
          // just before the script runs (its page's read found it whole).
          const mine = `${main.config.redis.keyPrefix}:`;
          redis.beforeCommit = (bucketKeys) => {
            const bucket = bucketKeys.find((k) => k.startsWith(mine) && redis.get(k) !== undefined);
            if (bucket === undefined) return;
            redis.beforeCommit = null;
            redis.del(bucket);
            world.note(`lost ${bucket} before a commit into it`);
            disturbed.push({ from: clock.now(), to: clock.now() });
          };
          return;
        }
        case 'freeze-in-restore': {
          // Armed until a replica of the deployment under test reaches the point in a restore: it freezes there,
          // past its lease, and resumes where it stood (its next command then runs as it was about to).
          const keys = accountKeys(main.config.redis.keyPrefix, main.config.account);
          const at = (commands: ReadonlyArray<readonly [string, unknown[]]>): boolean =>
            commands.some(([name, args]) => {
              const first = String(args[0]);
              switch (f.where) {
                case 'clear':
                  return name === 'unlink' && first === keys.checkpoint;
                case 'clear-within':
                  return name === 'hset' && first === keys.manifest && String(args[1]) === RESTORING;
                case 'batch':
                  return name === 'bridgeRestorePut' && String(args[1]) === keys.epoch;
                case 'finish':
                  return name === 'set' && first === keys.count;
              }
            });
          redis.beforeCommand = (actor, commands) => {
            if (!actor.name.startsWith(`${main.name}/`) || !at(commands)) return;
            redis.beforeCommand = null;
            actor.frozenUntil = Math.max(actor.frozenUntil, clock.now() + f.ms);
            world.note(`${actor.name} frozen ${f.ms} ms in a restore, before its ${f.where}`);
            disturbed.push({ from: clock.now(), to: clock.now() + f.ms });
          };
          if (f.trigger === 'flush') redis.flush();
          else {
            const copy = copies.get(f);
            if (copy) redis.rollBack(copy, /:(lease|epoch)$/);
            world.note(`Redis rolled back ${f.backMs} ms`);
          }
          return;
        }
        case 'redis-failover':
          // Losing a lease write makes two leaders at once: kafka-only-fence (see plan.ts).
          world.note(
            `failover lost ${redis.failover(f.writes, faults.has('kafka-only-fence') ? null : /:(lease|epoch)$/)} write(s)`,
          );
          return;
        case 'redis-refuse-writes':
          redis.refuseWrites =
            f.reply === 'oom'
              ? "OOM command not allowed when used memory > 'maxmemory'."
              : "READONLY You can't write against a read only replica.";
          clock.at(clock.now() + f.ms, () => (redis.refuseWrites = null));
          return;
        case 'kafka-send':
          kafka.refuseSends = 'NOT_ENOUGH_REPLICAS';
          clock.at(clock.now() + f.ms, () => (kafka.refuseSends = null));
          return;
        case 'kafka-commit-lost':
          // The next commit loses its answer, and every one within the window.
          kafka.loseCommits = { landed: f.landed, once: f.ms === 0, sweepOnly: f.sweepOnly };
          clock.at(clock.now() + f.ms, () => {
            if (kafka.loseCommits?.once === false) kafka.loseCommits = null;
          });
          return;
        case 'compaction':
          world.note(
            `compaction removed ${kafka.compact(main.config.kafka.topics.changelog, DELETE_RETENTION_MS)} record(s)`,
          );
          return;
        case 'upstream-fault':
          upstream.fault = f.fault;
          clock.at(clock.now() + f.ms, () => (upstream.fault = null));
          return;
        case 'redis-eviction': {
          const used = redis.used();
          if (f.flush) redis.flush();
          redis.maxmemory = Math.floor(used * f.share);
          world.note(`maxmemory ${redis.maxmemory} of ${used} bytes used, allkeys-lru`);
          clock.at(clock.now() + f.ms, () => {
            world.note(`maxmemory lifted (${redis.evicted} key(s) evicted so far)`);
            redis.maxmemory = null;
          });
          return;
        }
        case 'redis-lost-reply':
          redis.loseReplies = { every: f.every, ran: f.ran, resend: f.resend };
          clock.at(clock.now() + f.ms, () => {
            redis.loseReplies = null;
            world.note(`${redis.lostReplies} Redis repl(ies) lost so far`);
          });
          return;
        case 'kafka-txn-timeout':
          kafka.delayNextCommitMs = f.ms;
          return;
        case 'kafka-partial-send':
          kafka.refuseSends = 'REQUEST_TIMED_OUT';
          kafka.partialSends = true;
          clock.at(clock.now() + f.ms, () => {
            kafka.refuseSends = null;
            kafka.partialSends = false;
          });
          return;
        case 'tombstone-purge':
          world.note(
            `compaction (delete.retention.ms ${f.deleteRetentionMs}) removed ${kafka.compact(main.config.kafka.topics.changelog, f.deleteRetentionMs)} record(s)`,
          );
          return;
        case 'topic-config': {
          const topic = main.config.kafka.topics.changelog;
          kafka.cleanupPolicy.set(topic, f.policy);
          clock.at(clock.now() + f.ms, () => kafka.cleanupPolicy.delete(topic));
          return;
        }
      }
    });
  }
  // The faults end with the fault phase: nothing is left refused or armed in the quiet tail.
  clock.at(START + plan.phaseMs, () => {
    redis.refuseWrites = null;
    redis.maxmemory = null;
    redis.loseReplies = null;
    redis.beforeCommit = null;
    redis.beforeCommand = null;
    kafka.refuseSends = null;
    kafka.partialSends = false;
    kafka.loseCommits = null;
    kafka.cleanupPolicy.clear();
    upstream.fault = null;
    world.note('faults end');
  });

  const startMain = (): void => {
    for (let r = 0; r < plan.replicas; r++) main.start(r);
  };
  if (mainStart === 0) startMain();
  else clock.at(START + mainStart, startMain);

  // The driver: answer every step the scheduler holds (in its order), and move the clock only when none is left.
  const end = START + plan.phaseMs + QUIET_TAIL_MS;
  let steps = 0;
  let livelock = false;
  while (clock.now() < end) {
    for (;;) {
      while (scheduler.count() > 0) {
        await scheduler.waitOne();
        if (++steps > STEP_LIMIT) break;
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (scheduler.count() === 0 || steps > STEP_LIMIT) break;
    }
    if (steps > STEP_LIMIT) {
      livelock = true;
      break;
    }
    const next = clock.nextAt();
    if (next === null || next > end) break;
    clock.fireNext();
  }
  world.over = true;
  kafka.expire();

  const stats: CheckStats = { events: 0, reviews: 0 };
  let violation: Violation | null = livelock
    ? {
        deployment: 'main',
        property: 'every final state reached',
        detail: `no end after ${STEP_LIMIT} steps (a livelock)`,
      }
    : null;
  for (const d of deployments) {
    const target = { name: d.name, config: d.config, kafka, upstream: d.upstream, redis, disturbed, start: START, end };
    violation ??= checkDeployment(target, stats);
  }
  const digest = `${world.traceDigest()}:${kafka.digest()}:${redis.digest()}`;
  return { violation, plan, trace: world.trace, steps, stats, digest };
}

/** One schedule of a run: its seed, its outcome. */
export interface ScheduleResult extends ScheduleOutcome {
  seed: number;
}

/** Runs the schedule of `seed` (fast-check draws the plan and the scheduler from it); no shrinking. */
export async function runSeed(seed: number, options: SimulationOptions = {}): Promise<ScheduleResult> {
  const faults = faultsOf(options);
  let outcome = null as ScheduleOutcome | null;
  const details = await fc.check(
    fc.asyncProperty(fc.scheduler(), planArb(faults, focusOf(options)), async (s, plan) => {
      outcome = await runSchedule(s, plan, faults, options.mutant);
      return outcome.violation === null;
    }),
    { seed, numRuns: 1, endOnFailure: true },
  );
  if (!outcome)
    throw new Error(`schedule ${seed} did not run: ${String(details.errorInstance)}`, { cause: details.errorInstance });
  return { ...outcome!, seed };
}

/** The seed of schedule `i` of a run seeded with `seed` (schedule 0 has the run's seed itself). */
export function scheduleSeed(seed: number, i: number): number {
  return (seed + i) | 0;
}

/**
 * Shrinks the failing schedule of `seed` with fast-check (fewer changes and faults, smaller values, another
 * order of the scheduler's answers) for at most `seconds`; resolves the smallest failing schedule found.
 */
export async function shrinkSeed(
  seed: number,
  options: SimulationOptions,
  seconds: number,
): Promise<ScheduleOutcome | null> {
  const faults = faultsOf(options);
  let smallest: ScheduleOutcome | null = null;
  await fc.check(
    fc.asyncProperty(fc.scheduler(), planArb(faults, focusOf(options)), async (s, plan) => {
      const outcome = await runSchedule(s, plan, faults, options.mutant);
      if (outcome.violation) smallest = outcome;
      return outcome.violation === null;
    }),
    { seed, numRuns: 1, interruptAfterTimeLimit: seconds * 1000, markInterruptAsFailure: false },
  );
  return smallest;
}
