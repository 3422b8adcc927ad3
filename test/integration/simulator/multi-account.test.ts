import { describe, expect, it } from 'vitest';
import {
  SimulatorHttpControl,
  type MultiSimulator,
  type SimulatorAccount,
  type SimulatorAccountSpec,
} from '../../../src/simulator/index.js';
import { createUpstreamClient } from '../../../src/upstream/client.js';
import { fileOrEnvCredentials } from '../../../src/upstream/credentials.js';
import { call, idsOf, list, multiSim, requestToken, sim, token, walk, type Envelope } from './helpers.js';

// Several accounts behind one server: each under /accounts/<id> is a whole simulator of its own, so a multi-account
// bridge can be run against one process. Every check goes over real HTTP.

function account(
  simulator: MultiSimulator,
  id: string,
): SimulatorAccount & { credential: { id: string; secret: string } } {
  const found = simulator.accounts.get(id);
  if (found === undefined) throw new Error(`no account ${id}`);
  return { ...found, credential: { id: found.clientId, secret: found.clientSecret } };
}

async function two(a: SimulatorAccountSpec['options'] = {}, b: SimulatorAccountSpec['options'] = {}) {
  const simulator = await multiSim([
    { id: 'shop-a', options: { rateLimit: null, reviewCount: 120, ...a } },
    { id: 'shop-b', options: { rateLimit: null, reviewCount: 80, ...b } },
  ]);
  return { simulator, a: account(simulator, 'shop-a'), b: account(simulator, 'shop-b') };
}

describe('multi-account simulator', () => {
  it('mounts each account under /accounts/<id> with distinct default credentials', async () => {
    const { simulator, a, b } = await two();
    expect(a.url).toBe(`${simulator.url}/accounts/shop-a`);
    expect(b.url).toBe(`${simulator.url}/accounts/shop-b`);
    expect([...simulator.accounts.keys()]).toEqual(['shop-a', 'shop-b']);
    expect(a.clientId).toBe('client-shop-a');
    expect(b.clientId).toBe('client-shop-b');
    expect(a.clientSecret).not.toBe(b.clientSecret);
  });

  it('serves independent data, each equal to a single simulator with the same seed', async () => {
    const { a, b } = await two({ seed: 5 }, { seed: 6 });
    const pagesA = await walk(a.url, await token(a.url, a.credential), { limit: 100 });
    const pagesB = await walk(b.url, await token(b.url, b.credential), { limit: 100 });
    expect(idsOf(pagesA)).toHaveLength(120);
    expect(idsOf(pagesB)).toHaveLength(80);
    expect(pagesA[0]?.reviews[0]).not.toEqual(pagesB[0]?.reviews[0]);

    const alone = await sim({ seed: 5, reviewCount: 120 });
    expect(await walk(alone.url, await token(alone.url), { limit: 100 })).toEqual(pagesA);

    // A review created in one account does not appear in the other.
    await new SimulatorHttpControl(a.url).createReview();
    expect(a.control.reviewCount()).toBe(121);
    expect(b.control.reviewCount()).toBe(80);
  });

  it('refuses one account’s token and credentials on another account', async () => {
    const { a, b } = await two();
    const tokenA = await token(a.url, a.credential);

    expect((await list(a.url, tokenA, { limit: 5 })).status).toBe(200);
    const crossed = await list(b.url, tokenA, { limit: 5 });
    expect(crossed.status).toBe(401);
    expect(crossed.json()).toEqual({ error: 'invalid access token' });
    expect((await requestToken(b.url, a.credential)).status).toBe(401);

    // Revoking one account's tokens leaves the other's valid.
    const tokenB = await token(b.url, b.credential);
    b.control.revokeTokens();
    expect((await list(b.url, tokenB)).status).toBe(401);
    expect((await list(a.url, tokenA)).status).toBe(200);
  });

  it('throttles each account on its own bucket', async () => {
    const { a, b } = await two({ rateLimit: { rps: 0.1, burst: 3, status: 429 } }, { rateLimit: null });
    const tokenA = await token(a.url, a.credential);
    const tokenB = await token(b.url, b.credential);

    const statusesA = [];
    for (let i = 0; i < 4; i++) statusesA.push((await list(a.url, tokenA, { limit: 1 })).status);
    const statusesB = [];
    for (let i = 0; i < 6; i++) statusesB.push((await list(b.url, tokenB, { limit: 1 })).status);

    // The token took one of a's three; two pages pass, then a is throttled while b answers every request.
    expect(statusesA).toEqual([200, 200, 429, 429]);
    expect(statusesB).toEqual([200, 200, 200, 200, 200, 200]);
    expect(a.control.stats().throttled).toBe(2);
    expect(b.control.stats().throttled).toBe(0);

    // The throttle is changed per account too, over that account's control routes.
    await new SimulatorHttpControl(b.url).setRateLimit({ rps: 0.1, burst: 1, status: 503 });
    expect((await list(b.url, tokenB)).status).toBe(200);
    expect((await list(b.url, tokenB)).status).toBe(503);
  });

  it('injects faults only into the account whose control asked', async () => {
    const { a, b } = await two();
    const tokenA = await token(a.url, a.credential);
    const tokenB = await token(b.url, b.credential);

    await new SimulatorHttpControl(a.url).setFaults({ statusFault: { status: 402 } });
    expect((await list(a.url, tokenA)).status).toBe(402);
    expect((await list(b.url, tokenB)).status).toBe(200);

    b.control.setFaults({ statusFault: { status: 404 } });
    await new SimulatorHttpControl(a.url).setFaults({ statusFault: null });
    expect((await list(a.url, tokenA)).status).toBe(200);
    expect((await list(b.url, tokenB)).status).toBe(404);

    // Stats are per account as well: b's control saw only b's requests.
    expect(await new SimulatorHttpControl(b.url).stats()).toMatchObject({ requests: 3, tokensIssued: 1 });
  });

  it('answers 404 JSON for an unknown account and for paths outside /accounts', async () => {
    const { simulator, a } = await two();
    for (const path of ['/accounts/nobody/v1/reviews', '/accounts/nobody/oauth2/token', '/v1/reviews', '/']) {
      const answer = await call(`${simulator.url}${path}`);
      expect(answer.status, path).toBe(404);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.json()).toHaveProperty('error');
    }
    expect((await call(`${simulator.url}/accounts/nobody/oauth2/token`)).json()).toEqual({ error: 'no such account' });
    // Inside a known account the account's own 404 answers.
    expect((await call(`${a.url}/v2/reviews`)).json()).toEqual({ error: 'not found' });
  });

  it('gives the bridge’s upstream client a full pass from an account’s prefixed base URL', async () => {
    const { a, b } = await two({ reviewCount: 230, cursorPath: 'paging.next_page' });
    const client = createUpstreamClient({
      baseUrl: a.url,
      credentials: fileOrEnvCredentials({
        clientId: { value: a.clientId },
        clientSecret: { value: a.clientSecret },
      }),
      backoff: { baseMs: 20, capMs: 200 },
    });
    try {
      const ids: number[] = [];
      for await (const page of client.pages({ kind: 'sweep' })) ids.push(...page.reviews.map((r) => r.id));
      expect(ids).toEqual(Array.from({ length: 230 }, (_, i) => i + 1));
    } finally {
      await client.close();
    }
    // 3 pages and 1 token, all at account a.
    expect(a.control.stats().requests).toBe(4);
    expect(b.control.stats().requests).toBe(0);
  });

  it('seeds accounts without a seed differently', async () => {
    const simulator = await multiSim([
      { id: 'x', options: { rateLimit: null, reviewCount: 3 } },
      { id: 'y', options: { rateLimit: null, reviewCount: 3 } },
    ]);
    const x = account(simulator, 'x');
    const y = account(simulator, 'y');
    const first = async (acct: typeof x): Promise<Envelope> =>
      (await list(acct.url, await token(acct.url, acct.credential))).json() as Envelope;
    expect((await first(x)).reviews).not.toEqual((await first(y)).reviews);
  });
});
