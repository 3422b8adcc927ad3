import { DEFAULT_BACKOFF, type BackoffPolicy } from './retry.js';
import type { CredentialsProvider } from './credentials.js';
import { DEFAULT_TIMEOUTS, type HttpTimeouts } from './http.js';
import type { RateLimiterOptions } from './rate-limiter.js';
import { DEFAULT_RECORD_LIMITS, type RecordLimits } from './bounds.js';

// The upstream client's settings: what can be configured, the defaults, and the check that refuses a wrong value
// at construction (the client is also built by tests and tools that bypass the zod configuration).

/** Configuration of the upstream client; only baseUrl and credentials are required. */
export interface UpstreamClientConfig {
  /** Base address, e.g. https://api.example.com (a path prefix is kept). */
  baseUrl: string;
  /** Called on every token fetch, so rotated secrets are picked up without a restart. */
  credentials: CredentialsProvider;
  /** Target request rate for all requests together. Default 9.6 (the upstream allows 10). */
  rateLimitRps?: number;
  /**
   * Bucket capacity in requests (>= 1). Default 1.3: the chain of cursors is sequential, so a slow answer would
   * otherwise cost its lost time forever; 0.3 of a slot lets the next request make up for it, while any 1-second
   * window still holds at most 10 requests at 9.6/s (that holds for burst < 11 - rateLimitRps).
   */
  rateLimitBurst?: number;
  /** Adaptive tuning of the limiter (decrease factor, recovery speed, floor). */
  limiter?: Pick<
    RateLimiterOptions,
    'decreaseFactor' | 'minRps' | 'recoveryDoublingSeconds' | 'increasePerSecond' | 'decreaseCooldownMs'
  >;
  /** The wall clock (ms since the epoch) of the client's dates and the upstream time estimate; default Date.now. */
  now?: () => number;
  /** `limit` per listing call, 1..100. Default 100. */
  pageSize?: number;
  /** Dotted path of the next-page cursor in the envelope; detected among common shapes when absent. */
  cursorPath?: string | null;
  /** Unit the upstream expects for `updated_date`. Default 'ms'. */
  updatedDateUnit?: 'ms' | 's';
  timeouts?: Partial<HttpTimeouts>;
  /** Retries per request after the first attempt. Default 6. */
  maxRetries?: number;
  backoff?: Partial<BackoffPolicy>;
  /** Longest Retry-After honoured, seconds. Default 120. */
  maxRetryAfterSeconds?: number;
  /** Cap of a decoded response body. Default 10 MiB. */
  maxBodyBytes?: number;
  /** PEM CA bundle trusted for the upstream's certificate besides the system CAs. */
  ca?: Buffer;
  /** Refresh the token this long before it expires (at most half its lifetime). Default 60. */
  tokenRefreshMarginSeconds?: number;
  /** Send Accept-Encoding: gzip, deflate, br. Default true (responses are decoded either way). */
  requestCompression?: boolean;
  /** Keep-alive connections. Default 4. */
  connections?: number;
  /** Fetch the next page while the caller processes the current one. Default true. */
  prefetch?: boolean;
  /** Bounds a record must keep to be accepted (size, string length, depth, date skew); see bounds.ts. */
  recordLimits?: Partial<RecordLimits>;
}

/** Defaults of the optional settings. */
export const UPSTREAM_DEFAULTS = {
  rateLimitRps: 9.6,
  rateLimitBurst: 1.3,
  pageSize: 100,
  updatedDateUnit: 'ms',
  maxRetries: 6,
  maxRetryAfterSeconds: 120,
  maxBodyBytes: 10 * 1024 * 1024,
  tokenRefreshMarginSeconds: 60,
  requestCompression: true,
  connections: 4,
  prefetch: true,
} as const;

function invalid(setting: string, problem: string): never {
  throw new RangeError(`invalid upstream client setting ${setting}: ${problem}`);
}

/** Throws a RangeError naming the first setting that is out of range. */
export function checkConfig(config: UpstreamClientConfig): void {
  let url: URL;
  try {
    url = new URL(config.baseUrl);
  } catch {
    invalid('baseUrl', 'not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') invalid('baseUrl', 'must be http or https');
  if (typeof config.credentials !== 'function') invalid('credentials', 'must be a provider function');
  const positive = (name: string, v: number | undefined): void => {
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) invalid(name, 'must be a positive number');
  };
  positive('rateLimitRps', config.rateLimitRps);
  if (config.rateLimitBurst !== undefined && !(config.rateLimitBurst >= 1 && Number.isFinite(config.rateLimitBurst))) {
    invalid('rateLimitBurst', 'must be a number >= 1');
  }
  const p = config.pageSize;
  if (p !== undefined && !(Number.isInteger(p) && p >= 1 && p <= 100)) invalid('pageSize', 'an integer 1..100');
  const r = config.maxRetries;
  if (r !== undefined && !(Number.isInteger(r) && r >= 0)) invalid('maxRetries', 'a non-negative integer');
  const b = config.maxBodyBytes;
  if (b !== undefined && !(Number.isInteger(b) && b >= 1024)) invalid('maxBodyBytes', 'an integer >= 1024');
  const m = config.tokenRefreshMarginSeconds;
  if (m !== undefined && !(Number.isFinite(m) && m >= 0)) invalid('tokenRefreshMarginSeconds', 'a number >= 0');
  const u = config.updatedDateUnit;
  if (u !== undefined && u !== 'ms' && u !== 's') invalid('updatedDateUnit', "'ms' or 's'");
  const limits = config.recordLimits ?? {};
  for (const key of ['maxRecordBytes', 'maxStringLength', 'maxDepth', 'maxFutureSkewMs'] as const) {
    const v = limits[key];
    const min = key === 'maxFutureSkewMs' ? 0 : 1;
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= min))
      invalid(`recordLimits.${key}`, `an integer >= ${min}`);
  }
}

/** Every setting with its default applied: what the client's parts are built from. */
export interface ResolvedSettings {
  settings: ReturnType<typeof withDefaults>;
  backoff: BackoffPolicy;
  timeouts: HttpTimeouts;
  recordLimits: RecordLimits;
}

/** Checks `config` and fills in every default. */
export function resolveSettings(config: UpstreamClientConfig): ResolvedSettings {
  checkConfig(config);
  return {
    settings: withDefaults(config),
    backoff: { ...DEFAULT_BACKOFF, ...stripUndefined(config.backoff ?? {}) },
    timeouts: { ...DEFAULT_TIMEOUTS, ...stripUndefined(config.timeouts ?? {}) },
    recordLimits: { ...DEFAULT_RECORD_LIMITS, ...stripUndefined(config.recordLimits ?? {}) },
  };
}

function withDefaults(config: UpstreamClientConfig) {
  return { ...UPSTREAM_DEFAULTS, ...stripUndefined(config) };
}

function stripUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}
