import { describe, expect, it } from 'vitest';
import { getEventListeners } from 'node:events';
import { drain, range, testClient, perTestResources } from './helpers.js';

// Cursor shapes the spec leaves open, followed over real HTTP against the simulator.

const { simulator, track } = perTestResources();

describe('upstream client pagination (simulator)', () => {
  it('follows a top-level next_page cursor (detected) to the end', async () => {
    const sim = await simulator({ reviewCount: 730, rateLimit: null });
    const { client } = track(testClient(sim.url));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(730));
    expect(pass.pages.map((p) => p.cursor)).toEqual([null, '101', '201', '301', '401', '501', '601', '701']);
    expect(pass.pages.at(-1)!.nextCursor).toBeNull();
    // 8 pages and 1 token: the last page has no cursor, so nothing is fetched past it.
    expect(sim.control.stats().requests).toBe(9);
  });

  it('detects a nested paging.next_page cursor with an explicit null on the last page', async () => {
    const sim = await simulator({
      reviewCount: 250,
      rateLimit: null,
      cursorPath: 'paging.next_page',
      lastPageCursor: 'null',
    });
    const { client } = track(testClient(sim.url));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(250));
    expect(pass.pages).toHaveLength(3);
  });

  it('reads a configured nested cursor path', async () => {
    const sim = await simulator({ reviewCount: 120, rateLimit: null, cursorPath: 'meta.paging.after' });
    const { client } = track(testClient(sim.url, { cursorPath: 'meta.paging.after', pageSize: 25 }));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual(range(120));
    expect(pass.pages).toHaveLength(5);
  });

  it('resumes from a start cursor and stamps each page with its fetch time', async () => {
    const sim = await simulator({ reviewCount: 300, rateLimit: null });
    const { client } = track(testClient(sim.url));
    const before = Date.now();

    const pass = await drain(client, { cursor: '201' });

    expect(pass.reviews.map((r) => r.id)).toEqual(range(300).slice(200));
    expect(pass.pages[0]!.cursor).toBe('201');
    expect(pass.pages[0]!.fetchedAt).toBeGreaterThanOrEqual(before);
  });

  it("leaves no listener on the caller's long-lived signal after its passes (months of polls, no leak)", async () => {
    const sim = await simulator({ reviewCount: 300, rateLimit: null });
    const { client } = track(testClient(sim.url, { rateLimitRps: 100 }));
    const shutdown = new AbortController();

    for (let i = 0; i < 5; i++) await drain(client, { signal: shutdown.signal });
    for await (const _page of client.pages({ kind: 'sweep', signal: shutdown.signal })) break;

    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
  });

  it('stops on an empty page (an incremental poll with nothing new)', async () => {
    const sim = await simulator({ reviewCount: 100, rateLimit: null });
    const { client } = track(testClient(sim.url));

    const pass = await drain(client, { updatedSince: Date.now() + 60_000, kind: 'incremental' });

    expect(pass.pages).toEqual([]);
  });

  it('sees a status change through an incremental poll', async () => {
    const sim = await simulator({ reviewCount: 100, rateLimit: null });
    const since = Date.now();
    sim.control.setStatus(42, { client: 'REJECTED', pwr: 'REJECTED' });
    const { client } = track(testClient(sim.url));

    const pass = await drain(client, { updatedSince: since, kind: 'incremental' });

    expect(pass.reviews.map((r) => [r.id, r.client_publication_status])).toEqual([[42, 'REJECTED']]);
  });
});
