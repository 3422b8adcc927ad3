import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { numberedAccounts, parseAccountsFile } from './accounts.js';
import { writeCredentialsDir } from './credentials-dir.js';
import { DEFAULT_OPTIONS, SimulatorConfigError } from './options.js';
import type { Faults, RateLimitOptions, SimulatorOptions } from './types.js';
import { startMultiSimulator } from './multi.js';
import { startSimulator } from './start.js';

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
  --listing-order <ascending|descending>  full listing by id, or newest first (default ascending)
  --updated-date-unit <ms|s>    --updated-date-comparison <gte|gt>
  --compression <when-asked|always|never>  --clock-skew-ms <n> (its clock minus the real one; default 0)
  --data-clock-offset-ms <n>    updated_date stamps minus its Date headers' clock (default 0)
  --error-rate <0..1> --error-statuses <500,502,...> --latency-ms <n>
  --truncate-rate <0..1> --malformed-rate <0..1> --pad-bytes <n> --drop-rate <0..1>
  --idless <id,id,...>  serve these reviews without their id field (records whose id cannot be read)
Several accounts on one server, each under <url>/accounts/<id> with its own data, credentials
(client-<id>/secret-<id>), rate limit, faults and /_control; the flags above apply to every account:
  --accounts <n>                acct-01..acct-<n>, account i seeded with --seed + i
  --accounts-file <path>        JSON [{ "id": "shop-a", "options": { "seed": 7, "reviewCount": 500 } }, ...]
  --credentials-dir <dir>       write <id>.client_id, <id>.client_secret and accounts.json there`;

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
  'listing-order',
  'updated-date-unit',
  'updated-date-comparison',
  'compression',
  'clock-skew-ms',
  'data-clock-offset-ms',
  'error-rate',
  'error-statuses',
  'latency-ms',
  'truncate-rate',
  'malformed-rate',
  'drop-rate',
  'idless',
  'pad-bytes',
  'accounts',
  'accounts-file',
  'credentials-dir',
] as const;

const CREDENTIAL_FLAGS = ['client-id', 'client-secret', 'scopeless-client-id', 'scopeless-client-secret'] as const;

/** What the multi-account flags ask for; null fields are not given. */
export interface MultiAccountArgs {
  /** --accounts: serve acct-01..acct-<n>. */
  count: number | null;
  /** --accounts-file: serve the accounts listed there. */
  file: string | null;
  /** --credentials-dir: write each account's credential files there. */
  credentialsDir: string | null;
}

/** A parsed command line: help, or options plus the multi-account request (null = the single-account simulator). */
export type SimulatorCommand = 'help' | { options: SimulatorOptions; multi: MultiAccountArgs | null };

type Flag = (typeof STRING_FLAGS)[number];

/** Simulator options from command-line arguments, or 'help'; throws SimulatorConfigError naming a bad flag. */
export function parseSimulatorArgs(argv: string[]): SimulatorOptions | 'help' {
  const command = parseSimulatorCommand(argv);
  return command === 'help' ? 'help' : command.options;
}

/** The whole command line, multi-account flags included; throws SimulatorConfigError naming a bad flag. */
export function parseSimulatorCommand(argv: string[]): SimulatorCommand {
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
    listingOrder: text('listing-order') as SimulatorOptions['listingOrder'],
    updatedDateUnit: text('updated-date-unit') as SimulatorOptions['updatedDateUnit'],
    updatedDateComparison: text('updated-date-comparison') as SimulatorOptions['updatedDateComparison'],
    compression: text('compression') as SimulatorOptions['compression'],
    clockSkewMs: num('clock-skew-ms'),
    dataClockOffsetMs: num('data-clock-offset-ms'),
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
  const idless = text('idless');
  if (idless !== undefined) faults.idless = idless.split(',').map((s) => Number(s.trim()));
  const statuses = text('error-statuses');
  if (statuses !== undefined) faults.errorStatuses = statuses.split(',').map((s) => Number(s.trim()));
  options.faults = Object.fromEntries(Object.entries(faults).filter(([, v]) => v !== undefined));
  return { options, multi: multiAccountArgs(text, num) };
}

function multiAccountArgs(
  text: (flag: Flag) => string | undefined,
  num: (flag: Flag) => number | undefined,
): MultiAccountArgs | null {
  const count = num('accounts') ?? null;
  const file = text('accounts-file') ?? null;
  const credentialsDir = text('credentials-dir') ?? null;
  if (count === null && file === null) {
    if (credentialsDir !== null)
      throw new SimulatorConfigError('--credentials-dir needs --accounts or --accounts-file');
    return null;
  }
  if (count !== null && file !== null) throw new SimulatorConfigError('give --accounts or --accounts-file, not both');
  // One credential for every account would defeat the point: each account's must differ.
  const shared = CREDENTIAL_FLAGS.find((flag) => text(flag) !== undefined);
  if (shared !== undefined) {
    throw new SimulatorConfigError(
      `--${shared} cannot be used with several accounts (each gets client-<id>/secret-<id>; set others in --accounts-file)`,
    );
  }
  return { count, file, credentialsDir };
}

/** Runs the simulator until SIGINT or SIGTERM, logging its URL and demo credentials. */
export async function runSimulatorCli(argv: string[]): Promise<void> {
  const parsed = parseSimulatorCommand(argv);
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const logger = pino({ name: 'reviews-simulator' });
  if (parsed.multi !== null) return runMulti(parsed.options, parsed.multi, logger);
  const { options } = parsed;
  const simulator = await startSimulator(options);
  logger.info(
    {
      url: simulator.url,
      reviews: simulator.control.reviewCount(),
      clientId: options.clientId ?? DEFAULT_OPTIONS.clientId,
      clientSecret: options.clientSecret ?? DEFAULT_OPTIONS.clientSecret,
      scopelessClientId: options.scopelessClientId ?? DEFAULT_OPTIONS.scopelessClientId,
      scopelessClientSecret: options.scopelessClientSecret ?? DEFAULT_OPTIONS.scopelessClientSecret,
    },
    'simulator listening',
  );
  const signal = await stopSignal();
  await simulator.close();
  logger.info({ signal, stats: simulator.control.stats() }, 'simulator stopped');
}

async function runMulti(options: SimulatorOptions, multi: MultiAccountArgs, logger: Logger): Promise<void> {
  const { host, port, ...common } = options;
  const specs =
    multi.file === null
      ? numberedAccounts(multi.count ?? 1, common)
      : parseAccountsFile(await readFile(multi.file, 'utf8'), common);
  const simulator = await startMultiSimulator(specs, { host, port });
  try {
    const files =
      multi.credentialsDir === null ? [] : await writeCredentialsDir(multi.credentialsDir, simulator.accounts.values());
    for (const account of simulator.accounts.values()) {
      const written = files.find((entry) => entry.id === account.id);
      // With a credentials directory the log points at the files; without one it shows the credential, as the
      // single-account simulator does.
      const credential =
        written === undefined
          ? { clientId: account.clientId, clientSecret: account.clientSecret }
          : { clientIdFile: written.clientIdFile, clientSecretFile: written.clientSecretFile };
      logger.info(
        { account: account.id, url: account.url, reviews: account.control.reviewCount(), ...credential },
        'simulator account',
      );
    }
  } catch (error) {
    await simulator.close();
    throw error;
  }
  logger.info(
    {
      url: simulator.url,
      accounts: simulator.accounts.size,
      ...(multi.credentialsDir === null ? {} : { credentialsDir: resolve(multi.credentialsDir) }),
    },
    'simulator listening',
  );
  const signal = await stopSignal();
  await simulator.close();
  const stats = Object.fromEntries([...simulator.accounts].map(([id, account]) => [id, account.control.stats()]));
  logger.info({ signal, stats }, 'simulator stopped');
}

async function stopSignal(): Promise<string> {
  const stop = new AbortController();
  const signal = await Promise.race([
    once(process, 'SIGINT', { signal: stop.signal }).then(() => 'SIGINT'),
    once(process, 'SIGTERM', { signal: stop.signal }).then(() => 'SIGTERM'),
  ]);
  stop.abort();
  return signal;
}
