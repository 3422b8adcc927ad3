import { UpstreamError, excerpt, type Endpoint } from './errors.js';
import type { HttpResponse } from './http.js';
import type { SentResponse } from './requests.js';
import { parseRetryAfter } from './retry.js';

// Answer classification: what an upstream answer means for the client. A non-2xx status becomes an UpstreamError
// whose kind decides whether it is retried; a 2xx body becomes JSON or a `body` error. Nothing here sends, waits
// or keeps state: the one side effect, throttling, is handed to the caller (it pauses the shared limiter).

/** What classifying an answer needs besides the answer itself. */
export interface AnswerContext {
  /** Credentials that must never appear in an excerpt of the body (the current token, the last secret). */
  redact(): (string | null)[];
  /** Longest Retry-After honoured, seconds. */
  maxRetryAfterSeconds: number;
  /** The wall clock (ms since the epoch) a Retry-After date is counted from; default Date.now. */
  now?: () => number;
  /** A 503 or 429 with its Retry-After (seconds, or null) and when the throttled request was sent (limiter clock). */
  onThrottled(status: number, retryAfterSeconds: number | null, sentAt: number): void;
}

const wallNow = (context: AnswerContext): number => (context.now ?? Date.now)();

/** One attempt's failure as an UpstreamError, from a non-2xx answer. */
export function statusError(
  endpoint: Endpoint,
  res: SentResponse,
  sent: string,
  context: AnswerContext,
): UpstreamError {
  const status = res.status;
  const what = endpoint === 'token' ? 'token endpoint' : 'review listing';
  // `sent` is the credential this request carried (a bearer token, or the Basic pair), should the body echo it.
  const detail = res.body.length > 0 ? `: ${excerpt(res.body.toString('utf8'), [...context.redact(), sent])}` : '';
  const base = { endpoint, status, reason: `status_${status}` };
  if (status === 503 || status === 429) {
    const retryAfter = parseRetryAfter(res.headers['retry-after'], wallNow(context), context.maxRetryAfterSeconds);
    context.onThrottled(status, retryAfter, res.sentAt);
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
    const retryAfter = parseRetryAfter(res.headers['retry-after'], wallNow(context), context.maxRetryAfterSeconds);
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

// A 400 body that speaks of size: the upstream's way to refuse a page over its payload limit (the spec does not
// give the error body's layout, so its words are all there is).
const PAYLOAD_WORDS = /payload|too large|too big|exceeds|size|bytes/i;

/** The JSON of a 2xx answer; an empty or unparsable body is a retryable `body` error. */
export function parseJson(res: HttpResponse, endpoint: Endpoint): unknown {
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
