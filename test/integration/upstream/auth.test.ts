import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator } from '../../../src/simulator/index.js';
import type { Simulator } from '../../../src/simulator/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/upstream/client.js';
import { fileOrEnvCredentials } from '../../../src/upstream/credentials.js';
import { UpstreamError, isUpstreamError } from '../../../src/upstream/errors.js';
import { drain, failure, range, recordingHooks, testClient } from './helpers.js';
import { pollUntil } from '../../helpers/wait.js';

// Tokens against the simulator over real HTTP: expiry within a pass, revocation, scope, refused and rotated secrets.

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function simulator(opts: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const sim = await startSimulator(opts);
  cleanup.push(() => sim.close());
  return sim;
}

function track(client: UpstreamClient): UpstreamClient {
  cleanup.push(() => client.close());
  return client;
}

describe('upstream client tokens (simulator)', () => {
  it('refreshes a token that expires in the middle of a long pass, without a failed request', async () => {
    // Tokens live 3 s; 35 pages at 10 requests/s take about 3.5 s, so the pass outlives its first token.
    const sim = await simulator({ reviewCount: 350, tokenTtlSeconds: 3, rateLimit: null });
    const { client, log } = testClient(sim.url, { pageSize: 10, rateLimitRps: 10, tokenRefreshMarginSeconds: 1 });
    track(client);

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(350));
    const stats = sim.control.stats();
    expect(stats.tokensIssued).toBeGreaterThanOrEqual(2);
    // Refreshed ahead of expiry: no request carried an expired token.
    expect(stats.byStatus['401']).toBeUndefined();
    expect(log.tokenRefreshes).toEqual(Array(stats.tokensIssued).fill('ok'));
    expect(log.retries).toEqual([]);
  });

  it('answers a 401 mid-pass (revoked tokens) with one refresh and one retry', async () => {
    const sim = await simulator({ reviewCount: 500, rateLimit: null });
    const { client, log } = testClient(sim.url, { pageSize: 50 });
    track(client);

    const pass = await drain(client, {}, (index) => {
      // Requests are sequential (one prefetch at most), so whichever comes next meets the revoked token alone.
      if (index === 2) sim.control.revokeTokens();
    });

    expect(pass.reviews.map((r) => r.id)).toEqual(range(500));
    const stats = sim.control.stats();
    expect(stats.byStatus['401']).toBe(1);
    expect(stats.tokensIssued).toBe(2);
    expect(log.retries).toEqual([{ endpoint: 'reviews', reason: 'status_401' }]);
  });

  it('surfaces a 403 as a typed, non-retried scope error', async () => {
    const sim = await simulator({ rateLimit: null });
    const { client } = testClient(sim.url, {}, { clientId: 'scopeless-client', clientSecret: 'scopeless-secret' });
    track(client);

    const err = await failure(drain(client));

    expect(isUpstreamError(err, 'scope')).toBe(true);
    expect((err as UpstreamError).status).toBe(403);
    expect(err.message).toMatch(/403.*scope/);
    expect(sim.control.stats().byStatus['403']).toBe(1);
  });

  it('reports refused credentials as an auth error without retrying or echoing the secret', async () => {
    const sim = await simulator({ rateLimit: null });
    const { client, log } = testClient(sim.url, {}, { clientId: 'demo-client', clientSecret: 'Wrong-Secret-123' });
    track(client);

    const err = await failure(client.checkCredentials());

    expect(isUpstreamError(err, 'auth')).toBe(true);
    expect(err.message).toMatch(/refused the client credentials \(401\)/);
    expect(err.message).not.toContain('Wrong-Secret-123');
    expect(sim.control.stats().byStatus['401']).toBe(1);
    expect(log.tokenRefreshes).toEqual(['unauthorized']);
  });

  it('picks up a rotated secret file on the next token fetch, without a restart', async () => {
    const sim = await simulator({ rateLimit: null });
    const dir = await mkdtemp(join(tmpdir(), 'rotate-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const secretFile = join(dir, 'client_secret');
    await writeFile(secretFile, 'old-secret\n');
    const { hooks } = recordingHooks();
    const client = track(
      createUpstreamClient(
        {
          baseUrl: sim.url,
          credentials: fileOrEnvCredentials({ clientId: { value: 'demo-client' }, clientSecret: { file: secretFile } }),
        },
        hooks,
      ),
    );

    expect(isUpstreamError(await failure(client.checkCredentials()), 'auth')).toBe(true);
    await writeFile(secretFile, 'demo-secret\n');
    // A refusal is remembered for a few seconds (the token pace of refused credentials), then the file is read again.
    await pollUntil(
      () =>
        client.checkCredentials().then(
          () => true,
          () => undefined,
        ),
      {
        timeoutMs: 30_000,
        what: 'the rotated secret to be accepted',
        intervalMs: 250,
      },
    );
    const pass = await drain(client);
    expect(pass.reviews).toHaveLength(1000);
  });
});
