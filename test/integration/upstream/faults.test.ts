import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { UpstreamError, isUpstreamError } from '../../../src/upstream/errors.js';
import { drain, failure, range, testClient, perTestResources } from './helpers.js';
import { waitFor } from '../../helpers/processes.js';

// Faults over real HTTP: injected 5xx, truncated and oversized bodies, malformed records, unasked compression.

const { simulator, track } = perTestResources();

describe('upstream client faults (simulator)', () => {
  it('retries injected 5xx answers and truncated bodies until the pass completes', async () => {
    const sim = await simulator({
      reviewCount: 1000,
      rateLimit: null,
      faults: { errorRate: 0.25, errorStatuses: [500, 502, 504], truncateRate: 0.2 },
    });
    const { client, log } = track(testClient(sim.url, { pageSize: 50, rateLimitRps: 100, maxRetries: 10 }));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(1000));
    const stats = sim.control.stats();
    const serverErrors = (stats.byStatus['500'] ?? 0) + (stats.byStatus['502'] ?? 0) + (stats.byStatus['504'] ?? 0);
    expect(serverErrors).toBeGreaterThan(0);
    const reasons = new Set(log.retries.map((r) => r.reason));
    expect(reasons.has('truncated') || reasons.has('unparsable') || reasons.has('decode')).toBe(true);
    expect([...reasons].some((r) => /^status_50[024]$/.test(r))).toBe(true);
    // Every failed attempt was retried, none was given up on.
    expect(log.retries.length).toBe(stats.requests - 20 - stats.tokensIssued);
  });

  it('gives up after maxRetries with a typed error that says what happened and leaks no secret', async () => {
    const sim = await simulator({ rateLimit: null, faults: { errorRate: 1, errorStatuses: [500] } });
    const { client, log } = track(testClient(sim.url, { maxRetries: 3 }));

    const err = await failure(drain(client));

    expect(isUpstreamError(err, 'server')).toBe(true);
    const e = err as UpstreamError;
    expect(e.attempts).toBe(4);
    expect(e.status).toBe(500);
    expect(e.message).toMatch(/listing reviews \(sweep pass, first page\): review listing answered 500/);
    expect(e.message).toMatch(/gave up after 4 attempts/);
    expect(e.message).not.toContain('demo-secret');
    expect(e.message).not.toMatch(/bearer\s+\S{8,}/i);
    expect(JSON.stringify({ message: e.message, stack: e.stack })).not.toContain('demo-secret');
    expect(sim.control.stats().byStatus['500']).toBe(4);
    expect(log.retries).toHaveLength(3);
  });

  it('separates malformed records from valid ones, page by page', async () => {
    const sim = await simulator({ reviewCount: 500, rateLimit: null, faults: { malformedRate: 0.1 } });
    const { client, log } = track(testClient(sim.url, { pageSize: 100 }));

    const pass = await drain(client);

    expect(pass.rejects.length).toBeGreaterThan(10);
    expect(pass.reviews.length + pass.rejects.length).toBe(500);
    expect(pass.pages).toHaveLength(5);
    expect(new Set(pass.rejects.map((r) => r.reason))).toEqual(new Set(['schema']));
    const details = new Set(pass.rejects.map((r) => r.detail));
    for (const detail of details) {
      expect(['id:invalid_type', 'updated_date:invalid_type', 'client_publication_status:invalid_type']).toContain(
        detail,
      );
    }
    // Ids stay readable for the dead-letter key except where the id itself is the broken field.
    expect(pass.rejects.filter((r) => r.detail !== 'id:invalid_type').every((r) => r.id !== null)).toBe(true);
    expect(log.rejects).toHaveLength(pass.rejects.length);
    expect(log.retries).toEqual([]);
  });

  it('asks for smaller pages when a body exceeds the cap, and refuses a single review over it (too_large)', async () => {
    // 100 records padded with 20 kB each decode to about 2 MB; the cap is 512 KiB. The simulator gzips the page,
    // so the wire size stays small: only counting decoded bytes catches it. Halving: 100 and 50 refused, 25 served.
    const sim = await simulator({ reviewCount: 300, rateLimit: null, faults: { padBytes: 20_000 } });
    const { client, log } = track(testClient(sim.url, { maxBodyBytes: 512 * 1024 }));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(300));
    expect(Math.max(...pass.pages.map((p) => p.reviews.length))).toBe(25);
    expect(log.pageShrinks.length).toBeGreaterThanOrEqual(2);
    expect(new Set(log.pageShrinks)).toEqual(new Set(['too_large']));

    // One review alone over the cap cannot be served at all: a clear error, not a loop.
    sim.control.setFaults({ padBytes: 600_000 });
    const err = await failure(drain(client));
    expect(isUpstreamError(err, 'too_large')).toBe(true);
    expect(err.message).toMatch(/response too large: decoded body exceeds the 524288-byte cap \(maxBodyBytes\)/);
    expect(err.message).toMatch(/limit 1\)/);
  });

  it('decodes a gzip body the client did not ask for', async () => {
    const sim = await simulator({ reviewCount: 300, rateLimit: null, compression: 'always' });
    // Precondition: asked for identity, the simulator still answers gzip.
    const grant = await request(`${sim.url}/oauth2/token?grant_type=client_credentials`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('demo-client:demo-secret').toString('base64')}` },
    });
    const { access_token } = (await grant.body.json()) as { access_token: string };
    const raw = await request(`${sim.url}/v1/reviews?limit=1`, {
      headers: { 'accept-encoding': 'identity', authorization: `Bearer ${access_token}` },
    });
    await raw.body.dump();
    expect(raw.statusCode).toBe(200);
    expect(raw.headers['content-encoding']).toBe('gzip');

    const { client } = track(testClient(sim.url, { requestCompression: false, pageSize: 100 }));
    const pass = await drain(client);
    expect(pass.reviews.map((r) => r.id)).toEqual(range(300));
  });

  it('converts updatedSince (ms) to seconds when the upstream counts in seconds', async () => {
    const sim = await simulator({ reviewCount: 50, rateLimit: null, updatedDateUnit: 's' });
    const before = Date.now();
    // The upstream counts whole seconds: the review must be made in a later second than `before`.
    await waitFor(
      () => (Math.floor(Date.now() / 1000) > Math.floor(before / 1000) ? true : undefined),
      5_000,
      'the next second',
      10,
    );
    const created = sim.control.createReview();
    const { client } = track(testClient(sim.url, { updatedDateUnit: 's' }));

    const pass = await drain(client, { updatedSince: before, kind: 'incremental' });

    expect(pass.reviews.map((r) => r.id)).toEqual([created.id]);
  });
});
