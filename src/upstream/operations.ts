import type { Logger } from 'pino';
import { parseJson, statusError, type AnswerContext } from './answers.js';
import { CredentialsError, type ClientCredentials, type CredentialsProvider } from './credentials.js';
import { UpstreamError } from './errors.js';
import { parsePage, refusal, type PageParsing } from './pages.js';
import type { FetchedPage } from './pager.js';
import { listingPath, listingRequest, tokenRequest, type Sender } from './requests.js';
import type { RetryPolicy } from './retry.js';
import { parseTokenResponse, type GrantedToken, type TokenFetcher, type TokenManager } from './tokens.js';
import type { ListOptions, UpstreamHooks } from './types.js';
import type { UpstreamClock } from './upstream-clock.js';
import { listingRecords } from './validate.js';

// The client's two operations, each one attempt built from the other modules (request, send, classify, parse) and
// run under the one retry policy: fetching an access token, and fetching a page of the listing.

/** What both operations share. */
export interface OperationParts {
  send: Sender;
  retry: RetryPolicy;
  answers: AnswerContext;
  hooks: UpstreamHooks;
  log: Logger;
}

/** The token fetch given to the TokenManager; `onSecret` keeps the last secret sent, to redact it from answers. */
export function tokenFetcher(
  parts: OperationParts,
  credentials: CredentialsProvider,
  onSecret: (secret: string) => void,
): TokenFetcher {
  const { send, retry, answers, hooks, log } = parts;
  const attempt = async (signal: AbortSignal): Promise<GrantedToken> => {
    let creds: ClientCredentials;
    try {
      creds = await credentials();
    } catch (err) {
      const why = err instanceof CredentialsError ? err.message : 'credentials provider failed';
      throw new UpstreamError('auth', why, { endpoint: 'token', reason: 'credentials' });
    }
    onSecret(creds.clientSecret);
    const { request, basic } = tokenRequest(creds, signal);
    const res = await send(request, 'incremental');
    if (res.status !== 200) throw statusError('token', res, basic, answers);
    return parseTokenResponse(parseJson(res, 'token'));
  };
  return async (signal) => {
    try {
      const grant = await retry.run({
        endpoint: 'token',
        describe: 'fetching an access token',
        signal,
        attempt: () => attempt(signal),
      });
      hooks.onTokenRefresh?.('ok');
      log.info({ expiresInSeconds: grant.expiresInSeconds }, 'access token fetched');
      return grant;
    } catch (err) {
      if (err instanceof UpstreamError) hooks.onTokenRefresh?.(err.status === 401 ? 'unauthorized' : 'error');
      throw err;
    }
  };
}

/** What the page fetch needs besides the shared parts. */
export interface PageFetchParts extends OperationParts {
  tokens: TokenManager;
  clock: UpstreamClock;
  parsing: PageParsing;
  pageSize: number;
  updatedDateUnit: 'ms' | 's';
}

/** Fetches one page of a pass; a refused page is asked for again with fewer reviews (see pages.ts, `refusal`). */
export function pageFetcher(
  parts: PageFetchParts,
): (options: ListOptions, cursor: string | null, signal: AbortSignal) => Promise<FetchedPage> {
  return async (options, cursor, signal) => {
    let limit = parts.pageSize;
    for (;;) {
      try {
        return await fetchPageOf(parts, options, cursor, limit, signal);
      } catch (err) {
        const next = refusal(err, cursor, limit);
        if ('error' in next) throw next.error;
        parts.hooks.onPageShrunk?.(next.hookReason);
        parts.log.warn(
          { cursor: cursor?.slice(0, 64) ?? null, limit, smaller: next.retryWith, reason: next.reason },
          'page refused: asking for fewer',
        );
        limit = next.retryWith;
      }
    }
  };
}

async function fetchPageOf(
  parts: PageFetchParts,
  options: ListOptions,
  cursor: string | null,
  limit: number,
  signal: AbortSignal,
): Promise<FetchedPage> {
  const { send, retry, answers, tokens, clock } = parts;
  let token = '';
  let fetchedAt = 0;
  let upstreamAt: number | null = null;
  const at = cursor === null ? 'first page' : `cursor '${cursor.slice(0, 64)}'`;
  const describe = `listing reviews (${options.kind} pass, ${at}${limit === parts.pageSize ? '' : `, limit ${limit}`})`;
  const path = listingPath(options, cursor, limit, parts.updatedDateUnit);
  const envelope = await retry.run({
    endpoint: 'reviews',
    describe,
    signal,
    attempt: async () => {
      token = await tokens.get(signal);
      const res = await send(listingRequest(path, token, signal), options.kind);
      if (res.status === 202 || res.status < 200 || res.status >= 300)
        throw statusError('reviews', res, token, answers);
      fetchedAt = res.sentAtWall;
      upstreamAt = clock.at(res.sentAtWall);
      const json = parseJson(res, 'reviews');
      return { json, records: listingRecords(json) };
    },
    onUnauthorized: () => tokens.invalidate(token),
  });
  const page = parsePage(envelope.json, envelope.records, describe, parts.parsing);
  // The end of the page's listing span: the answer is read and validated now.
  return { cursor, fetchedAt, upstreamAt, receivedAt: (parts.parsing.now ?? Date.now)(), ...page };
}
