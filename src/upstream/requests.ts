import type { ClientCredentials } from './credentials.js';
import { UpstreamError } from './errors.js';
import type { HttpRequest, HttpResponse, HttpTransport } from './http.js';
import type { RateLimiter } from './rate-limiter.js';
import type { ListOptions, PassKind, UpstreamHooks } from './types.js';
import type { UpstreamClock } from './upstream-clock.js';

// Request building and sending: the two requests the client makes (a token grant, a listing page) and the one way
// to send either (a limiter slot first, hooks and the upstream clock's sample after). No retries and no reading
// of the answer here: those are retry.ts and answers.ts.

/** A response plus when its request was sent: on the limiter's clock, and as wall time (ms since epoch). */
export interface SentResponse extends HttpResponse {
  sentAt: number;
  sentAtWall: number;
}

/** Sends a request once (limiter slot, hooks), returning the response whatever its status. */
export type Sender = (req: HttpRequest, kind: PassKind) => Promise<SentResponse>;

/** The client-credentials grant, and the Basic pair it carries (to redact should the answer echo it). */
export function tokenRequest(creds: ClientCredentials, signal: AbortSignal): { request: HttpRequest; basic: string } {
  const basic = Buffer.from(`${creds.clientId}:${creds.clientSecret}`, 'utf8').toString('base64');
  const request: HttpRequest = {
    endpoint: 'token',
    method: 'POST',
    path: '/oauth2/token?grant_type=client_credentials',
    headers: {
      authorization: `Basic ${basic}`,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    signal,
  };
  return { request, basic };
}

/** Path and query of one listing page: `limit`, `updated_date` in the upstream's unit, `next_page`. */
export function listingPath(
  options: ListOptions,
  cursor: string | null,
  limit: number,
  updatedDateUnit: 'ms' | 's',
): string {
  const query = new URLSearchParams({ limit: String(limit) });
  if (options.updatedSince !== undefined) {
    const since = Math.max(0, Math.floor(options.updatedSince));
    query.set('updated_date', String(updatedDateUnit === 's' ? Math.floor(since / 1000) : since));
  }
  if (cursor !== null) query.set('next_page', cursor);
  return `/v1/reviews?${query.toString()}`;
}

/** The GET of one listing page with a bearer token. */
export function listingRequest(path: string, token: string, signal: AbortSignal): HttpRequest {
  return {
    endpoint: 'reviews',
    method: 'GET',
    path,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    signal,
  };
}

/** What sending needs: the transport, the shared limiter, the upstream clock and the metric hooks. */
export interface SenderParts {
  http: HttpTransport;
  limiter: RateLimiter;
  clock: UpstreamClock;
  hooks: UpstreamHooks;
  /** The wall clock (ms since the epoch) of the upstream clock's samples; default Date.now. */
  now?: () => number;
}

/** The client's one way to send: waits for a limiter slot, times the request and samples the `Date` header. */
export function createSender({ http, limiter, clock, hooks, now = Date.now }: SenderParts): Sender {
  return async (req, kind) => {
    const waited = await limiter.acquire(kind, req.signal);
    hooks.onLimiterWait?.(kind, waited / 1000);
    const sentAt = limiter.now();
    const sentAtWall = now();
    const started = performance.now();
    try {
      const res = await http.request(req);
      hooks.onRequest?.(req.endpoint, res.status, (performance.now() - started) / 1000);
      clock.sample(res.headers.date, sentAtWall, now());
      return { ...res, sentAt, sentAtWall };
    } catch (err) {
      if (err instanceof UpstreamError) hooks.onRequest?.(req.endpoint, 0, (performance.now() - started) / 1000);
      throw err;
    }
  };
}
