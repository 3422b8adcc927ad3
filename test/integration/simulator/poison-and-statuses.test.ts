import { describe, expect, it } from 'vitest';
import { SimulatorControlError, SimulatorHttpControl, POISON_KINDS } from '../../../src/simulator/index.js';
import { POISON_NESTING_DEPTH, POISON_TEXT_LENGTH } from '../../../src/simulator/faults.js';
import { list, sim, token, type Envelope } from './helpers.js';

// The contract of two fault families: poisoned reviews (valid JSON, absurd content: issue 9) and the statuses of
// the spec's error table answered on purpose (202, 400 for a cursor, 402, 404).

/** Depth of nested objects under `value`, counted without recursion. */
function depthOf(value: unknown): number {
  let depth = 0;
  let node = value;
  while (node !== null && typeof node === 'object') {
    depth += 1;
    node = Object.values(node as Record<string, unknown>)[0];
  }
  return depth;
}

describe('poisoned reviews', () => {
  it('are added to a running simulator over HTTP, listed to incremental polls, and healed on request', async () => {
    const simulator = await sim({ reviewCount: 50 });
    const control = new SimulatorHttpControl(simulator.url);
    const since = Date.now() - 1000;
    const added = await control.addPoisonReviews();
    expect(added.map((p) => p.kind)).toEqual([...POISON_KINDS]);
    expect(added.map((p) => p.id)).toEqual([51, 52, 53, 54, 55]);

    const accessToken = await token(simulator.url);
    const answer = await list(simulator.url, accessToken, { updated_date: since });
    expect(answer.status).toBe(200);
    // On the wire: the keys are in the JSON text (JSON.parse then makes them own properties, never a prototype).
    expect(answer.text).toContain('"__proto__":{"polluted":true');
    expect(answer.text).toContain('"constructor":{"prototype":{"polluted":true}}');
    const page = answer.json() as Envelope;
    const byId = new Map(page.reviews.map((r) => [r.id as number, r]));
    expect(byId.size).toBe(5);
    expect((byId.get(51)!.comments as string).length).toBe(POISON_TEXT_LENGTH);
    expect(byId.get(52)!.updated_date).toBe(2 ** 50);
    expect(byId.get(53)!.created_date).toBe(1e16);
    expect(depthOf(byId.get(54)!.deep_unknown_field)).toBe(POISON_NESTING_DEPTH - 1);
    expect(Object.keys(byId.get(55)!)).toEqual(expect.arrayContaining(['__proto__', 'constructor']));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // Everything else stays a normal review.
    for (const r of page.reviews) expect(typeof r.client_publication_status).toBe('string');

    await control.setFaults({ poison: [] });
    const healed = (await list(simulator.url, accessToken, { updated_date: since })).json() as Envelope;
    expect(healed.reviews.every((r) => typeof r.comments !== 'string' || r.comments.length < 10_000)).toBe(true);
    expect(healed.reviews.map((r) => r.updated_date).every((d) => (d as number) < 2 ** 48)).toBe(true);
  });

  it('adds only the kinds asked for, and refuses an unknown kind without creating anything', async () => {
    const simulator = await sim({ reviewCount: 10 });
    const control = new SimulatorHttpControl(simulator.url);
    expect(await control.addPoisonReviews(['far-created'])).toEqual([{ id: 11, kind: 'far-created' }]);
    await expect(control.addPoisonReviews(['nope' as 'far-created'])).rejects.toBeInstanceOf(SimulatorControlError);
    expect(await control.reviewCount()).toBe(11);
    expect(simulator.control.get(11)!.created_date).not.toBe(1e16); // poisoned when served, not stored
  });
});

describe('status faults', () => {
  it('202 for the given number of requests, with Retry-After, then pages again', async () => {
    const simulator = await sim({ faults: { statusFault: { status: 202, times: 2, retryAfterSeconds: 1 } } });
    const accessToken = await token(simulator.url);
    const first = await list(simulator.url, accessToken);
    expect(first.status).toBe(202);
    expect(first.headers['retry-after']).toBe('1');
    expect((await list(simulator.url, accessToken)).status).toBe(202);
    expect((await list(simulator.url, accessToken)).status).toBe(200);
    expect(simulator.control.stats().byStatus).toMatchObject({ '202': 2, '200': 2 });
  });

  it('400 only for requests with a cursor (an expired or invalid cursor)', async () => {
    const simulator = await sim({ faults: { statusFault: { status: 400, cursorOnly: true } } });
    const accessToken = await token(simulator.url);
    expect((await list(simulator.url, accessToken, { limit: 10 })).status).toBe(200);
    const refused = await list(simulator.url, accessToken, { limit: 10, next_page: '11' });
    expect(refused.status).toBe(400);
    expect(refused.json()).toEqual({ error: 'next_page cursor is invalid or has expired' });
  });

  it.each([
    [402, '2FA token required: retry with the header CB-2FA-Token'],
    [404, 'not found'],
  ])('%i until cleared', async (status, error) => {
    const simulator = await sim();
    simulator.control.setFaults({ statusFault: { status } });
    const accessToken = await token(simulator.url);
    for (let i = 0; i < 3; i++) expect((await list(simulator.url, accessToken)).json()).toEqual({ error });
    simulator.control.setFaults({ statusFault: null });
    expect((await list(simulator.url, accessToken)).status).toBe(200);
  });

  it('refuses an invalid status fault, naming it', async () => {
    const simulator = await sim();
    expect(() => simulator.control.setFaults({ statusFault: { status: 99 } })).toThrow(/faults\.statusFault\.status/);
  });
});
