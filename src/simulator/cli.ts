import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { DEFAULT_OPTIONS, SimulatorConfigError } from './options.js';
import type { Faults, RateLimitOptions, SimulatorOptions } from './types.js';

// `reviews-bridge simulate`: runs the simulator as its own process for demos and for tests that run the bridge as
// a child process. It prints its demo credentials on purpose: they only open a simulator.

const USAGE = `Usage: reviews-bridge simulate [options]
  --host <addr>                 interface (default 127.0.0.1)
  --port <n>                    port (default 0 = random)
  --reviews <n>                 initial reviews (default 1000)
  --seed <n>                    data seed (default 1)
  --client-id/--client-secret   credential (default demo-client/demo-secret)
  --scopeless-client-id/--scopeless-client-secret  credential whose tokens get 403
  --token-ttl <s>               expires_in (default 3600)
  --rps <n|off>                 rate limit (default 10)   --burst <n>
  --throttle-status <503|429>   --retry-after <s|none>
  --payload-limit <bytes>       (default 10485760)
  --cursor-path <path>          (default next_page)       --last-page-cursor <absent|null>
  --updated-date-unit <ms|s>    --updated-date-comparison <gte|gt>
  --compression <when-asked|always|never>
  --error-rate <0..1> --error-statuses <500,502,...> --latency-ms <n>
  --truncate-rate <0..1> --malformed-rate <0..1> --pad-bytes <n> --drop-rate <0..1>`;

const STRING_FLAGS = [
  'host',
  'port',
  'reviews',
  'seed',
  'client-id',
  'client-secret',
  'scopeless-client-id',
  'scopeless-client-secret',
  'token-ttl',
  'rps',
  'burst',
  'throttle-status',
  'retry-after',
  'payload-limit',
  'cursor-path',
  'last-page-cursor',
  'updated-date-unit',
  'updated-date-comparison',
  'compression',
  'error-rate',
  'error-statuses',
  'latency-ms',
  'truncate-rate',
  'malformed-rate',
  'drop-rate',
  'pad-bytes',
] as const;

type Flag = (typeof STRING_FLAGS)[number];

/** Simulator options from command-line arguments, or 'help'; throws SimulatorConfigError naming a bad flag. */
export function parseSimulatorArgs(argv: string[]): SimulatorOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      help: { type: 'boolean', short: 'h' },
      ...Object.fromEntries(STRING_FLAGS.map((flag) => [flag, { type: 'string' as const }])),
    },
  });
  if (values.help === true) return 'help';
  const flags = values as Record<string, string | boolean | undefined>;
  const text = (flag: Flag): string | undefined => flags[flag] as string | undefined;
  const num = (flag: Flag): number | undefined => {
    const raw = text(flag);
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(value))
      throw new SimulatorConfigError(`--${flag} must be a number, got ${raw}`);
    return value;
  };

  const options: SimulatorOptions = {
    host: text('host'),
    port: num('port'),
    reviewCount: num('reviews'),
    seed: num('seed'),
    clientId: text('client-id'),
    clientSecret: text('client-secret'),
    scopelessClientId: text('scopeless-client-id'),
    scopelessClientSecret: text('scopeless-client-secret'),
    tokenTtlSeconds: num('token-ttl'),
    payloadLimitBytes: num('payload-limit'),
    cursorPath: text('cursor-path'),
    lastPageCursor: text('last-page-cursor') as SimulatorOptions['lastPageCursor'],
    updatedDateUnit: text('updated-date-unit') as SimulatorOptions['updatedDateUnit'],
    updatedDateComparison: text('updated-date-comparison') as SimulatorOptions['updatedDateComparison'],
    compression: text('compression') as SimulatorOptions['compression'],
  };

  const rateFlags = ['rps', 'burst', 'throttle-status', 'retry-after'] as const;
  if (text('rps') === 'off') {
    options.rateLimit = null;
  } else if (rateFlags.some((flag) => text(flag) !== undefined)) {
    const defaults = DEFAULT_OPTIONS.rateLimit as RateLimitOptions;
    const retryAfter = text('retry-after');
    options.rateLimit = {
      rps: num('rps') ?? defaults.rps,
      burst: num('burst'),
      status: (num('throttle-status') ?? defaults.status) as 503 | 429,
      retryAfterSeconds: retryAfter === 'none' ? null : num('retry-after'),
    };
  }

  const faults: Partial<Faults> = {
    errorRate: num('error-rate'),
    latencyMs: num('latency-ms'),
    truncateRate: num('truncate-rate'),
    malformedRate: num('malformed-rate'),
    padBytes: num('pad-bytes'),
    dropRate: num('drop-rate'),
  };
  const statuses = text('error-statuses');
  if (statuses !== undefined) faults.errorStatuses = statuses.split(',').map((s) => Number(s.trim()));
  options.faults = Object.fromEntries(Object.entries(faults).filter(([, v]) => v !== undefined));
  return options;
}

/** Runs the simulator until SIGINT or SIGTERM, logging its URL and demo credentials. */
export async function runSimulatorCli(argv: string[]): Promise<void> {
  const parsed = parseSimulatorArgs(argv);
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // Imported here so that `index.ts` can re-export this function without a cycle at load time.
  const { startSimulator } = await import('./index.js');
  const logger = pino({ name: 'reviews-simulator' });
  const simulator = await startSimulator(parsed);
  logger.info(
    {
      url: simulator.url,
      reviews: simulator.control.reviewCount(),
      clientId: parsed.clientId ?? DEFAULT_OPTIONS.clientId,
      clientSecret: parsed.clientSecret ?? DEFAULT_OPTIONS.clientSecret,
      scopelessClientId: parsed.scopelessClientId ?? DEFAULT_OPTIONS.scopelessClientId,
      scopelessClientSecret: parsed.scopelessClientSecret ?? DEFAULT_OPTIONS.scopelessClientSecret,
    },
    'simulator listening',
  );

  const stop = new AbortController();
  const signal = await Promise.race([
    once(process, 'SIGINT', { signal: stop.signal }).then(() => 'SIGINT'),
    once(process, 'SIGTERM', { signal: stop.signal }).then(() => 'SIGTERM'),
  ]);
  stop.abort();
  await simulator.close();
  logger.info({ signal, stats: simulator.control.stats() }, 'simulator stopped');
}
