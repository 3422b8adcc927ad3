import { describe, expect, it } from 'vitest';
import { list, sim, token, type Envelope } from './helpers.js';

// Spec, List reviews: limit is 1 to 100, default 100; Errors: a 400 carries a JSON error message.

describe('GET /v1/reviews limit', () => {
  it('returns 100 reviews without limit, with count matching the array', async () => {
    const { url } = await sim();
    const page = (await list(url, await token(url))).json() as Envelope;
    expect(page.count).toBe(100);
    expect(page.reviews).toHaveLength(100);
  });

  it('returns exactly limit reviews for 1 and 100', async () => {
    const { url } = await sim();
    const accessToken = await token(url);
    for (const limit of [1, 37, 100]) {
      const page = (await list(url, accessToken, { limit })).json() as Envelope;
      expect(page.reviews).toHaveLength(limit);
      expect(page.count).toBe(limit);
    }
  });

  it('answers 400 with a JSON error for 0, 101, -1, 1.5, abc and an empty value', async () => {
    const { url } = await sim();
    const accessToken = await token(url);
    for (const limit of ['0', '101', '-1', '1.5', 'abc', '']) {
      const answer = await list(url, accessToken, { limit });
      expect(answer.status, `limit=${limit}`).toBe(400);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.json()).toEqual({ error: expect.stringContaining('limit') });
    }
  });

  it('returns fewer reviews than the limit on a short last page', async () => {
    const { url } = await sim({ reviewCount: 30 });
    const page = (await list(url, await token(url), { limit: 100 })).json() as Envelope;
    expect(page.count).toBe(30);
    expect(page.next_page).toBeUndefined();
  });

  it('serves an empty listing when there are no reviews', async () => {
    const { url } = await sim({ reviewCount: 0 });
    expect((await list(url, await token(url))).json()).toEqual({ count: 0, reviews: [] });
  });
});
