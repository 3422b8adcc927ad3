import { getHeapStatistics } from 'node:v8';
import { userInfo } from 'node:os';
import type { Logger } from 'pino';
import { missingHeapFlags } from '../app/node-flags.js';
import { editDistance } from '../core/edit-distance.js';
import { unknownSettingMessage, unknownSettings } from '../config/unknown-settings.js';
import { passesFromConfig, redisFromConfig, startApp, upstreamFromConfig } from '../app/app.js';
import { loadAccounts, type AccountsConfig } from '../config/accounts.js';
import { ConfigError, type BridgeConfig } from '../config/config.js';
import { Lease, leaseHolder } from '../redis/lease.js';
import { closeRedisNow, redisConnectionProblem, type BridgeRedis } from '../redis/connection.js';
import { failureReason, redisAddressSettings, settingsToCheck } from '../core/dependency-health.js';
import { readAccountStatus, readAccountsOverview } from '../redis/account-status.js';
import { decideDurability, durabilityMessage, probeReplicas } from '../redis/durability.js';
import { LeaseKeeper } from '../bridge/lease-keeper.js';
import { createLogger } from '../ops/logger.js';
import { BridgeMetrics } from '../ops/metrics.js';
import { completedProgress, fullScanEstimate, progressOf, ProgressReporter, type Progress } from '../core/progress.js';
import { KafkaPublisher } from '../kafka/publisher.js';
import { newResyncRequest, parseResyncArgs, UsageError } from '../core/resync-request.js';
import { fingerprintKeySourceFromConfig } from '../app/account.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { systemClock, type Clock } from '../core/clock.js';
import { checkpointChangeRefusal, parseWatermark } from '../core/checkpoint-change.js';
import { readCheckpointView } from '../redis/checkpoint-view.js';

// The commands: `run` (the service), `sweep` (one full pass now), `status`, `pause` / `resume`, `resync`,
// `restore`, `checkpoint get|set`, `simulate` (the upstream stand-in).
// src/cli.ts is the process entry that calls main().

const USAGE = `usage: reviews-bridge <command>

  run        the long-running bridge (configuration from the environment; see README)
  sweep      one reconciliation sweep now: asks the running leader, or runs it here when no replica leads
             --wait: follow it to the end with a progress bar (plain lines when not a terminal)
  status     watermark, sweep cursor and progress, snapshot size, lease holder, pause, last passes (JSON);
             with an accounts file: every account and the replica leading it, and the live replicas
  With BRIDGE_ACCOUNTS_FILE, sweep, pause, resume, resync, restore, reset and checkpoint act on one account:
  --account <id> (status: all, or the one named).
  pause      stop upstream traffic (the leader honours it within one tick; kept across restarts)
  resume     lift a pause; polling continues from the watermark, nothing is lost
  resync     re-read chosen reviews: --ids 1,2,3 | --since <date> | --all  [--wait]
  restore    rebuild the Redis snapshot and checkpoint from the Kafka changelog (asks the running leader, or
             does it here when no replica leads)
  checkpoint get                       the checkpoint: watermark, sweep cursor, initial load, changelog position
  checkpoint set --watermark <date>    rewind (or move) the watermark, only while paused: the leader commits it to
             the changelog and Redis; polls re-read from there on resume (date: ISO 8601 or epoch milliseconds)
  reset      start a paused account over: forget its Redis state; the leader rebuilds it from this
             deployment's changelog, or runs a new initial load
  simulate   the bundled upstream simulator (simulate --help)
`;

async function run({ accounts, file }: AccountsConfig): Promise<void> {
  const config = accounts[0]!;
  const logger = createLogger(config.logLevel, file === null ? { account: config.account } : {});
  for (const typo of unknownSettings(process.env))
    logger.warn({ setting: typo.name, meant: typo.meant }, unknownSettingMessage(typo));
  // src/cli.ts re-executed this process with these caps; they are missing only where Node has no process.execve.
  const uncapped = missingHeapFlags(process.execArgv, process.env.NODE_OPTIONS ?? '', accounts.length);
  if (uncapped.length > 0) logger.warn({ flags: uncapped }, 'this Node cannot re-execute itself: heap left uncapped');
  const app = await startApp(accounts, logger);
  const heapLimitMiB = Math.round(getHeapStatistics().heap_size_limit / 2 ** 20);
  const runtime = { pid: process.pid, node: process.version, heapLimitMiB };
  logger.info(
    file === null
      ? { ops: app.ops.url, upstream: config.upstream.baseUrl, brokers: config.kafka.brokers, ...runtime }
      : {
          ops: app.ops.url,
          accounts: accounts.length,
          replica: app.replica,
          brokers: config.kafka.brokers,
          ...runtime,
        },
    'bridge started',
  );
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    app.stop().then(
      () => {
        logger.info('stopped cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

const POLL_STATUS_MS = 1_000;

/** Whether Redis can meet REDIS_WAIT_REPLICAS now, as one line (null: it can). */
async function redisDurability(redis: BridgeRedis, config: BridgeConfig, clock: Clock): Promise<string | null> {
  const primaries = await probeReplicas(redis, config.redis.target).catch(() => null);
  if (!primaries) return 'Redis replicas unknown: the probe failed';
  return durabilityMessage(decideDurability(config.redis.waitReplicas, primaries, { kind: 'ok' }, clock.now()));
}

/** The progress of the running sweep or initial load from the checkpoint, estimated against the snapshot size. */
async function sweepProgress(store: SnapshotStore, now: number): Promise<Progress | null> {
  const [checkpoint, size] = await Promise.all([store.checkpoint(), store.size()]);
  if (!checkpoint.sweep) return null;
  const { kind, seen, startedAt } = checkpoint.sweep;
  return progressOf({ seen, estimatedTotal: fullScanEstimate(kind, size), startedAt, now });
}

/**
 * Follows a sweep the leader runs on request until one completes after the request (the request taken, no sweep
 * in progress, and the last completed sweep newer than the request).
 */
async function followRequestedSweep(
  store: SnapshotStore,
  requestedAt: number,
  reporter: ProgressReporter,
  clock: Clock,
) {
  let last: Progress = progressOf({ seen: 0, estimatedTotal: null, startedAt: requestedAt, now: requestedAt });
  for (;;) {
    const [checkpoint, pending] = await Promise.all([store.checkpoint(), store.sweepRequested()]);
    if (!pending && !checkpoint.sweep && (checkpoint.lastSweepAt ?? 0) >= requestedAt) break;
    const progress = await sweepProgress(store, clock.now());
    if (progress) reporter.update((last = progress));
    await clock.sleep(POLL_STATUS_MS);
  }
  // The sweep's own count is gone with it; what it listed is the snapshot now.
  reporter.done(completedProgress(last, await store.size()), 'completed');
  return store.checkpoint();
}

async function sweep(config: BridgeConfig, args: string[], clock: Clock): Promise<void> {
  const wait = args.includes('--wait');
  const logger = createLogger(config.logLevel, { account: config.account, command: 'sweep' });
  const { redis, store, keys } = redisFromConfig(config);
  const reporter = new ProgressReporter(process.stderr, 'sweep');
  try {
    if (await leaseHolder(redis, keys)) {
      const requestedAt = clock.now();
      await store.requestSweep(requestedAt);
      if (!wait) {
        console.log(JSON.stringify({ requested: true, note: 'the leading replica starts the sweep at its next tick' }));
        return;
      }
      const checkpoint = await followRequestedSweep(store, requestedAt, reporter, clock);
      const iso = checkpoint.lastSweepAt === null ? null : new Date(checkpoint.lastSweepAt).toISOString();
      console.log(JSON.stringify({ requested: true, completed: true, lastSweepAt: iso }));
      return;
    }
    const done = await leadOnce(config, logger, async ({ epoch, signal, passes, store: leaderStore }) => {
      let progress: Progress | null = null;
      const run = await passes.fullScan(epoch, signal, async () => {
        if (!wait) return;
        progress = (await sweepProgress(leaderStore, clock.now())) ?? progress;
        if (progress) reporter.update(progress);
      });
      // The last report came before the last page: the pass's own count says how many it saw.
      if (wait && progress) reporter.done(completedProgress(progress as Progress, run.summary.reviews), 'completed');
      console.log(JSON.stringify({ completed: true, kind: run.type, ...run.summary }));
    });
    if (!done) {
      await store.requestSweep(clock.now());
      console.log(JSON.stringify({ requested: true }));
    }
  } finally {
    await redis.quit();
  }
}

/** What a one-shot command does while it holds an account's lease. */
interface Leadership {
  epoch: number;
  signal: AbortSignal;
  passes: ReturnType<typeof passesFromConfig>;
  store: SnapshotStore;
}

/**
 * Runs `fn` as the account's leader when no replica leads it: takes the lease, readies the leadership as the
 * service does (transactional id, restore of Redis from Kafka where needed), then gives everything back.
 * Resolves false when the lease could not be taken.
 */
async function leadOnce(
  config: BridgeConfig,
  logger: Logger,
  fn: (l: Leadership) => Promise<void>,
  { forceRestore = false } = {},
): Promise<boolean> {
  const { redis, store, keys } = redisFromConfig(config);
  const work = new AbortController();
  const keeper = new LeaseKeeper(new Lease(redis, keys, config.lease.ttlMs), {
    periodMs: config.lease.ttlMs / 3,
    logger,
    onLost: () => work.abort(new Error('lease lost')),
  });
  try {
    const epoch = await keeper.renewNow();
    if (epoch === 0) return false;
    keeper.start();
    const metrics = new BridgeMetrics({ account: config.account });
    const publisher = new KafkaPublisher(config.kafka, config.account, logger, config.privacy);
    const source = upstreamFromConfig(config, metrics, logger);
    const keySource = fingerprintKeySourceFromConfig(config, redis, logger);
    const passes = passesFromConfig(config, { source, store, sink: publisher, metrics, logger, keySource });
    try {
      await publisher.connect();
      if (!(await passes.prepare(epoch, work.signal, forceRestore)))
        throw new Error('the lease epoch is not above the changelog’s; run the command again');
      await fn({ epoch, signal: work.signal, passes, store });
    } finally {
      // A page still in flight after a failure is published and committed (or fails) before the lease goes.
      await passes.settle();
      await Promise.allSettled([publisher.disconnect(), source.close()]);
      await keeper.release();
    }
    return true;
  } finally {
    await redis.quit();
  }
}

/**
 * `restore`: rebuilds the account's Redis snapshot and checkpoint from the Kafka changelog. With a leader
 * running, it is asked through Redis (it restores between passes); without one, this command does it.
 */
async function restore(config: BridgeConfig, clock: Clock): Promise<void> {
  const logger = createLogger(config.logLevel, { account: config.account, command: 'restore' });
  const { redis, store, keys } = redisFromConfig(config);
  try {
    if (await leaseHolder(redis, keys)) {
      await store.requestRestore(clock.now());
      console.log(JSON.stringify({ requested: true, note: 'the leading replica restores at its next tick' }));
      return;
    }
    // The leadership itself runs the restore (forced: a full one), as a leader does when it takes the account.
    const done = await leadOnce(
      config,
      logger,
      async () => {
        const checkpoint = await store.checkpoint();
        const snapshotReviews = await store.size();
        console.log(JSON.stringify({ restored: true, snapshotReviews, watermark: checkpoint.watermark }));
      },
      { forceRestore: true },
    );
    if (!done) {
      await store.requestRestore(clock.now());
      console.log(JSON.stringify({ requested: true }));
    }
  } finally {
    await redis.quit();
  }
}

/**
 * `reset`: starts a paused account over (SnapshotStore.reset): its Redis state is forgotten and the leader rebuilds
 * it from this deployment's changelog, or runs a new initial load. Logged with the operating-system user who ran it.
 */
async function reset(config: BridgeConfig, clock: Clock): Promise<void> {
  const logger = createLogger(config.logLevel, { account: config.account, command: 'reset' });
  const { redis, store } = redisFromConfig(config);
  try {
    if (!(await store.reset(clock.now()))) {
      throw new UsageError('the account is not paused: run `reviews-bridge pause` first');
    }
    logger.warn(
      { by: operatingUser() },
      "account reset by an operator: its Redis state is gone; the leader rebuilds it from this deployment's changelog or starts over",
    );
    console.log(
      JSON.stringify({ reset: true, note: 'resume the account (`reviews-bridge resume`) to let the leader go on' }),
    );
  } finally {
    await redis.quit();
  }
}

/** The operating-system user running a command (a name, never a secret), or null when it cannot be read. */
function operatingUser(): string | null {
  try {
    return userInfo().username;
  } catch {
    return null;
  }
}

/** `status` of an accounts file without --account: who leads which account, and each one's position. */
async function overview(accounts: readonly BridgeConfig[]): Promise<void> {
  const { redis } = redisFromConfig(accounts[0]!);
  try {
    const ttlMs = Math.max(...accounts.map((c) => c.lease.ttlMs));
    const refs = accounts.map((c) => ({ account: c.account, keyPrefix: c.redis.keyPrefix }));
    console.log(JSON.stringify(await readAccountsOverview(redis, refs, ttlMs), null, 2));
  } finally {
    await redis.quit();
  }
}

async function status(config: BridgeConfig, clock: Clock): Promise<void> {
  const { redis } = redisFromConfig(config);
  try {
    const durability = await redisDurability(redis, config, clock);
    // Reads the replicas have not confirmed rather than none: status must say why the bridge waits, not wait too.
    if (durability !== null) redis.durability.replicas = 0;
    const ref = { account: config.account, keyPrefix: config.redis.keyPrefix };
    console.log(JSON.stringify(await readAccountStatus(redis, ref, durability, () => clock.now()), null, 2));
  } finally {
    await redis.quit();
  }
}

async function pause(config: BridgeConfig, resume: boolean, clock: Clock): Promise<void> {
  const { redis, store } = redisFromConfig(config);
  try {
    if (resume) {
      const wasPaused = await store.resume();
      console.log(
        JSON.stringify({
          account: config.account,
          paused: false,
          wasPaused,
          note: 'polling continues from the watermark',
        }),
      );
    } else {
      await store.pause(clock.now());
      const since = await store.pausedSince();
      const pausedSince = since === null ? null : new Date(since).toISOString();
      console.log(
        JSON.stringify({
          account: config.account,
          paused: true,
          // The name `status` and the admin API use; `since` is its former name here, kept for scripts.
          pausedSince,
          since: pausedSince,
          note: 'the leader stops upstream requests at its next tick; `reviews-bridge resume` lifts it',
        }),
      );
    }
  } finally {
    await redis.quit();
  }
}

async function resync(config: BridgeConfig, args: string[], clock: Clock): Promise<void> {
  const { scope, wait } = parseResyncArgs(args, clock.now());
  const { redis, store } = redisFromConfig(config);
  try {
    const request = newResyncRequest(scope, clock.now());
    await store.requestResync(request);
    console.log(JSON.stringify({ requested: true, id: request.id, scope }));
    if (!wait) return;
    const reporter = new ProgressReporter(process.stderr, 'resync');
    for (;;) {
      const pass = await store.passProgress();
      if (pass && pass.requestId === request.id) {
        const progress = progressOf({ ...pass, now: pass.finishedAt ?? clock.now() });
        if (pass.finishedAt !== null) {
          reporter.done(progress, 'completed');
          return;
        }
        reporter.update(progress);
      }
      await clock.sleep(POLL_STATUS_MS);
    }
  } finally {
    await redis.quit();
  }
}

/**
 * `checkpoint get` prints the account's checkpoint; `checkpoint set --watermark <date>` records a change for the
 * leader (only while paused), or applies it here when no replica leads.
 */
async function checkpoint(config: BridgeConfig, args: string[], clock: Clock): Promise<void> {
  const [sub, ...rest] = args;
  if (sub !== 'get' && sub !== 'set')
    throw new UsageError('checkpoint: expected `checkpoint get` or `checkpoint set --watermark <date>`');
  const ref = { account: config.account, keyPrefix: config.redis.keyPrefix };
  if (sub === 'get') {
    if (rest.length > 0) throw new UsageError(`checkpoint get: unknown argument ${JSON.stringify(rest[0])}`);
    const { redis } = redisFromConfig(config);
    try {
      console.log(JSON.stringify(await readCheckpointView(redis, ref), null, 2));
    } finally {
      await redis.quit();
    }
    return;
  }
  const at = rest.indexOf('--watermark');
  const value = at === -1 ? undefined : rest[at + 1];
  const unknown = rest.filter((_, i) => i !== at && i !== at + 1);
  if (value === undefined || unknown.length > 0)
    throw new UsageError('checkpoint set: expected --watermark <ISO 8601 date or epoch milliseconds>');
  const parsed = parseWatermark(value, clock.now());
  if ('problem' in parsed) throw new UsageError(`checkpoint set: --watermark: ${parsed.problem}`);
  const logger = createLogger(config.logLevel, { account: config.account, command: 'checkpoint' });
  const { redis, store, keys } = redisFromConfig(config);
  try {
    const refusal = checkpointChangeRefusal(await store.pausedSince());
    if (refusal !== null) {
      process.stderr.write(`reviews-bridge checkpoint set: ${refusal}\n`);
      process.exitCode = 1;
      return;
    }
    const watermark = new Date(parsed.ms).toISOString();
    await store.requestCheckpointChange({ watermark: parsed.ms, requestedAt: clock.now(), by: 'cli' });
    logger.info({ by: 'cli', watermark }, 'checkpoint change recorded');
    const lease = await leaseHolder(redis, keys);
    if (lease) {
      console.log(JSON.stringify({ requested: true, watermark, leader: lease.holder }));
      return;
    }
    // No replica leads: this command applies it as the leader would, through the changelog then Redis.
    const done = await leadOnce(config, logger, async ({ epoch, passes }) => {
      await passes.applyCheckpointChange(epoch);
    });
    console.log(JSON.stringify(done ? { applied: true, watermark } : { requested: true, watermark, leader: null }));
  } finally {
    await redis.quit();
  }
}

const COMMANDS = ['run', 'sweep', 'status', 'pause', 'resume', 'resync', 'restore', 'reset', 'checkpoint'];

// The flags each command takes besides --account (resync parses its own: src/core/resync-request.ts).
const FLAGS: Readonly<Record<string, readonly string[]>> = {
  run: [],
  sweep: ['--wait'],
  status: [],
  pause: [],
  resume: [],
  restore: [],
  reset: [],
};

/** The candidate nearest to `word` when it is a likely typo of it (at most two edits), else null. */
export function closest(word: string, candidates: readonly string[]): string | null {
  let best: { candidate: string; distance: number } | null = null;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance <= Math.min(2, candidate.length - 1) && (best === null || distance < best.distance))
      best = { candidate, distance };
  }
  return best?.candidate ?? null;
}

/** Refuses an argument `command` does not take, naming it and the flag it most likely meant. */
export function checkArgs(command: string, args: readonly string[]): void {
  const allowed = FLAGS[command];
  if (allowed === undefined) return;
  const unknown = args.find((arg) => !allowed.includes(arg));
  if (unknown === undefined) return;
  // `run` serves every account of its configuration: it takes no --account either.
  const all = command === 'run' ? allowed : [...allowed, '--account <id>'];
  const guess = closest(
    unknown,
    all.map((flag) => flag.split(' ')[0]!),
  );
  const hint =
    guess !== null
      ? `did you mean ${guess}?`
      : all.length > 0
        ? `${command} takes only ${all.join(', ')}`
        : `${command} takes no arguments: its settings come from the environment`;
  throw new UsageError(`unknown argument ${JSON.stringify(unknown)} (${hint})`);
}

/** What `reviews-bridge` prints for a command it does not know: the mistake first, then the usage. */
export function unknownCommand(command: string): string {
  const guess = closest(command, [...COMMANDS, 'simulate', 'help']);
  return `reviews-bridge: unknown command ${JSON.stringify(command)}${guess === null ? '' : ` (did you mean ${guess}?)`}\n\n${USAGE}`;
}

/** Takes `--account <id>` out of the arguments. */
export function accountArg(args: readonly string[]): { account: string | null; args: string[] } {
  const at = args.indexOf('--account');
  if (at === -1) return { account: null, args: [...args] };
  const account = args[at + 1];
  if (account === undefined || account.startsWith('--')) throw new UsageError('--account needs an account id');
  return { account, args: [...args.slice(0, at), ...args.slice(at + 2)] };
}

/** The account a command acts on: the one named, or the only one. */
export function chooseAccount({ accounts, file }: AccountsConfig, account: string | null): BridgeConfig {
  if (account === null) {
    if (accounts.length === 1) return accounts[0]!;
    throw new UsageError(`${accounts.length} accounts in ${file}: name one with --account <id>`);
  }
  const found = accounts.find((c) => c.account === account);
  if (!found) throw new UsageError(`no account ${JSON.stringify(account)} in ${file ?? 'the environment'}`);
  return found;
}

/** Entry point of the `reviews-bridge` command; `clock` times its requests and waits (tests pass a fake). */
export async function main(argv: string[], clock: Clock = systemClock): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'simulate') {
    const { runSimulatorCli } = await import('../simulator/index.js');
    await runSimulatorCli(rest);
    return;
  }
  if (!command || ['--help', '-h', 'help'].includes(command)) {
    process.stderr.write(USAGE);
    process.exitCode = 0;
    return;
  }
  if (!COMMANDS.includes(command)) {
    process.stderr.write(unknownCommand(command));
    process.exitCode = 2;
    return;
  }
  // `reviews-bridge sweep --help` too, rather than an unknown argument.
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stderr.write(USAGE);
    process.exitCode = 0;
    return;
  }
  let parsed: ReturnType<typeof accountArg>;
  try {
    // Arguments first: a typo is reported without a configuration to load.
    parsed = command === 'run' ? { account: null, args: rest } : accountArg(rest);
    checkArgs(command, parsed.args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`reviews-bridge ${command}: ${err.message}\n`);
    process.exit(2);
  }
  // A mistyped setting's name: said before what its absence causes ("KAFKA_BROKERS: required"); `run` logs it.
  const typos = unknownSettings(process.env).map(unknownSettingMessage);
  let loaded: AccountsConfig;
  try {
    loaded = loadAccounts();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(typos.map((t) => `reviews-bridge: warning: ${t}\n`).join(''));
      process.stderr.write(lines(`reviews-bridge: `, err.message));
      process.exit(2);
    }
    throw err;
  }
  try {
    if (command === 'run') {
      await run(loaded);
      return;
    }
    process.stderr.write(typos.map((t) => `reviews-bridge ${command}: warning: ${t}\n`).join(''));
    const { account, args } = parsed;
    await redisAnswers(loaded.accounts[0]!, command);
    if (command === 'status' && account === null && loaded.file !== null) {
      await overview(loaded.accounts);
      return;
    }
    const config = chooseAccount(loaded, account);
    if (command === 'sweep') await sweep(config, args, clock);
    else if (command === 'pause' || command === 'resume') await pause(config, command === 'resume', clock);
    else if (command === 'resync') await resync(config, args, clock);
    else if (command === 'restore') await restore(config, clock);
    else if (command === 'checkpoint') await checkpoint(config, args, clock);
    else if (command === 'reset') await reset(config, clock);
    else await status(config, clock);
  } catch (err) {
    // Bad arguments, or a setting the environment cannot meet (found at start-up, e.g. REDIS_WAIT_REPLICAS): one
    // line, exit 2.
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(lines(`reviews-bridge ${command}: `, err.message));
      process.exit(2);
    }
    throw err;
  }
}

/** How long a command waits for Redis to answer before it says so (ioredis would retry for about 15 s). */
const REDIS_ANSWER_MS = 4_000;

/**
 * Before a command waits on Redis: when Redis does not answer, one line naming Redis, why, the setting in use (not
 * the ones left unset) and what the connection said, and exit 1.
 */
async function redisAnswers(config: BridgeConfig, command: string): Promise<void> {
  const { redis } = redisFromConfig(config);
  const problem = await redisConnectionProblem(redis, REDIS_ANSWER_MS);
  closeRedisNow(redis);
  if (problem === null) return;
  const reason = failureReason(problem);
  const settings = settingsToCheck('redis', reason, redisAddressSettings(config.redis.target.kind));
  const said = problem instanceof Error ? problem.message.split('\n')[0]!.slice(0, 200) : '';
  process.stderr.write(
    `reviews-bridge ${command}: Redis ${reason}: check ${settings.join(', ')}${said ? ` (${said})` : ''}\n`,
  );
  process.exit(1);
}

// Each line of a message (a ConfigError has one per bad setting) with the command's prefix.
function lines(prefix: string, message: string): string {
  return message
    .split('\n')
    .map((line) => `${prefix}${line}\n`)
    .join('');
}
