import { z } from 'zod';
import { UpstreamError } from './errors.js';
import { abortReason } from './retry.js';

// Bearer token cache. Refreshes lazily when a request needs a token and the cached one is within the margin of
// its expiry, so an idle bridge makes no token calls and no request carries a token that expires in flight. One
// refresh is in flight however many requests wait for it; a waiter that aborts leaves the refresh running for
// the others.

/** What the token endpoint granted. */
export interface GrantedToken {
  accessToken: string;
  expiresInSeconds: number;
}

/** Performs one token exchange (credentials, HTTP, retries live with the caller). */
export type TokenFetcher = (signal: AbortSignal) => Promise<GrantedToken>;

/** Options of the token manager. */
export interface TokenManagerOptions {
  fetch: TokenFetcher;
  /** Refresh this long before expiry (capped at half the lifetime, so short-lived tokens are still reused). */
  marginSeconds: number;
  now?: () => number;
  /**
   * After the token endpoint refused the credentials, callers get that refusal again for this long without another
   * request (default REFUSED_TOKEN_PACE_MS): the passes, the health check of every replica and a standby's check
   * share one pace, within the upstream's limits, however many ask.
   */
  refusedPaceMs?: number;
}

/** How long a refusal of the credentials is answered from memory: at most 7 token requests in any 30 s. */
export const REFUSED_TOKEN_PACE_MS = 5_000;

/** Lifetime assumed when the server omits expires_in (the documented default). */
export const DEFAULT_TOKEN_TTL_SECONDS = 3600;

const TokenResponseSchema = z.object({
  access_token: z.string().min(1),
  expires_in: z.coerce.number().positive().finite().optional(),
  token_type: z.string().optional(),
});

/** Parses a token endpoint answer; a malformed one is a body error (retried), with no value in the message. */
export function parseTokenResponse(json: unknown): GrantedToken {
  const parsed = TokenResponseSchema.safeParse(json);
  if (!parsed.success) {
    const fields = [...new Set(parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}:${i.code}`))];
    throw new UpstreamError('body', `token response malformed (${fields.join(', ')})`, {
      endpoint: 'token',
      reason: 'malformed',
    });
  }
  if (parsed.data.token_type !== undefined && parsed.data.token_type.toLowerCase() !== 'bearer') {
    throw new UpstreamError(
      'body',
      `token response has token_type '${parsed.data.token_type.slice(0, 20)}', not Bearer`,
      {
        endpoint: 'token',
        reason: 'malformed',
      },
    );
  }
  return {
    accessToken: parsed.data.access_token,
    expiresInSeconds: parsed.data.expires_in ?? DEFAULT_TOKEN_TTL_SECONDS,
  };
}

interface CachedToken {
  value: string;
  refreshAt: number;
  expiresAt: number;
}

/** Caches the bearer token, refreshes it ahead of expiry, single-flights refreshes. */
export class TokenManager {
  private readonly fetcher: TokenFetcher;
  private readonly marginMs: number;
  private readonly now: () => number;
  private cached: CachedToken | null = null;
  private inflight: Promise<CachedToken> | null = null;
  private readonly lifetime = new AbortController();
  private readonly refusedPaceMs: number;
  /** The last refusal of the credentials, answered again until `until`. */
  private refused: { err: unknown; until: number } | null = null;

  constructor(options: TokenManagerOptions) {
    this.fetcher = options.fetch;
    this.marginMs = Math.max(0, options.marginSeconds * 1000);
    this.now = options.now ?? Date.now;
    this.refusedPaceMs = options.refusedPaceMs ?? REFUSED_TOKEN_PACE_MS;
  }

  /** A token valid beyond the refresh margin, fetching one if needed. */
  async get(signal?: AbortSignal): Promise<string> {
    const cached = this.cached;
    if (cached && this.now() < cached.refreshAt) return cached.value;
    if (this.refused && this.now() < this.refused.until && !this.inflight) throw this.refused.err;
    const refresh = this.inflight ?? this.startRefresh();
    return (await raceAbort(refresh, signal)).value;
  }

  /** Drops the token after a 401, unless it was already replaced (a late 401 must not discard a fresh token). */
  invalidate(token: string): void {
    if (this.cached?.value === token) this.cached = null;
  }

  /** The current token, for redaction of text that might echo it. */
  current(): string | null {
    return this.cached?.value ?? null;
  }

  /** Milliseconds until the cached token expires, or null when there is none. */
  expiresInMs(): number | null {
    return this.cached ? this.cached.expiresAt - this.now() : null;
  }

  /** Aborts a refresh in flight; later calls fail. */
  close(): void {
    this.lifetime.abort(new UpstreamError('client', 'upstream client closed'));
  }

  private startRefresh(): Promise<CachedToken> {
    const refresh = (async () => {
      if (this.lifetime.signal.aborted) throw abortReason(this.lifetime.signal);
      let grant: GrantedToken;
      try {
        grant = await this.fetcher(this.lifetime.signal);
        this.refused = null;
      } catch (err) {
        if (err instanceof UpstreamError && err.kind === 'auth')
          this.refused = { err, until: this.now() + this.refusedPaceMs };
        throw err;
      }
      const now = this.now();
      const ttlMs = grant.expiresInSeconds * 1000;
      const token: CachedToken = {
        value: grant.accessToken,
        refreshAt: now + ttlMs - Math.min(this.marginMs, ttlMs / 2),
        expiresAt: now + ttlMs,
      };
      this.cached = token;
      return token;
    })();
    this.inflight = refresh;
    // Cleared either way so that a failed refresh is retried by the next request, not replayed from cache.
    const clear = (): void => {
      if (this.inflight === refresh) this.inflight = null;
    };
    refresh.then(clear, clear);
    return refresh;
  }
}

/** Resolves with `promise`, or rejects as soon as `signal` aborts (the promise itself keeps running). */
export function raceAbort<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
