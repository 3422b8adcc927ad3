import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { statusError, type AnswerContext } from '../../../src/upstream/answers.js';
import { UpstreamError } from '../../../src/upstream/errors.js';
import { refusal } from '../../../src/upstream/pages.js';
import { listingPath } from '../../../src/upstream/requests.js';
import { RetryPolicy } from '../../../src/upstream/retry.js';
import { checkConfig } from '../../../src/upstream/client-config.js';

// The parts of the upstream client on their own, without a server: the integration tests drive them together.

const silent = pino({ level: 'silent' });

function answer(status: number, body = '', headers: Record<string, string> = {}) {
  return { status, headers, body: Buffer.from(body), sentAt: 7, sentAtWall: 0 };
}

describe('answer classification', () => {
  const throttles: [number, number | null, number][] = [];
  const context: AnswerContext = {
    redact: () => ['the-token'],
    maxRetryAfterSeconds: 120,
    onThrottled: (status, retryAfter, sentAt) => throttles.push([status, retryAfter, sentAt]),
  };

  it('hands a throttle and its bounded Retry-After to the caller', () => {
    const err = statusError('reviews', answer(429, '', { 'retry-after': '999' }), 'x', context);
    expect(err.kind).toBe('throttled');
    expect(throttles).toEqual([[429, 120, 7]]);
  });

  it('redacts what the request carried and the known credentials from an echoed body', () => {
    const err = statusError('reviews', answer(500, 'bad sent-secret the-token'), 'sent-secret', context);
    expect(err.kind).toBe('server');
    expect(err.message).not.toContain('sent-secret');
    expect(err.message).not.toContain('the-token');
  });

  it('tells a 400 about size from any other 400', () => {
    expect(statusError('reviews', answer(400, 'payload too large'), 'x', context).reason).toBe('payload_too_large');
    expect(statusError('reviews', answer(400, 'bad cursor'), 'x', context).reason).toBe('status_400');
  });
});

describe('page refusal', () => {
  const refused = (reason: string) => new UpstreamError('client', 'no', { endpoint: 'reviews', status: 400, reason });

  it('halves the limit down to one', () => {
    expect(refusal(refused('status_400'), null, 100)).toMatchObject({ retryWith: 50, hookReason: 'status_400' });
    expect(refusal(refused('status_400'), null, 3)).toMatchObject({ retryWith: 1 });
  });

  it('names a refused page of one by what it was about', () => {
    const kindOf = (r: ReturnType<typeof refusal>) => ('error' in r ? (r.error as UpstreamError).kind : null);
    expect(kindOf(refusal(refused('status_400'), 'c1', 1))).toBe('cursor_invalid');
    expect(kindOf(refusal(refused('payload_too_large'), null, 1))).toBe('too_large');
    expect(kindOf(refusal(refused('status_400'), null, 1))).toBe('client');
  });

  it('passes any other failure on untouched', () => {
    const other = new Error('boom');
    expect(refusal(other, null, 100)).toEqual({ error: other });
  });
});

describe('request building', () => {
  it('converts updated_date to the upstream unit and carries the cursor', () => {
    expect(listingPath({ kind: 'incremental', updatedSince: 1_500.9 }, 'c', 10, 's')).toBe(
      '/v1/reviews?limit=10&updated_date=1&next_page=c',
    );
    expect(listingPath({ kind: 'sweep' }, null, 100, 'ms')).toBe('/v1/reviews?limit=100');
  });
});

describe('configuration check', () => {
  it('names the wrong setting', () => {
    expect(() =>
      checkConfig({ baseUrl: 'ftp://x', credentials: async () => ({ clientId: 'a', clientSecret: 'b' }) }),
    ).toThrow(/baseUrl/);
  });
});

describe('retry policy', () => {
  const options = (maxRetries: number, waits: number[]) => ({
    maxRetries,
    backoff: { baseMs: 100, capMs: 100 },
    limiterPaused: () => false,
    hooks: {},
    log: silent,
    sleep: async (ms: number) => void waits.push(ms),
  });
  const signal = new AbortController().signal;

  it('retries a retryable failure until the budget is spent, then gives up with a final error', async () => {
    const waits: number[] = [];
    let attempts = 0;
    const run = new RetryPolicy(options(2, waits)).run({
      endpoint: 'reviews',
      describe: 'listing',
      signal,
      attempt: async () => {
        attempts += 1;
        throw new UpstreamError('server', 'down', { endpoint: 'reviews', status: 503 });
      },
    });
    await expect(run).rejects.toMatchObject({ final: true, attempts: 3, message: /gave up after 3 attempts/ });
    expect(attempts).toBe(3);
    expect(waits).toHaveLength(2);
  });

  it("waits a 202's Retry-After and retries a 401 once at once, outside the budget", async () => {
    const waits: number[] = [];
    const failures = [
      new UpstreamError('auth', 'no', { endpoint: 'reviews', status: 401 }),
      new UpstreamError('not_ready', 'later', { endpoint: 'reviews', status: 202, retryAfterSeconds: 2 }),
    ];
    let refreshed = 0;
    const result = await new RetryPolicy(options(1, waits)).run({
      endpoint: 'reviews',
      describe: 'listing',
      signal,
      attempt: async () => {
        const failure = failures.shift();
        if (failure) throw failure;
        return 'page';
      },
      onUnauthorized: () => (refreshed += 1),
    });
    expect(result).toBe('page');
    expect(refreshed).toBe(1);
    expect(waits).toEqual([2000]);
  });
});
