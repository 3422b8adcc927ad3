import { describe, expect, it } from 'vitest';
import { TokenManager, parseTokenResponse, type GrantedToken } from '../../../src/upstream/tokens.js';
import { isUpstreamError } from '../../../src/upstream/errors.js';

function manager(ttlSeconds = 3600, marginSeconds = 60) {
  let now = 0;
  let issued = 0;
  const releases: (() => void)[] = [];
  let manual = false;
  const fetch = (): Promise<GrantedToken> => {
    issued += 1;
    const grant = { accessToken: `token-${issued}`, expiresInSeconds: ttlSeconds };
    if (!manual) return Promise.resolve(grant);
    return new Promise((resolve) => releases.push(() => resolve(grant)));
  };
  const tokens = new TokenManager({ fetch, marginSeconds, now: () => now });
  return {
    tokens,
    issued: () => issued,
    setNow: (ms: number) => {
      now = ms;
    },
    holdFetches: () => {
      manual = true;
    },
    release: () => releases.splice(0).forEach((r) => r()),
  };
}

describe('TokenManager', () => {
  it('caches the token and refreshes it `margin` before expiry', async () => {
    const m = manager(3600, 60);
    expect(await m.tokens.get()).toBe('token-1');
    m.setNow(3_539_000);
    expect(await m.tokens.get()).toBe('token-1');
    m.setNow(3_540_000);
    expect(await m.tokens.get()).toBe('token-2');
    expect(m.issued()).toBe(2);
  });

  it('honours the expires_in the server returns (5 minutes to 24 hours)', async () => {
    const short = manager(300, 60);
    await short.tokens.get();
    short.setNow(239_999);
    await short.tokens.get();
    short.setNow(240_000);
    await short.tokens.get();
    expect(short.issued()).toBe(2);

    const long = manager(86_400, 60);
    await long.tokens.get();
    long.setNow(86_000_000);
    await long.tokens.get();
    expect(long.issued()).toBe(1);
  });

  it('caps the margin at half the lifetime so short-lived tokens are still reused', async () => {
    const m = manager(4, 60);
    await m.tokens.get();
    m.setNow(1_999);
    await m.tokens.get();
    expect(m.issued()).toBe(1);
    m.setNow(2_000);
    await m.tokens.get();
    expect(m.issued()).toBe(2);
  });

  it('runs one refresh however many requests wait', async () => {
    const m = manager();
    m.holdFetches();
    const waiting = Array.from({ length: 20 }, () => m.tokens.get());
    m.release();
    expect(new Set(await Promise.all(waiting))).toEqual(new Set(['token-1']));
    expect(m.issued()).toBe(1);
  });

  it('lets one waiter abort without cancelling the refresh for the others', async () => {
    const m = manager();
    m.holdFetches();
    const controller = new AbortController();
    const aborted = m.tokens.get(controller.signal);
    const other = m.tokens.get();
    controller.abort(new Error('bye'));
    await expect(aborted).rejects.toThrow('bye');
    m.release();
    await expect(other).resolves.toBe('token-1');
  });

  it('invalidate() drops the refused token but not a newer one', async () => {
    const m = manager();
    const first = await m.tokens.get();
    m.tokens.invalidate(first);
    const second = await m.tokens.get();
    expect(second).toBe('token-2');
    m.tokens.invalidate(first);
    expect(await m.tokens.get()).toBe('token-2');
    expect(m.issued()).toBe(2);
  });

  it('fetches again after a failed refresh instead of caching the failure', async () => {
    let calls = 0;
    const tokens = new TokenManager({
      marginSeconds: 60,
      fetch: () => {
        calls += 1;
        return calls === 1
          ? Promise.reject(new Error('boom'))
          : Promise.resolve({ accessToken: 'ok', expiresInSeconds: 3600 });
      },
    });
    await expect(tokens.get()).rejects.toThrow('boom');
    await expect(tokens.get()).resolves.toBe('ok');
  });
});

describe('parseTokenResponse', () => {
  it('reads access_token and expires_in, defaulting the lifetime to 3600', () => {
    expect(parseTokenResponse({ access_token: 'a', expires_in: 900, token_type: 'Bearer' })).toEqual({
      accessToken: 'a',
      expiresInSeconds: 900,
    });
    expect(parseTokenResponse({ access_token: 'a', expires_in: '120' }).expiresInSeconds).toBe(120);
    expect(parseTokenResponse({ access_token: 'a' }).expiresInSeconds).toBe(3600);
  });

  it('rejects malformed answers as body errors without echoing values', () => {
    for (const bad of [{}, { access_token: '' }, { access_token: 'tok-secret', expires_in: -1 }, null]) {
      let caught: unknown;
      try {
        parseTokenResponse(bad);
      } catch (err) {
        caught = err;
      }
      expect(isUpstreamError(caught, 'body')).toBe(true);
      expect(String((caught as Error).message)).not.toContain('tok-secret');
    }
  });
});
