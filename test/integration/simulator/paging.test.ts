import { describe, expect, it } from 'vitest';
import { idsOf, list, sim, token, walk, type Envelope } from './helpers.js';

// Spec, List reviews: next_page is "an ID that marks the beginning of the next page in the stream". The simulator
// puts the id of the next page's first review there (as a string), at a configurable place in the envelope.

describe('GET /v1/reviews cursor', () => {
  it('walks every review exactly once, in ascending id order, and the last page has no cursor', async () => {
    const { url } = await sim({ reviewCount: 250 });
    const pages = await walk(url, await token(url));
    expect(pages.map((p) => p.count)).toEqual([100, 100, 50]);
    expect(idsOf(pages)).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
    expect(pages.at(-1)).not.toHaveProperty('next_page');
  });

  it('makes the cursor the id of the first review of the next page, as a string', async () => {
    const { url } = await sim();
    const accessToken = await token(url);
    const first = (await list(url, accessToken, { limit: 10 })).json() as Envelope;
    expect(first.next_page).toBe('11');
    const second = (
      await list(url, accessToken, { limit: 10, next_page: first.next_page as string })
    ).json() as Envelope;
    expect(second.reviews[0]?.id).toBe(11);
  });

  it('ends exactly at a page boundary without an empty extra page', async () => {
    const { url } = await sim({ reviewCount: 200 });
    const pages = await walk(url, await token(url));
    expect(pages.map((p) => p.count)).toEqual([100, 100]);
  });

  it('does not sort by updated_date (clients must not assume an order beyond the cursor)', async () => {
    const { url } = await sim();
    const page = (await list(url, await token(url))).json() as Envelope;
    const dates = page.reviews.map((r) => r.updated_date as number);
    expect(dates).not.toEqual([...dates].sort((a, b) => a - b));
  });

  it('answers 400 with a JSON error for an unknown cursor', async () => {
    const { url } = await sim({ reviewCount: 250 });
    const accessToken = await token(url);
    for (const cursor of ['0', '-5', 'abc', '12x', '251', '']) {
      const answer = await list(url, accessToken, { next_page: cursor });
      expect(answer.status, `next_page=${cursor}`).toBe(400);
      expect(answer.json()).toEqual({ error: expect.stringContaining('next_page') });
    }
  });

  it('puts the cursor at a nested cursorPath and leaves it out on the last page', async () => {
    const { url } = await sim({ reviewCount: 150, cursorPath: 'paging.next_page' });
    const accessToken = await token(url);
    const first = (await list(url, accessToken)).json() as Envelope & { paging: { next_page: string } };
    expect(first).not.toHaveProperty('next_page');
    expect(first.paging).toEqual({ next_page: '101' });
    const last = (await list(url, accessToken, { next_page: first.paging.next_page })).json() as Envelope;
    expect(last.count).toBe(50);
    expect(last).not.toHaveProperty('paging');
  });

  it('can send an explicit null cursor on the last page', async () => {
    const { url } = await sim({ reviewCount: 150, lastPageCursor: 'null', cursorPath: 'meta.next' });
    const accessToken = await token(url);
    const last = (await list(url, accessToken, { next_page: '101' })).json() as Envelope;
    expect(last.meta).toEqual({ next: null });
  });

  it('serves reviews created during a pass later in that same pass, under new higher ids', async () => {
    const simulator = await sim({ reviewCount: 150 });
    const accessToken = await token(simulator.url);
    const first = (await list(simulator.url, accessToken)).json() as Envelope;
    const created = simulator.control.createReview();
    expect(created.id).toBe(151);
    const rest = (await list(simulator.url, accessToken, { next_page: first.next_page as string })).json() as Envelope;
    expect(rest.reviews.map((r) => r.id).slice(-2)).toEqual([150, 151]);
    expect(rest.next_page).toBeUndefined();
  });
});
