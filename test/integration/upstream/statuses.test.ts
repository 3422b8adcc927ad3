import { describe, expect, it } from 'vitest';
import { isUpstreamError, type UpstreamError } from '../../../src/upstream/errors.js';
import { drain, failure, range, testClient, perTestResources } from './helpers.js';

// Every status of the spec's error table handled on purpose, a page the upstream cannot serve, and the poisoned
// records of issue 9, all against the simulator over real HTTP.

const { simulator, track } = perTestResources();

describe('a page the upstream cannot serve', () => {
  it('is asked for again with half the limit; the page after it with the full limit', async () => {
    // Without compression the simulator refuses a body over its payload limit with a 400 asking for a smaller
    // limit. One review of 60 kB puts its page of 100 over 100 kB; half of it (50 reviews) fits.
    const sim = await simulator({
      reviewCount: 300,
      rateLimit: null,
      payloadLimitBytes: 100_000,
      compression: 'never',
    });
    sim.control.edit(150, { comments: 'x'.repeat(60_000) });
    const { client, log } = track(testClient(sim.url, { pageSize: 100 }));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(300));
    expect(pass.pages.map((p) => p.reviews.length)).toEqual([100, 50, 100, 50]);
    expect(log.pageShrinks).toEqual(['status_400']);
    expect(sim.control.stats().byStatus['400']).toBe(1);
  });

  it('is a too_large error when even one review is over the payload limit', async () => {
    const sim = await simulator({ reviewCount: 20, rateLimit: null, payloadLimitBytes: 50_000, compression: 'never' });
    sim.control.edit(7, { comments: 'x'.repeat(60_000) });
    const { client } = track(testClient(sim.url, { pageSize: 8 }));

    const err = (await failure(drain(client))) as UpstreamError;

    expect(isUpstreamError(err, 'too_large')).toBe(true);
    expect(err.message).toMatch(/cannot serve even a page of one review/);
    // Pages 1-4 (after 8 was refused) and 5-6 (after 8 and 4), then at review 7: 8, 4, 2 and 1 all refused. No
    // refusal is retried as if it were transient.
    expect(sim.control.stats().byStatus['400']).toBe(1 + 2 + 4);
  });
});

describe('the spec error table', () => {
  it('202: waits (Retry-After) and asks again instead of reading it as a page', async () => {
    const sim = await simulator({
      reviewCount: 30,
      rateLimit: null,
      faults: { statusFault: { status: 202, times: 2, retryAfterSeconds: 0 } },
    });
    const { client, log } = track(testClient(sim.url, { pageSize: 10 }));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(30));
    expect(log.retries.filter((r) => r.reason === 'status_202')).toHaveLength(2);
    expect(sim.control.stats().byStatus['202']).toBe(2);
  });

  it('202 for longer than the retries allow: a not_ready error, the pass fails without reading a page', async () => {
    const sim = await simulator({ reviewCount: 30, rateLimit: null, faults: { statusFault: { status: 202 } } });
    const { client } = track(testClient(sim.url, { maxRetries: 2 }));

    const err = (await failure(drain(client))) as UpstreamError;

    expect(isUpstreamError(err, 'not_ready')).toBe(true);
    expect(err.attempts).toBe(3);
    expect(err.message).toMatch(/answered 202 \(accepted, not ready yet\)/);
  });

  it('400 on a checkpointed sweep cursor: a cursor_invalid error the sweep can restart on', async () => {
    const sim = await simulator({
      reviewCount: 300,
      rateLimit: null,
      faults: { statusFault: { status: 400, cursorOnly: true } },
    });
    const { client } = track(testClient(sim.url, { pageSize: 100 }));

    const err = (await failure(drain(client, { kind: 'sweep', cursor: '101' }))) as UpstreamError;

    expect(isUpstreamError(err, 'cursor_invalid')).toBe(true);
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/refused the cursor \(expired or invalid\)/);
    // 100, 50, 25, 12, 6, 3, 1: first ruled out that the page was merely too large.
    expect(sim.control.stats().byStatus['400']).toBe(7);
    // Restarting without the cursor works (the first page needs none).
    sim.control.setFaults({ statusFault: null });
    expect((await drain(client, { kind: 'sweep' })).reviews).toHaveLength(300);
  });

  it('402: a typed account error, not retried', async () => {
    const sim = await simulator({ reviewCount: 10, rateLimit: null, faults: { statusFault: { status: 402 } } });
    const { client, log } = track(testClient(sim.url));

    const err = (await failure(drain(client))) as UpstreamError;

    expect(isUpstreamError(err, 'account')).toBe(true);
    expect(err.status).toBe(402);
    expect(err.message).toMatch(/402 \(2FA token required\)/);
    expect(sim.control.stats().byStatus['402']).toBe(1);
    expect(log.retries).toEqual([]);
  });

  it('404 on the listing: a configuration error naming UPSTREAM_BASE_URL, not retried', async () => {
    const sim = await simulator({ reviewCount: 10, rateLimit: null, faults: { statusFault: { status: 404 } } });
    const { client, log } = track(testClient(sim.url));

    const err = (await failure(drain(client))) as UpstreamError;

    expect(isUpstreamError(err, 'config')).toBe(true);
    expect(err.message).toMatch(/404 \(not found\): check UPSTREAM_BASE_URL \(the bridge calls <base>\/v1\/reviews\)/);
    expect(sim.control.stats().byStatus['404']).toBe(1);
    expect(log.retries).toEqual([]);
  });
});

describe('poisoned records (issue 9)', () => {
  it('are rejected one by one with their kind; the rest of the page is served', async () => {
    const sim = await simulator({ reviewCount: 40, rateLimit: null });
    const since = Date.now() - 1000;
    const poisoned = sim.control.addPoisonReviews();
    sim.control.setStatus(3, { client: 'REJECTED' });
    const { client, log } = track(testClient(sim.url));

    const pass = await drain(client, { kind: 'incremental', updatedSince: since });

    expect(pass.reviews.map((r) => r.id)).toEqual([3]);
    expect(pass.rejects.map((r) => [r.id, r.reason])).toEqual([
      [String(poisoned[0]!.id), 'string_too_long'],
      [String(poisoned[1]!.id), 'date_out_of_range'],
      [String(poisoned[2]!.id), 'date_out_of_range'],
      [String(poisoned[3]!.id), 'too_deep'],
      [String(poisoned[4]!.id), 'forbidden_key'],
    ]);
    expect(pass.rejects.map((r) => r.detail)).toEqual([
      'comments:string_too_long',
      'updated_date:date_out_of_range',
      'created_date:date_out_of_range',
      '(unknown field):too_deep',
      '(unknown field):forbidden_key',
    ]);
    expect(log.rejects).toEqual(pass.rejects.map((r) => r.reason));
  });
});
