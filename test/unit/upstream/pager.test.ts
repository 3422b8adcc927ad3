import { describe, expect, it } from 'vitest';
import { paginate, type FetchedPage } from '../../../src/upstream/pager.js';
import { isUpstreamError } from '../../../src/upstream/errors.js';

/** A scripted listing: cursor -> [recordCount, nextCursor]. */
function script(chain: Record<string, [number, string | null]>) {
  const calls: (string | null)[] = [];
  const inFlight = { now: 0, max: 0 };
  const fetcher = async (cursor: string | null, signal: AbortSignal): Promise<FetchedPage> => {
    calls.push(cursor);
    inFlight.now += 1;
    inFlight.max = Math.max(inFlight.max, inFlight.now);
    try {
      // A fetch that answers on a later turn of the event loop, so that concurrent fetches would overlap.
      await new Promise((r) => setImmediate(r));
      if (signal.aborted) throw signal.reason;
      const entry = chain[cursor ?? 'START'];
      if (!entry) throw new Error(`unexpected cursor ${cursor}`);
      const [count, next] = entry;
      return { cursor, nextCursor: next, reviews: [], rejects: [], fetchedAt: 0, recordCount: count };
    } finally {
      inFlight.now -= 1;
    }
  };
  return { fetcher, calls, inFlight };
}

async function collect(iterable: AsyncIterable<{ cursor: string | null }>): Promise<(string | null)[]> {
  const cursors: (string | null)[] = [];
  for await (const page of iterable) cursors.push(page.cursor);
  return cursors;
}

describe('paginate', () => {
  it('follows the chain until a page has no cursor', async () => {
    const s = script({ START: [2, 'b'], b: [2, 'c'], c: [1, null] });
    expect(await collect(paginate(s.fetcher, { start: null }))).toEqual([null, 'b', 'c']);
    expect(s.calls).toEqual([null, 'b', 'c']);
  });

  it('stops on an empty page without yielding it', async () => {
    const s = script({ START: [2, 'b'], b: [0, 'c'] });
    expect(await collect(paginate(s.fetcher, { start: null }))).toEqual([null]);
    expect(s.calls).toEqual([null, 'b']);
  });

  it('starts at a given cursor (a resumed sweep)', async () => {
    const s = script({ m: [1, 'n'], n: [1, null] });
    expect(await collect(paginate(s.fetcher, { start: 'm' }))).toEqual(['m', 'n']);
  });

  it('fails with cursor_loop on a repeated cursor, before yielding the looping page', async () => {
    const s = script({ START: [1, 'a'], a: [1, 'b'], b: [1, 'a'] });
    const seen: (string | null)[] = [];
    let caught: unknown;
    try {
      for await (const page of paginate(s.fetcher, { start: null })) seen.push(page.cursor);
    } catch (err) {
      caught = err;
    }
    expect(seen).toEqual([null, 'a']);
    expect(isUpstreamError(caught, 'cursor_loop')).toBe(true);
    expect((caught as Error).message).toMatch(/cursor loop.*'a'/);
  });

  it('detects a loop back to the start cursor', async () => {
    const s = script({ x: [1, 'x'] });
    await expect(collect(paginate(s.fetcher, { start: 'x' }))).rejects.toThrow(/cursor loop/);
  });

  it('prefetches at most one page while the consumer works, and never past the end', async () => {
    const s = script({ START: [1, 'b'], b: [1, 'c'], c: [1, null] });
    const order: string[] = [];
    for await (const page of paginate(s.fetcher, { start: null })) {
      order.push(`got ${page.cursor} after calls=${s.calls.length}`);
      // The consumer's work: a few turns of the event loop, in which the prefetch goes out.
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    }
    // While page N is processed the request for N+1 is already out; the last page prefetches nothing.
    expect(order).toEqual(['got null after calls=2', 'got b after calls=3', 'got c after calls=3']);
    expect(s.inFlight.max).toBe(1);
  });

  it('does not prefetch when disabled', async () => {
    const s = script({ START: [1, 'b'], b: [1, null] });
    const order: number[] = [];
    for await (const _page of paginate(s.fetcher, { start: null, prefetch: false })) order.push(s.calls.length);
    expect(order).toEqual([1, 2]);
  });

  it('aborts the prefetch when the consumer stops early, without unhandled rejections', async () => {
    let prefetchSignal: AbortSignal | null = null;
    const fetcher = async (cursor: string | null, signal: AbortSignal): Promise<FetchedPage> => {
      if (cursor !== null) {
        prefetchSignal = signal;
        await new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      }
      return { cursor, nextCursor: 'next', reviews: [], rejects: [], fetchedAt: 0, recordCount: 1 };
    };
    for await (const _page of paginate(fetcher, { start: null })) break;
    expect(prefetchSignal!.aborted).toBe(true);
  });

  it('surfaces a prefetch failure when the consumer asks for that page', async () => {
    const fetcher = async (cursor: string | null): Promise<FetchedPage> => {
      if (cursor !== null) throw new Error('page 2 failed');
      return { cursor, nextCursor: 'two', reviews: [], rejects: [], fetchedAt: 0, recordCount: 1 };
    };
    const seen: (string | null)[] = [];
    await expect(
      (async () => {
        for await (const page of paginate(fetcher, { start: null })) {
          seen.push(page.cursor);
          await new Promise((r) => setImmediate(r));
        }
      })(),
    ).rejects.toThrow('page 2 failed');
    expect(seen).toEqual([null]);
  });
});
