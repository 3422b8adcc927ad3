import { pino, type Logger } from 'pino';
import type { ListOptions, Page, ReviewSource, UpstreamHooks } from './types.js';
import { UpstreamError } from './errors.js';
import { HttpTransport } from './http.js';
import { RateLimiter, type RateLimiterState } from './rate-limiter.js';
import { RetryPolicy } from './retry.js';
import { TokenManager } from './tokens.js';
import { createCursorLocator } from './cursor.js';
import { LARGE_OFFSET_MS, UpstreamClock } from './upstream-clock.js';
import { paginate } from './pager.js';
import { linkSignals } from './signals.js';
import type { AnswerContext } from './answers.js';
import { resolveSettings, type UpstreamClientConfig } from './client-config.js';
import { pageFetcher, tokenFetcher, type OperationParts } from './operations.js';
import { createSender } from './requests.js';

export { UPSTREAM_DEFAULTS, type UpstreamClientConfig } from './client-config.js';

// Composition of the upstream client: every request takes a slot from the shared limiter, carries a cached
// token, and goes through one retry policy that knows which answers deserve another attempt. The pager and the
// record validation sit on top. Nothing here keeps a timer running while the bridge is idle. The parts:
// client-config.ts (settings), requests.ts (building and sending), answers.ts (classification), pages.ts (page
// parsing), retry.ts (the retry policy), operations.ts (a token fetch and a page fetch made of those).

/** The review source plus what operations need to look at the limiter. */
export interface UpstreamClient extends ReviewSource {
  /** Limiter snapshot (configured and current rate, queue) for gauges and tests. */
  limiterState(): RateLimiterState;
}

/** Creates the upstream client (the bridge's ReviewSource). */
export function createUpstreamClient(
  config: UpstreamClientConfig,
  hooks: UpstreamHooks = {},
  logger: Logger = pino({ level: 'silent' }),
): UpstreamClient {
  const { settings, backoff, timeouts, recordLimits } = resolveSettings(config);
  const log = logger.child({ module: 'upstream' });
  const http = new HttpTransport(config.baseUrl, {
    timeouts,
    maxBodyBytes: settings.maxBodyBytes,
    connections: settings.connections,
    requestCompression: settings.requestCompression,
    ...(config.ca ? { ca: config.ca } : {}),
  });
  const limiter = new RateLimiter({ ...config.limiter, rps: settings.rateLimitRps, burst: settings.rateLimitBurst });
  const clock = watchedClock(hooks, log);
  const now = config.now ?? Date.now;
  const closing = new AbortController();
  let lastSecret: string | null = null;
  const answers: AnswerContext = {
    redact: () => [tokens.current(), lastSecret],
    maxRetryAfterSeconds: settings.maxRetryAfterSeconds,
    now,
    onThrottled: (status, retryAfter, sentAt) => {
      limiter.throttled(retryAfter, sentAt);
      hooks.onThrottled?.(status, retryAfter);
    },
  };
  const limiterPaused = (): boolean => limiter.state().pausedForMs > 0;
  const parts: OperationParts = {
    send: createSender({ http, limiter, clock, hooks, now }),
    retry: new RetryPolicy({ maxRetries: settings.maxRetries, backoff, limiterPaused, hooks, log }),
    answers,
    hooks,
    log,
  };
  const fetchToken = tokenFetcher(parts, config.credentials, (secret) => (lastSecret = secret));
  const tokens = new TokenManager({ fetch: fetchToken, marginSeconds: settings.tokenRefreshMarginSeconds });
  const cursors = createCursorLocator(config.cursorPath, (path) =>
    log.info({ cursorPath: path }, 'detected the next-page cursor path of the listing'),
  );
  const parsing = { cursors, limits: recordLimits, hooks, log, now };
  const { pageSize, updatedDateUnit } = settings;
  const fetchPage = pageFetcher({ ...parts, tokens, clock, parsing, pageSize, updatedDateUnit });

  return {
    upstreamNow: () => clock.at(now()),
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

/** The upstream clock estimate, reported to the hooks and logged when it crosses the one-minute mark either way. */
function watchedClock(hooks: UpstreamHooks, log: Logger): UpstreamClock {
  let largeOffset = false;
  return new UpstreamClock((offsetMs) => {
    hooks.onClockOffset?.(offsetMs / 1000);
    const large = Math.abs(offsetMs) > LARGE_OFFSET_MS;
    if (large !== largeOffset) {
      largeOffset = large;
      const seconds = Math.round(offsetMs / 1000);
      if (large) log.warn({ offsetSeconds: seconds }, "the upstream's clock differs from ours by over a minute");
      else log.info({ offsetSeconds: seconds }, "the upstream's clock is within a minute of ours again");
    }
  });
}
