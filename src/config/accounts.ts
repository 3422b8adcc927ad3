import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ACCOUNT_ID, ConfigError, EnvSchema, loadConfig, type BridgeConfig } from './config.js';
import type { ConfigProblem } from '../core/errors.js';

// Several accounts in one deployment: BRIDGE_ACCOUNTS_FILE lists them, each with its upstream, its credential files
// and overrides of the per-account settings. Every account's configuration is the environment with its overrides
// applied, validated by the same loadConfig as a single account, so one rule set holds for both and an error names
// the account and the setting. Process-wide settings (Kafka, Redis, HTTP, logging) cannot differ per account: one
// process has one of each.

/** Settings an account may override (by their environment names); every other setting is process-wide. */
export const PER_ACCOUNT_SETTINGS: readonly string[] = Object.keys(EnvSchema.shape).filter(
  (name) =>
    /^(UPSTREAM_|POLL_|SWEEP_|DELETE_|EVENT_|INITIAL_LOAD_|HEARTBEAT_|LEASE_)/.test(name) &&
    // An account's upstream and credentials come from its own entry, proxies are the process's.
    !/^UPSTREAM_(BASE_URL|CLIENT_ID|CLIENT_SECRET)/.test(name),
);

const scalar = z.union([z.string(), z.number(), z.boolean()]).transform(String);

/** One account of the accounts file. */
export const AccountEntrySchema = z.strictObject({
  id: z.string().regex(ACCOUNT_ID, 'letters, digits, _ . - only, at most 64'),
  upstream: z.strictObject({
    /** Default: UPSTREAM_BASE_URL of the environment (accounts of one platform share it). */
    baseUrl: z.string().optional(),
    /** The client id is no secret, so it may be inline; the secret only ever comes from a file. */
    clientId: z.string().min(1).optional(),
    clientIdFile: z.string().min(1).optional(),
    clientSecretFile: z.string().min(1),
  }),
  settings: z.record(z.string(), scalar).optional(),
});

/** The accounts file: `accounts:` followed by the list. */
export const AccountsFileSchema = z.strictObject({
  accounts: z.array(AccountEntrySchema).min(1).max(10_000),
});

/** One account's entry as read from the file. */
export type AccountEntry = z.infer<typeof AccountEntrySchema>;

/** What the process runs: one account (the environment alone) or the accounts of the file. */
export interface AccountsConfig {
  /** Each account's full configuration, in the file's order. */
  accounts: BridgeConfig[];
  /** Where they came from (null: the single-account environment). */
  file: string | null;
}

/** Reads BRIDGE_ACCOUNTS_FILE when set, else the single-account environment; throws ConfigError naming the setting. */
export function loadAccounts(env: Record<string, string | undefined> = process.env): AccountsConfig {
  const file = env.BRIDGE_ACCOUNTS_FILE?.trim();
  if (!file) return { accounts: [loadConfig(env)], file: null };
  if (env.BRIDGE_ACCOUNT?.trim()) {
    throw new ConfigError('BRIDGE_ACCOUNT', 'set either BRIDGE_ACCOUNT or BRIDGE_ACCOUNTS_FILE, not both');
  }
  const entries = readAccountsFile(file);
  const ids = new Set<string>();
  const shared = sharesTopics(env);
  // Every account is checked, and every problem reported once (a bad process-wide setting is every account's).
  const problems: ConfigProblem[] = [];
  const accounts: BridgeConfig[] = [];
  entries.forEach((entry, index) => {
    const where = `accounts[${index}] (${entry.id})`;
    if (ids.has(entry.id)) {
      problems.push({ setting: 'BRIDGE_ACCOUNTS_FILE', problem: `${where}: the id appears twice` });
      return;
    }
    ids.add(entry.id);
    try {
      const config = accountConfig(env, entry, where);
      // Accounts that share a topic must not share keys: the state topic is compacted by key, and two accounts
      // may both have a review 42. Per-account topics keep the plain review id.
      const several = entries.length > 1;
      const kafka = { ...config.kafka, ...(shared && several ? { keyPrefix: `${entry.id}:` } : {}) };
      // The changelog is shared by the accounts unless its name carries {account} (its default does not): its keys
      // then always name the account, whatever the event topics do.
      if (several && !(env.KAFKA_TOPIC_CHANGELOG ?? '').includes('{account}')) {
        kafka.changelogKeyPrefix = `${entry.id}:`;
      }
      accounts.push({ ...config, kafka });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
    }
  });
  if (problems.length > 0) {
    const lines = new Set<string>();
    throw new ConfigError(
      problems.filter((p) => !lines.has(`${p.setting}: ${p.problem}`) && lines.add(`${p.setting}: ${p.problem}`)),
    );
  }
  return { accounts, file };
}

function readAccountsFile(file: string): AccountEntry[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError('BRIDGE_ACCOUNTS_FILE', 'file cannot be read');
  }
  let raw: unknown;
  try {
    // YAML is a superset of JSON, so one parser reads both.
    raw = parseYaml(text, { maxAliasCount: 100 });
  } catch {
    throw new ConfigError('BRIDGE_ACCOUNTS_FILE', 'not valid YAML or JSON');
  }
  const parsed = AccountsFileSchema.safeParse(raw);
  if (!parsed.success) {
    // The path and the problem only, never the value (it could be a misplaced secret).
    throw new ConfigError(
      parsed.error.issues.map((issue) => ({
        setting: 'BRIDGE_ACCOUNTS_FILE',
        problem: `${issue.path.join('.') || '(root)'}: ${issue.message}`,
      })),
    );
  }
  return parsed.data.accounts;
}

function accountConfig(env: Record<string, string | undefined>, entry: AccountEntry, where: string): BridgeConfig {
  const overrides = entry.settings ?? {};
  const problems: ConfigProblem[] = [];
  const fileProblem = (problem: string) =>
    problems.push({ setting: 'BRIDGE_ACCOUNTS_FILE', problem: `${where}${problem}` });
  for (const name of Object.keys(overrides)) {
    if (!PER_ACCOUNT_SETTINGS.includes(name)) {
      const known = name in EnvSchema.shape || /^UPSTREAM_CLIENT_(ID|SECRET)/.test(name);
      fileProblem(
        `.settings.${name}: ${known ? 'not a per-account setting (set it in the environment, or in the upstream entry)' : 'unknown setting'}`,
      );
    }
  }
  const { upstream } = entry;
  if (upstream.clientId && upstream.clientIdFile)
    fileProblem('.upstream: set either clientId or clientIdFile, not both');
  if (!upstream.clientId && !upstream.clientIdFile) fileProblem('.upstream.clientIdFile: required (or clientId)');
  const merged: Record<string, string | undefined> = {
    ...env,
    ...overrides,
    BRIDGE_ACCOUNTS_FILE: undefined,
    BRIDGE_ACCOUNT: entry.id,
    UPSTREAM_BASE_URL: upstream.baseUrl ?? env.UPSTREAM_BASE_URL,
    UPSTREAM_CLIENT_ID: upstream.clientId,
    UPSTREAM_CLIENT_ID_FILE: upstream.clientIdFile,
    UPSTREAM_CLIENT_SECRET: undefined,
    UPSTREAM_CLIENT_SECRET_FILE: upstream.clientSecretFile,
  };
  let config: BridgeConfig | null = null;
  try {
    config = loadConfig(merged, { multiAccount: true });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    for (const { setting, problem } of err.problems) {
      const fromUpstream = setting.startsWith('UPSTREAM_CLIENT_') || setting === 'UPSTREAM_BASE_URL';
      // A setting of the environment itself (KAFKA_BROKERS missing) is reported as such, not as the account's.
      if (!fromUpstream && !(setting in overrides)) problems.push({ setting, problem });
      // The client id is checked above, where the file's own field names say what is missing.
      else if (setting === 'UPSTREAM_CLIENT_ID' && !upstream.clientId && !upstream.clientIdFile) continue;
      else fileProblem(`.${fromUpstream ? `upstream.${upstreamField(setting)}` : `settings.${setting}`}: ${problem}`);
    }
  }
  if (problems.length > 0 || config === null) throw new ConfigError(problems);
  return config;
}

function upstreamField(setting: string): string {
  const fields: Record<string, string> = {
    UPSTREAM_BASE_URL: 'baseUrl',
    UPSTREAM_CLIENT_ID: 'clientId',
    UPSTREAM_CLIENT_ID_FILE: 'clientIdFile',
    UPSTREAM_CLIENT_SECRET: 'clientSecretFile',
    UPSTREAM_CLIENT_SECRET_FILE: 'clientSecretFile',
  };
  return fields[setting] ?? setting;
}

/** Whether a review-keyed topic name lacks {account}, i.e. accounts would write the same keys to one topic. */
function sharesTopics(env: Record<string, string | undefined>): boolean {
  // The heartbeat topic is keyed by the account already.
  const keyed = ['CREATED', 'STATUS_CHANGED', 'UPDATED', 'DEAD_LETTER', 'STATE', 'DELETED'];
  return keyed.some((name) => !(env[`KAFKA_TOPIC_${name}`] ?? '').includes('{account}'));
}
