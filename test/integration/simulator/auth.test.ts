import { describe, expect, it } from 'vitest';
import { list, sim, SCOPELESS, token } from './helpers.js';
import { waitFor } from '../../helpers/processes.js';

// Spec, Authentication rules 5-7: every listing request carries a valid bearer token; 401 otherwise, 403 for a
// token without the scope.

describe('GET /v1/reviews authentication', () => {
  it('answers 401 without an Authorization header', async () => {
    const { url } = await sim();
    const answer = await list(url, null);
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  it('answers 401 to an unknown token and to a non-Bearer scheme', async () => {
    const { url } = await sim();
    expect((await list(url, 'not-a-token')).status).toBe(401);
    const good = await token(url);
    expect((await list(url, null, {}, { authorization: `Basic ${good}` })).status).toBe(401);
  });

  it('accepts a valid token', async () => {
    const { url } = await sim();
    expect((await list(url, await token(url))).status).toBe(200);
  });

  it('answers 401 once the token has expired', async () => {
    const { url } = await sim({ tokenTtlSeconds: 1 });
    const accessToken = await token(url);
    expect((await list(url, accessToken)).status).toBe(200);
    // The token lives one second of the simulator's clock: wait for the first refusal, not for a fixed time.
    const answer = await waitFor(
      async () => {
        const a = await list(url, accessToken);
        return a.status === 200 ? undefined : a;
      },
      5_000,
      'the token to expire',
      50,
    );
    expect(answer.status).toBe(401);
    expect(answer.json()).toMatchObject({ error: expect.stringContaining('expired') });
  });

  it('answers 401 to tokens issued before a revocation, and accepts new ones', async () => {
    const simulator = await sim();
    const old = await token(simulator.url);
    simulator.control.revokeTokens();
    expect((await list(simulator.url, old)).status).toBe(401);
    expect((await list(simulator.url, await token(simulator.url))).status).toBe(200);
  });

  it('answers 403 to a token of the credential without the listing scope', async () => {
    const { url } = await sim();
    const answer = await list(url, await token(url, SCOPELESS));
    expect(answer.status).toBe(403);
    expect(answer.json()).toMatchObject({ error: expect.any(String) });
  });

  it('honours custom credentials', async () => {
    const { url } = await sim({ clientId: 'acme', clientSecret: 's3cr3t' });
    expect((await list(url, await token(url, { id: 'acme', secret: 's3cr3t' }))).status).toBe(200);
    await expect(token(url)).rejects.toThrow(/401/);
  });
});
