import { describe, expect, it } from 'vitest';
import { ReviewSchema } from '../../../src/core/review.js';
import { SimulatorHttpControl } from '../../../src/simulator/control-client.js';
import { list, sim, token, walk, type Envelope } from './helpers.js';

// Spec, States and transitions: "when the publication status of a review changes, updated_date is set to the time
// of that change"; field notes: edits of other fields do not move it (only a full pass sees them).

describe('changes seen through the listing', () => {
  it('a status change moves updated_date to now and shows in the next incremental query', async () => {
    const simulator = await sim();
    const accessToken = await token(simulator.url);
    const watermark = Date.now();
    const before = simulator.control.get(17) as Record<string, unknown>;
    const after = simulator.control.setStatus(17, { client: 'REJECTED', pwr: 'REJECTED' });
    expect(after.updated_date as number).toBeGreaterThanOrEqual(watermark);
    expect(after.updated_date as number).toBeGreaterThan(before.updated_date as number);

    const page = (await list(simulator.url, accessToken, { updated_date: watermark })).json() as Envelope;
    expect(page.reviews).toEqual([after]);
    expect(page.reviews[0]).toMatchObject({
      client_publication_status: 'REJECTED',
      pwr_publication_status: 'REJECTED',
    });
  });

  it('moves updated_date strictly forward on repeated changes within the same millisecond', async () => {
    const simulator = await sim();
    const stamps = ['APPROVED', 'REJECTED', 'PENDING', 'APPROVED'].map(
      (client) => simulator.control.setStatus(5, { client }).updated_date as number,
    );
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]).toBeGreaterThan(stamps[i - 1] as number);
  });

  it('an edit of other fields keeps updated_date, so incremental queries do not see it but a full pass does', async () => {
    const simulator = await sim();
    const accessToken = await token(simulator.url);
    const watermark = Date.now();
    const before = simulator.control.get(23) as Record<string, unknown>;
    const edited = simulator.control.edit(23, { headline: 'Changed my mind', rating: 1, helpful_votes: 99 });
    expect(edited.updated_date).toBe(before.updated_date);

    const incremental = (await list(simulator.url, accessToken, { updated_date: watermark })).json() as Envelope;
    expect(incremental.count).toBe(0);
    const full = (await walk(simulator.url, accessToken)).flatMap((p) => p.reviews);
    expect(full.find((r) => r.id === 23)).toMatchObject({ headline: 'Changed my mind', rating: 1, helpful_votes: 99 });
  });

  it('refuses to edit id, updated_date or the statuses (they have their own rules)', async () => {
    const simulator = await sim();
    for (const field of ['id', 'updated_date', 'client_publication_status', 'pwr_publication_status']) {
      expect(() => simulator.control.edit(3, { [field]: 1 })).toThrow(field);
    }
    expect(() => simulator.control.setStatus(3, {})).toThrow();
    expect(() => simulator.control.setStatus(9999, { client: 'APPROVED' })).toThrow(/9999/);
  });

  it('a created review gets the next id, updated_date now, and appears in the incremental query and full pass', async () => {
    const simulator = await sim({ reviewCount: 120 });
    const accessToken = await token(simulator.url);
    const watermark = Date.now();
    const created = simulator.control.createReview({ headline: 'Brand new', rating: 5 });
    expect(created).toMatchObject({ id: 121, headline: 'Brand new', rating: 5, type: 'Review' });
    expect(created.updated_date as number).toBeGreaterThanOrEqual(watermark);
    expect(ReviewSchema.safeParse(created).success).toBe(true);
    expect(simulator.control.reviewCount()).toBe(121);

    const incremental = (await list(simulator.url, accessToken, { updated_date: watermark })).json() as Envelope;
    expect(incremental.reviews.map((r) => r.id)).toEqual([121]);
    const full = await walk(simulator.url, accessToken);
    expect(full.flatMap((p) => p.reviews).at(-1)).toEqual(created);
  });

  it('get returns what the listing serves, and null for an unknown id', async () => {
    const simulator = await sim({ reviewCount: 10 });
    const page = (await list(simulator.url, await token(simulator.url))).json() as Envelope;
    expect(page.reviews[3]).toEqual(simulator.control.get(4));
    expect(simulator.control.get(11)).toBeNull();
    expect(simulator.control.get(0)).toBeNull();
  });
});

describe('the data clock and late-visible changes', () => {
  for (const offsetMs of [-300_000, 300_000]) {
    it(`stamps changes and creations ${offsetMs / 60_000} min from its Date headers' clock`, async () => {
      const simulator = await sim({ dataClockOffsetMs: offsetMs, clockSkewMs: 120_000 });
      const accessToken = await token(simulator.url);
      const changed = simulator.control.setStatus(9, { client: 'REJECTED' });
      const created = simulator.control.createReview();
      const answer = await list(simulator.url, accessToken, { updated_date: (changed.updated_date as number) - 1 });
      // Date headers have a resolution of a second; the stamps follow the data clock, skewed from them by the offset.
      const header = Date.parse(answer.headers.date as string);
      for (const stamp of [changed.updated_date as number, created.updated_date as number]) {
        expect(Math.abs(stamp - offsetMs - header)).toBeLessThan(3_000);
      }
      expect(Math.abs(header - 120_000 - Date.now())).toBeLessThan(3_000);
      expect((answer.json() as Envelope).reviews.map((r) => r.id)).toEqual([9, created.id]);
    });
  }

  it('lists a status change stamped in the past (over HTTP control) to a query from before its stamp', async () => {
    const simulator = await sim();
    const control = new SimulatorHttpControl(simulator.url);
    const accessToken = await token(simulator.url);
    const recent = simulator.control.setStatus(30, { client: 'REJECTED' });
    const late = await control.setStatusLate(31, { client: 'REJECTED' }, 20_000);
    expect(late.updated_date as number).toBeLessThan((recent.updated_date as number) - 15_000);
    const since = (bound: number) =>
      list(simulator.url, accessToken, { updated_date: bound }).then((a) => (a.json() as Envelope).reviews);
    expect((await since((late.updated_date as number) - 1)).map((r) => r.id)).toEqual([30, 31]);
    expect((await since((late.updated_date as number) + 1)).map((r) => r.id)).toEqual([30]);
    // A negative lateness stamps the change ahead of the service's time (a writer whose clock runs fast).
    const before = Date.now();
    const ahead = await control.setStatusLate(31, { client: 'APPROVED' }, -240_000);
    expect(ahead.updated_date as number).toBeGreaterThanOrEqual(before + 240_000);
    await expect(control.setStatusLate(31, { client: 'PENDING' }, 'soon' as unknown as number)).rejects.toThrow(
      /lateByMs/,
    );
  });
});
