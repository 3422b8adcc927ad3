import { readFileSync } from 'node:fs';
import { z } from 'zod';

// Configuration comes from the environment only (12-factor), validated once at start-up so that a bad
// setting stops the process with one message naming it instead of failing hours later mid-pass.

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** Zod schema of the raw environment: the single source of the settings, their defaults and their limits. */
export const EnvSchema = z.object({
  BRIDGE_ACCOUNT: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - only (it is part of Redis keys and metric labels)')
    .default('default'),
  UPSTREAM_BASE_URL: z.url({ protocol: /^https?$/ }),
  UPSTREAM_CLIENT_ID: optionalText,
  UPSTREAM_CLIENT_ID_FILE: optionalText,
  UPSTREAM_CLIENT_SECRET: optionalText,
  UPSTREAM_CLIENT_SECRET_FILE: optionalText,
  // 9.6/s with a bucket of 1.3 keeps every 1-second window at 10 requests or fewer (bucket < 11 - rate).
  UPSTREAM_RATE_LIMIT_RPS: z.coerce.number().positive().max(1000).default(9.6),
  UPSTREAM_RATE_LIMIT_BURST: z.coerce.number().min(1).max(1000).default(1.3),
  UPSTREAM_PAGE_SIZE: int(1, 100).default(100),
  UPSTREAM_CURSOR_PATH: optionalText,
  UPSTREAM_UPDATED_DATE_UNIT: z.enum(['ms', 's']).default('ms'),
  UPSTREAM_TIMEOUT_MS: int(100, 600_000).default(30_000),
  UPSTREAM_MAX_RETRIES: int(0, 100).default(6),
  UPSTREAM_MAX_BODY_BYTES: int(1024, 1024 * 1024 * 1024).default(10 * 1024 * 1024),
  UPSTREAM_TOKEN_REFRESH_MARGIN_S: int(0, 3600).default(60),
  KAFKA_BROKERS: z
    .string()
    .min(1)
    .transform((v) => v.split(',').map((b) => b.trim()))
    .refine((list) => list.every((b) => /^[^:\s]+:\d{1,5}$/.test(b)), 'a comma-separated list of host:port'),
  KAFKA_CLIENT_ID: z.string().min(1).default('reviews-bridge'),
  KAFKA_SSL: bool.default(false),
  KAFKA_SASL_MECHANISM: z.enum(['plain', 'scram-sha-256', 'scram-sha-512']).optional(),
  KAFKA_SASL_USERNAME: optionalText,
  KAFKA_SASL_PASSWORD: optionalText,
  KAFKA_SASL_PASSWORD_FILE: optionalText,
  KAFKA_TOPIC_CREATED: z.string().min(1).default('review.created'),
  KAFKA_TOPIC_STATUS_CHANGED: z.string().min(1).default('review.status_changed'),
  KAFKA_TOPIC_UPDATED: z.string().min(1).default('review.updated'),
  KAFKA_TOPIC_DEAD_LETTER: z.string().min(1).default('review.dead_letter'),
  KAFKA_CREATE_TOPICS: bool.default(true),
  KAFKA_TOPIC_PARTITIONS: int(1, 10_000).default(6),
  KAFKA_REPLICATION_FACTOR: int(1, 10).default(1),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'a redis:// or rediss:// URL'),
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,32}$/)
    .default('rb'),
  POLL_INTERVAL_MS: int(100, 3_600_000).default(5_000),
  POLL_OVERLAP_MS: int(0, 7 * 86_400_000).default(300_000),
  SWEEP_INTERVAL_MS: int(0, 30 * 86_400_000).default(86_400_000),
  INITIAL_LOAD_MODE: z.enum(['mark', 'suppress']).default('mark'),
  EVENT_SOURCE: optionalText,
  HTTP_HOST: z.string().min(1).default('0.0.0.0'),
  HTTP_PORT: int(0, 65_535).default(9464),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LEASE_TTL_MS: int(1_000, 600_000).default(15_000),
  SHUTDOWN_TIMEOUT_MS: int(1_000, 600_000).default(25_000),
});

/** Every environment variable the bridge reads (deployment manifests are tested against it). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.shape);

/** Where a secret comes from: the value itself or a file re-read on use (so rotation needs no restart). */
export type SecretSource = { value: string } | { file: string };

/** The validated configuration the bridge runs with. */
export interface BridgeConfig {
  account: string;
  upstream: {
    baseUrl: string;
    clientId: SecretSource;
    clientSecret: SecretSource;
    rateLimitRps: number;
    rateLimitBurst: number;
    pageSize: number;
    cursorPath: string | undefined;
    updatedDateUnit: 'ms' | 's';
    timeoutMs: number;
    maxRetries: number;
    maxBodyBytes: number;
    tokenRefreshMarginSeconds: number;
  };
  kafka: {
    brokers: string[];
    clientId: string;
    ssl: boolean;
    sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: SecretSource } | null;
    topics: { created: string; statusChanged: string; updated: string; deadLetter: string };
    createTopics: boolean;
    partitions: number;
    replicationFactor: number;
  };
  redis: { url: string; keyPrefix: string };
  poll: { intervalMs: number; overlapMs: number };
  sweep: { intervalMs: number };
  initialLoadMode: 'mark' | 'suppress';
  eventSource: string;
  http: { host: string; port: number };
  logLevel: string;
  lease: { ttlMs: number };
  shutdownTimeoutMs: number;
}

/** Thrown for an invalid or missing setting; the message names the variable and never echoes its value. */
export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    problem: string,
  ) {
    super(`invalid configuration: ${setting}: ${problem}`);
    this.name = 'ConfigError';
  }
}

function secret(env: Record<string, string | undefined>, name: string, required: boolean): SecretSource | null {
  const value = env[name]?.trim();
  const file = env[`${name}_FILE`]?.trim();
  if (value && file) throw new ConfigError(name, `set either ${name} or ${name}_FILE, not both`);
  if (file) {
    try {
      readFileSync(file, 'utf8');
    } catch {
      throw new ConfigError(`${name}_FILE`, 'file cannot be read');
    }
    return { file };
  }
  if (value) return { value };
  if (required) throw new ConfigError(name, `required (or ${name}_FILE)`);
  return null;
}

/** Parses and validates the environment; throws ConfigError naming the first bad setting. */
export function loadConfig(env: Record<string, string | undefined> = process.env): BridgeConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const setting = String(issue.path[0] ?? 'environment');
    const problem = env[setting] === undefined || env[setting] === '' ? 'required' : issue.message;
    throw new ConfigError(setting, problem);
  }
  const e = parsed.data;
  const clientId = secret(env, 'UPSTREAM_CLIENT_ID', true)!;
  const clientSecret = secret(env, 'UPSTREAM_CLIENT_SECRET', true)!;
  let sasl: BridgeConfig['kafka']['sasl'] = null;
  if (e.KAFKA_SASL_MECHANISM) {
    if (!e.KAFKA_SASL_USERNAME)
      throw new ConfigError('KAFKA_SASL_USERNAME', 'required when KAFKA_SASL_MECHANISM is set');
    const password = secret(env, 'KAFKA_SASL_PASSWORD', true)!;
    sasl = { mechanism: e.KAFKA_SASL_MECHANISM, username: e.KAFKA_SASL_USERNAME, password };
  }
  const topics = {
    created: e.KAFKA_TOPIC_CREATED,
    statusChanged: e.KAFKA_TOPIC_STATUS_CHANGED,
    updated: e.KAFKA_TOPIC_UPDATED,
    deadLetter: e.KAFKA_TOPIC_DEAD_LETTER,
  };
  if (new Set(Object.values(topics)).size !== 4) {
    throw new ConfigError('KAFKA_TOPIC_DEAD_LETTER', 'the four topic names must be distinct');
  }
  if (e.POLL_OVERLAP_MS < e.POLL_INTERVAL_MS) {
    // The overlap must cover at least one poll interval, or a change made while a poll pages could be skipped.
    throw new ConfigError('POLL_OVERLAP_MS', 'must be at least POLL_INTERVAL_MS');
  }
  return {
    account: e.BRIDGE_ACCOUNT,
    upstream: {
      baseUrl: e.UPSTREAM_BASE_URL.replace(/\/+$/, ''),
      clientId,
      clientSecret,
      rateLimitRps: e.UPSTREAM_RATE_LIMIT_RPS,
      rateLimitBurst: e.UPSTREAM_RATE_LIMIT_BURST,
      pageSize: e.UPSTREAM_PAGE_SIZE,
      cursorPath: e.UPSTREAM_CURSOR_PATH,
      updatedDateUnit: e.UPSTREAM_UPDATED_DATE_UNIT,
      timeoutMs: e.UPSTREAM_TIMEOUT_MS,
      maxRetries: e.UPSTREAM_MAX_RETRIES,
      maxBodyBytes: e.UPSTREAM_MAX_BODY_BYTES,
      tokenRefreshMarginSeconds: e.UPSTREAM_TOKEN_REFRESH_MARGIN_S,
    },
    kafka: {
      brokers: e.KAFKA_BROKERS,
      clientId: e.KAFKA_CLIENT_ID,
      ssl: e.KAFKA_SSL,
      sasl,
      topics,
      createTopics: e.KAFKA_CREATE_TOPICS,
      partitions: e.KAFKA_TOPIC_PARTITIONS,
      replicationFactor: e.KAFKA_REPLICATION_FACTOR,
    },
    redis: { url: e.REDIS_URL, keyPrefix: e.REDIS_KEY_PREFIX },
    poll: { intervalMs: e.POLL_INTERVAL_MS, overlapMs: e.POLL_OVERLAP_MS },
    sweep: { intervalMs: e.SWEEP_INTERVAL_MS },
    initialLoadMode: e.INITIAL_LOAD_MODE,
    eventSource: e.EVENT_SOURCE ?? `urn:reviews-bridge:${e.BRIDGE_ACCOUNT}`,
    http: { host: e.HTTP_HOST, port: e.HTTP_PORT },
    logLevel: e.LOG_LEVEL,
    lease: { ttlMs: e.LEASE_TTL_MS },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
  };
}

/** Reads a secret now: files are re-read on every call so a rotated credential is picked up without a restart. */
export function readSecret(source: SecretSource): string {
  return 'value' in source ? source.value : readFileSync(source.file, 'utf8').trim();
}
