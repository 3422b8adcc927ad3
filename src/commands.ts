import { pollerFromConfig, redisFromConfig, startApp, upstreamFromConfig } from './app.js';
import { ConfigError, loadConfig, type BridgeConfig } from './config.js';
import { Lease, leaseHolder } from './lease.js';
import { createLogger } from './logger.js';
import { BridgeMetrics } from './metrics.js';
import { KafkaPublisher } from './publisher.js';

// The commands: `run` (the service), `sweep` (one full pass now), `status`, `simulate` (the upstream stand-in).
// src/cli.ts is the process entry that calls main().

const USAGE = `usage: reviews-bridge <command>

  run        the long-running bridge (configuration from the environment; see README)
  sweep      one reconciliation sweep now: asks the running leader, or runs it here when no replica leads
  status     watermark, sweep cursor, snapshot size, lease holder, last passes (JSON)
  simulate   the bundled upstream simulator (simulate --help)
`;

async function run(config: BridgeConfig): Promise<void> {
  const logger = createLogger(config.logLevel, { account: config.account });
  const app = await startApp(config, logger);
  logger.info({ ops: app.ops.url, upstream: config.upstream.baseUrl, brokers: config.kafka.brokers }, 'bridge started');
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

async function sweep(config: BridgeConfig): Promise<void> {
  const logger = createLogger(config.logLevel, { account: config.account, command: 'sweep' });
  const { redis, store, keys } = redisFromConfig(config);
  try {
    if (await leaseHolder(redis, keys)) {
      await store.requestSweep();
      console.log(JSON.stringify({ requested: true, note: 'the leading replica starts the sweep at its next tick' }));
      return;
    }
    const lease = new Lease(redis, keys, config.lease.ttlMs);
    const epoch = await lease.renew();
    if (epoch === 0) {
      await store.requestSweep();
      console.log(JSON.stringify({ requested: true }));
      return;
    }
    const renew = setInterval(() => void lease.renew().catch(() => undefined), config.lease.ttlMs / 3);
    const metrics = new BridgeMetrics({ account: config.account });
    const publisher = new KafkaPublisher(config.kafka, config.account, logger);
    const source = upstreamFromConfig(config, metrics, logger);
    try {
      await publisher.connect();
      const poller = pollerFromConfig(config, { source, store, sink: publisher, metrics, logger });
      const run = await poller.openSweep(epoch, new AbortController().signal);
      while (await run.step()) {
        /* one page at a time */
      }
      console.log(JSON.stringify({ completed: true, kind: run.kind, ...run.summary }));
    } finally {
      clearInterval(renew);
      await Promise.allSettled([publisher.disconnect(), source.close()]);
      await lease.release();
    }
  } finally {
    await redis.quit();
  }
}

async function status(config: BridgeConfig): Promise<void> {
  const { redis, store, keys } = redisFromConfig(config);
  try {
    const [checkpoint, size, lease, sweepRequested] = await Promise.all([
      store.checkpoint(),
      store.size(),
      leaseHolder(redis, keys),
      redis.exists(keys.sweepRequest),
    ]);
    const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
    console.log(
      JSON.stringify(
        {
          account: config.account,
          snapshotReviews: size,
          watermark: iso(checkpoint.watermark),
          initialLoadDone: checkpoint.initialDone,
          sweepInProgress: checkpoint.sweep && { ...checkpoint.sweep, startedAt: iso(checkpoint.sweep.startedAt) },
          sweepRequested: sweepRequested === 1,
          lastSweepAt: iso(checkpoint.lastSweepAt),
          lastIncrementalAt: iso(checkpoint.lastIncrementalAt),
          lease,
        },
        null,
        2,
      ),
    );
  } finally {
    await redis.quit();
  }
}

/** Entry point of the `reviews-bridge` command. */
export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'simulate') {
    const { runSimulatorCli } = await import('./simulator/index.js');
    await runSimulatorCli(rest);
    return;
  }
  if (!command || command === '--help' || command === 'help' || !['run', 'sweep', 'status'].includes(command)) {
    process.stderr.write(USAGE);
    process.exitCode = command && !['--help', 'help'].includes(command) ? 2 : 0;
    return;
  }
  let config: BridgeConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`reviews-bridge: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (command === 'run') await run(config);
  else if (command === 'sweep') await sweep(config);
  else await status(config);
}
