import { pino, type Logger } from 'pino';
import type { ListOptions, Page, PassKind, ReviewSource, UpstreamHooks } from './types.js';
import { UpstreamError, excerpt, type Endpoint } from './errors.js';
import { CredentialsError, type ClientCredentials, type CredentialsProvider } from './credentials.js';
import { DEFAULT_TIMEOUTS, HttpTransport, type HttpRequest, type HttpResponse, type HttpTimeouts } from './http.js';
import { RateLimiter, type RateLimiterOptions, type RateLimiterState } from './rate-limiter.js';
import { DEFAULT_BACKOFF, backoffDelay, parseRetryAfter, sleep, type BackoffPolicy } from './retry.js';
import { TokenManager, parseTokenResponse, type GrantedToken } from './tokens.js';
import { CursorFormatError, createCursorLocator } from './cursor.js';
import { listingRecords, validateRecords } from './validate.js';
import { LARGE_OFFSET_MS, UpstreamClock } from './upstream-clock.js';
import { DEFAULT_RECORD_LIMITS, type RecordLimits } from './bounds.js';
import { paginate, type FetchedPage } from './pager.js';
import { linkSignals } from './signals.js';

// Composition of the upstream client: every request takes a slot from the shared limiter, carries a cached
// token, and goes through one retry loop that knows which answers deserve another attempt. The pager and the
// record validation sit on top. Nothing here keeps a timer running while the bridge is idle.

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

/** The review source plus what operations need to look at the limiter. */
export interface UpstreamClient extends ReviewSource {
  /** Limiter snapshot (configured and current rate, queue) for gauges and tests. */
  limiterState(): RateLimiterState;
}

function invalid(setting: string, problem: string): never {
  throw new RangeError(`invalid upstream client setting ${setting}: ${problem}`);
}

function checkConfig(config: UpstreamClientConfig): void {
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

/** Creates the upstream client (the bridge's ReviewSource). */
export function createUpstreamClient(
  config: UpstreamClientConfig,
  hooks: UpstreamHooks = {},
  logger: Logger = pino({ level: 'silent' }),
): UpstreamClient {
  checkConfig(config);
  const log = logger.child({ module: 'upstream' });
  const settings = { ...UPSTREAM_DEFAULTS, ...stripUndefined(config) };
  const backoff: BackoffPolicy = { ...DEFAULT_BACKOFF, ...stripUndefined(config.backoff ?? {}) };
  const timeouts: HttpTimeouts = { ...DEFAULT_TIMEOUTS, ...stripUndefined(config.timeouts ?? {}) };
  const http = new HttpTransport(config.baseUrl, {
    timeouts,
    maxBodyBytes: settings.maxBodyBytes,
    connections: settings.connections,
    requestCompression: settings.requestCompression,
    ...(config.ca ? { ca: config.ca } : {}),
  });
  const limiter = new RateLimiter({ ...config.limiter, rps: settings.rateLimitRps, burst: settings.rateLimitBurst });
  let largeOffset = false;
  const clock = new UpstreamClock((offsetMs) => {
    hooks.onClockOffset?.(offsetMs / 1000);
    const large = Math.abs(offsetMs) > LARGE_OFFSET_MS;
    if (large !== largeOffset) {
      largeOffset = large;
      const seconds = Math.round(offsetMs / 1000);
      if (large) log.warn({ offsetSeconds: seconds }, "the upstream's clock differs from ours by over a minute");
      else log.info({ offsetSeconds: seconds }, "the upstream's clock is within a minute of ours again");
    }
  });
  const recordLimits: RecordLimits = { ...DEFAULT_RECORD_LIMITS, ...stripUndefined(config.recordLimits ?? {}) };
  const closing = new AbortController();
  let lastSecret: string | null = null;
  const sensitive = (): (string | null)[] => [tokens.current(), lastSecret];

  /** One attempt's failure as an UpstreamError, from a non-2xx answer. */
  function statusError(endpoint: Endpoint, res: SentResponse, sent: string): UpstreamError {
    const status = res.status;
    const what = endpoint === 'token' ? 'token endpoint' : 'review listing';
    // `sent` is the credential this request carried (a bearer token, or the Basic pair), should the body echo it.
    const detail = res.body.length > 0 ? `: ${excerpt(res.body.toString('utf8'), [...sensitive(), sent])}` : '';
    const base = { endpoint, status, reason: `status_${status}` };
    if (status === 503 || status === 429) {
      const retryAfter = parseRetryAfter(res.headers['retry-after'], Date.now(), settings.maxRetryAfterSeconds);
      limiter.throttled(retryAfter, res.sentAt);
      hooks.onThrottled?.(status, retryAfter);
      const after = retryAfter === null ? '' : `, Retry-After ${retryAfter}s`;
      return new UpstreamError('throttled', `${what} throttled us (${status}${after})`, base);
    }
    if (status === 401) {
      return new UpstreamError(
        'auth',
        endpoint === 'token'
          ? `token endpoint refused the client credentials (401): check the client id and secret${detail}`
          : `review listing refused the bearer token (401) even after a fresh token was fetched${detail}`,
        base,
      );
    }
    if (status === 202) {
      // Accepted, not ready: ask again later (after Retry-After when given, bounded like throttling).
      const retryAfter = parseRetryAfter(res.headers['retry-after'], Date.now(), settings.maxRetryAfterSeconds);
      const after = retryAfter === null ? '' : `, Retry-After ${retryAfter}s`;
      return new UpstreamError('not_ready', `${what} answered 202 (accepted, not ready yet${after})`, {
        ...base,
        retryAfterSeconds: retryAfter,
      });
    }
    if (status === 402) {
      return new UpstreamError(
        'account',
        `${what} answered 402 (2FA token required): the upstream account demands a second factor, which a service cannot give; ask the account owner to exempt this API client${detail}`,
        base,
      );
    }
    if (status === 404) {
      return new UpstreamError(
        'config',
        `${what} answered 404 (not found): check UPSTREAM_BASE_URL (the bridge calls <base>${endpoint === 'token' ? '/oauth2/token' : '/v1/reviews'})${detail}`,
        base,
      );
    }
    if (status === 400 && endpoint === 'reviews' && PAYLOAD_WORDS.test(res.body.toString('utf8'))) {
      return new UpstreamError('client', `${what} answered 400 for the page's size${detail}`, {
        ...base,
        reason: 'payload_too_large',
      });
    }
    if (status === 403) {
      return new UpstreamError(
        'scope',
        `${what} answered 403 (invalid scope): the client lacks the scope to list reviews${detail}`,
        base,
      );
    }
    if (status >= 500) return new UpstreamError('server', `${what} answered ${status}${detail}`, base);
    if (status === 408) return new UpstreamError('network', `${what} answered 408 (request timeout)`, base);
    if (status >= 300 && status < 400) {
      return new UpstreamError(
        'client',
        `${what} answered a redirect (${status}), which is not followed: check baseUrl`,
        base,
      );
    }
    return new UpstreamError('client', `${what} answered ${status}${detail}`, base);
  }

  /** Sends a request once (limiter slot, hooks), returning the response whatever its status. */
  async function sendOnce(req: HttpRequest, kind: PassKind): Promise<SentResponse> {
    const waited = await limiter.acquire(kind, req.signal);
    hooks.onLimiterWait?.(kind, waited / 1000);
    const sentAt = limiter.now();
    const sentAtWall = Date.now();
    const started = performance.now();
    try {
      const res = await http.request(req);
      hooks.onRequest?.(req.endpoint, res.status, (performance.now() - started) / 1000);
      clock.sample(res.headers.date, sentAtWall, Date.now());
      return { ...res, sentAt, sentAtWall };
    } catch (err) {
      if (err instanceof UpstreamError) hooks.onRequest?.(req.endpoint, 0, (performance.now() - started) / 1000);
      throw err;
    }
  }

  /**
   * Runs `attempt` until it succeeds, a non-retryable error occurs or the retries are spent. A 401 of the
   * listing gets exactly one immediate retry with a fresh token, outside the retry budget.
   */
  async function withRetries<T>(
    endpoint: Endpoint,
    describe: string,
    signal: AbortSignal,
    attempt: () => Promise<T>,
    onUnauthorized?: () => void,
  ): Promise<T> {
    let retries = 0;
    let attempts = 0;
    let reauthorized = false;
    for (;;) {
      attempts += 1;
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        const unauthorized = err.kind === 'auth' && err.status === 401 && err.endpoint === endpoint && !err.final;
        if (unauthorized && onUnauthorized && !reauthorized) {
          reauthorized = true;
          onUnauthorized();
          hooks.onRetry?.(endpoint, 'status_401');
          log.info({ endpoint }, 'bearer token refused (401): fetching a new one and retrying once');
          continue;
        }
        if (!err.retryable || retries >= settings.maxRetries) {
          const spent = err.retryable ? `; gave up after ${attempts} attempts` : '';
          // A final error from a nested operation (the token fetch of a listing request) keeps its own details.
          throw new UpstreamError(err.kind, `${describe}: ${err.message}${spent}`, {
            endpoint: err.final ? err.endpoint : endpoint,
            status: err.status,
            attempts: err.final ? err.attempts : attempts,
            reason: err.reason,
            final: true,
            cause: err,
          });
        }
        // Throttling with Retry-After is waited out in the limiter (for every request, not only this one); a 202's
        // Retry-After concerns this request only.
        const delay =
          err.kind === 'throttled' && limiter.state().pausedForMs > 0
            ? 0
            : err.retryAfterSeconds !== null
              ? err.retryAfterSeconds * 1000
              : backoffDelay(retries, backoff);
        retries += 1;
        hooks.onRetry?.(endpoint, err.reason ?? err.kind);
        // Throttling is expected now and then and has its own metric; other failures deserve a warning.
        log[err.kind === 'throttled' ? 'info' : 'warn'](
          { endpoint, kind: err.kind, reason: err.reason, status: err.status, retry: retries, delayMs: delay },
          `upstream request failed, retrying: ${err.message}`,
        );
        await sleep(delay, signal);
      }
    }
  }

  async function fetchToken(signal: AbortSignal): Promise<GrantedToken> {
    try {
      const grant = await withRetries('token', 'fetching an access token', signal, async () => {
        let creds: ClientCredentials;
        try {
          creds = await config.credentials();
        } catch (err) {
          const why = err instanceof CredentialsError ? err.message : 'credentials provider failed';
          throw new UpstreamError('auth', why, { endpoint: 'token', reason: 'credentials' });
        }
        lastSecret = creds.clientSecret;
        const basic = Buffer.from(`${creds.clientId}:${creds.clientSecret}`, 'utf8').toString('base64');
        const res = await sendOnce(
          {
            endpoint: 'token',
            method: 'POST',
            path: '/oauth2/token?grant_type=client_credentials',
            headers: {
              authorization: `Basic ${basic}`,
              'content-type': 'application/x-www-form-urlencoded',
              accept: 'application/json',
            },
            signal,
          },
          'incremental',
        );
        if (res.status !== 200) throw statusError('token', res, basic);
        return parseTokenResponse(parseJson(res, 'token'));
      });
      hooks.onTokenRefresh?.('ok');
      log.info({ expiresInSeconds: grant.expiresInSeconds }, 'access token fetched');
      return grant;
    } catch (err) {
      if (err instanceof UpstreamError) hooks.onTokenRefresh?.(err.status === 401 ? 'unauthorized' : 'error');
      throw err;
    }
  }

  const tokens = new TokenManager({ fetch: fetchToken, marginSeconds: settings.tokenRefreshMarginSeconds });

  const cursors = createCursorLocator(config.cursorPath, (path) =>
    log.info({ cursorPath: path }, 'detected the next-page cursor path of the listing'),
  );

  function listingPath(options: ListOptions, cursor: string | null, limit: number): string {
    const query = new URLSearchParams({ limit: String(limit) });
    if (options.updatedSince !== undefined) {
      const since = Math.max(0, Math.floor(options.updatedSince));
      query.set('updated_date', String(settings.updatedDateUnit === 's' ? Math.floor(since / 1000) : since));
    }
    if (cursor !== null) query.set('next_page', cursor);
    return `/v1/reviews?${query.toString()}`;
  }

  /**
   * Fetches the page at `cursor`. A page the upstream cannot serve (a body over the cap, or a 400, which is how it
   * refuses a page over its payload limit) is asked for again with half the `limit`, down to 1: one oversized review
   * then costs a page of one, and the next page is asked for with the full limit again. A 400 even for a page of
   * one is about the request itself: with a cursor, the cursor (expired or invalid: `cursor_invalid`, the pass
   * restarts without it); about the size (the text says so): `too_large`; otherwise `client`.
   */
  async function fetchPage(options: ListOptions, cursor: string | null, signal: AbortSignal): Promise<FetchedPage> {
    let limit = settings.pageSize;
    for (;;) {
      try {
        return await fetchPageOf(options, cursor, limit, signal);
      } catch (err) {
        if (!(err instanceof UpstreamError) || err.endpoint !== 'reviews') throw err;
        const refused = err.kind === 'too_large' || err.status === 400;
        if (refused && limit > 1) {
          const smaller = Math.max(1, Math.floor(limit / 2));
          const reason = err.kind === 'too_large' ? 'too_large' : (err.reason ?? 'status_400');
          hooks.onPageShrunk?.(err.kind === 'too_large' ? 'too_large' : 'status_400');
          log.warn({ cursor: cursor?.slice(0, 64) ?? null, limit, smaller, reason }, 'page refused: asking for fewer');
          limit = smaller;
          continue;
        }
        if (err.status !== 400) throw err;
        const kind = err.reason === 'payload_too_large' ? 'too_large' : cursor !== null ? 'cursor_invalid' : 'client';
        if (kind === 'client') throw err;
        const why =
          kind === 'too_large'
            ? 'the upstream cannot serve even a page of one review at this position (over its payload limit)'
            : 'the listing refused the cursor (expired or invalid) even for a page of one; the pass must restart from its beginning';
        throw new UpstreamError(kind, `${err.message}: ${why}`, {
          endpoint: 'reviews',
          status: 400,
          attempts: err.attempts,
          reason: kind,
          final: true,
          cause: err,
        });
      }
    }
  }

  async function fetchPageOf(
    options: ListOptions,
    cursor: string | null,
    limit: number,
    signal: AbortSignal,
  ): Promise<FetchedPage> {
    let token = '';
    let fetchedAt = 0;
    let upstreamAt: number | null = null;
    const at = cursor === null ? 'first page' : `cursor '${cursor.slice(0, 64)}'`;
    const describe = `listing reviews (${options.kind} pass, ${at}${limit === settings.pageSize ? '' : `, limit ${limit}`})`;
    const envelope = await withRetries(
      'reviews',
      describe,
      signal,
      async () => {
        token = await tokens.get(signal);
        const res = await sendOnce(
          {
            endpoint: 'reviews',
            method: 'GET',
            path: listingPath(options, cursor, limit),
            headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
            signal,
          },
          options.kind,
        );
        if (res.status === 202 || res.status < 200 || res.status >= 300) throw statusError('reviews', res, token);
        fetchedAt = res.sentAtWall;
        upstreamAt = clock.at(res.sentAtWall);
        const json = parseJson(res, 'reviews');
        return { json, records: listingRecords(json) };
      },
      () => tokens.invalidate(token),
    );
    let nextCursor: string | null;
    try {
      nextCursor = cursors.next(envelope.json);
    } catch (err) {
      if (!(err instanceof CursorFormatError)) throw err;
      throw new UpstreamError('client', `${describe}: ${err.message}`, {
        endpoint: 'reviews',
        reason: 'cursor_format',
      });
    }
    const { reviews, rejects } = validateRecords(envelope.records, hooks, { limits: recordLimits });
    if (rejects.length > 0) {
      log.warn(
        { rejects: rejects.map((r) => ({ id: r.id, reason: r.reason, detail: r.detail })) },
        'records failed validation',
      );
    }
    const receivedAt = Date.now();
    return {
      cursor,
      nextCursor,
      reviews,
      rejects,
      fetchedAt,
      upstreamAt,
      receivedAt,
      recordCount: envelope.records.length,
    };
  }

  return {
    upstreamNow: () => clock.at(Date.now()),
    async *pages(options: ListOptions): AsyncGenerator<Page, void, void> {
      const linked = linkSignals(options.signal, closing.signal);
      try {
        yield* paginate((cursor, s) => fetchPage(options, cursor, s), {
          start: options.cursor ?? null,
          prefetch: settings.prefetch,
          signal: linked.signal,
        });
      } finally {
        linked.dispose();
      }
    },
    async checkCredentials(): Promise<void> {
      await tokens.get(closing.signal);
    },
    limiterState: () => limiter.state(),
    async close(): Promise<void> {
      closing.abort(new UpstreamError('client', 'upstream client closed'));
      limiter.close();
      tokens.close();
      await http.close();
    },
  };
}

// A 400 body that speaks of size: the upstream's way to refuse a page over its payload limit (the spec does not
// give the error body's layout, so its words are all there is).
const PAYLOAD_WORDS = /payload|too large|too big|exceeds|size|bytes/i;

/** A response plus when its request was sent: on the limiter's clock, and as wall time (ms since epoch). */
interface SentResponse extends HttpResponse {
  sentAt: number;
  sentAtWall: number;
}

function parseJson(res: HttpResponse, endpoint: Endpoint): unknown {
  const what = endpoint === 'token' ? 'token response' : 'listing response';
  if (res.body.length === 0) {
    throw new UpstreamError('body', `${what} (${res.status}) has an empty body`, { endpoint, reason: 'empty' });
  }
  try {
    return JSON.parse(res.body.toString('utf8')) as unknown;
  } catch {
    // The parser's message quotes the text around the error, which may be personal data: say only where.
    throw new UpstreamError('body', `${what} is not valid JSON (${res.body.length} bytes; truncated or garbled)`, {
      endpoint,
      reason: 'unparsable',
    });
  }
}

function stripUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}
