import { describe, expect, it } from 'vitest';
import { call, basic, requestToken, sim, SCOPELESS } from './helpers.js';

// Spec, endpoint 1 (issue access token) and Authentication rules 3, 4 and 6.

describe('POST /oauth2/token', () => {
  it('issues a Bearer token for valid client credentials (grant_type in the query, HTTP Basic)', async () => {
    const { url } = await sim();
    const answer = await requestToken(url);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    const body = answer.json() as Record<string, unknown>;
    expect(body).toEqual({ access_token: expect.any(String), expires_in: 3600, token_type: 'Bearer' });
    expect((body.access_token as string).length).toBeGreaterThanOrEqual(20);
  });

  it('issues a different opaque token on every request', async () => {
    const { url } = await sim();
    const first = (await requestToken(url)).json() as { access_token: string };
    const second = (await requestToken(url)).json() as { access_token: string };
    expect(first.access_token).not.toBe(second.access_token);
    expect(first.access_token).not.toContain('demo');
  });

  it('reports the configured lifetime in expires_in (the operator may set 5 min to 24 h)', async () => {
    const { url } = await sim({ tokenTtlSeconds: 300 });
    expect(((await requestToken(url)).json() as { expires_in: number }).expires_in).toBe(300);
  });

  it('answers 401 to a wrong secret, an unknown client and missing credentials', async () => {
    const { url } = await sim();
    expect((await requestToken(url, { id: 'demo-client', secret: 'wrong' })).status).toBe(401);
    expect((await requestToken(url, { id: 'nobody', secret: 'demo-secret' })).status).toBe(401);
    const bare = await call(`${url}/oauth2/token?grant_type=client_credentials`, { method: 'POST' });
    expect(bare.status).toBe(401);
    expect(bare.headers['www-authenticate']).toMatch(/^Basic/);
  });

  it('answers 400 with a JSON error when grant_type is missing or not client_credentials', async () => {
    const { url } = await sim();
    for (const query of ['', '?grant_type=password', '?grant_type=']) {
      const answer = await requestToken(url, undefined, query);
      expect(answer.status).toBe(400);
      expect(answer.json()).toMatchObject({ error: expect.any(String) });
    }
  });

  it('issues tokens to the scopeless credential too (its tokens fail later, with 403)', async () => {
    const { url } = await sim();
    expect((await requestToken(url, SCOPELESS)).status).toBe(200);
  });

  it('only accepts POST', async () => {
    const { url } = await sim();
    const answer = await call(`${url}/oauth2/token?grant_type=client_credentials`, {
      headers: { authorization: basic('demo-client', 'demo-secret') },
    });
    expect(answer.status).toBe(405);
  });

  it('counts issued tokens in the stats', async () => {
    const simulator = await sim();
    await requestToken(simulator.url);
    await requestToken(simulator.url, { id: 'x', secret: 'y' });
    expect(simulator.control.stats()).toMatchObject({ requests: 2, tokensIssued: 1, byStatus: { '200': 1, '401': 1 } });
  });
});
