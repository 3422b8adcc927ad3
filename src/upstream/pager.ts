import type { Page } from './types.js';
import { UpstreamError } from './errors.js';
import { linkSignals } from './signals.js';

// Walks the cursor chain. The next request can only start once the previous page's cursor is known, so the
// chain itself is sequential; what prefetch buys is overlap with the consumer: page N+1 is fetched while the
// caller diffs, publishes and commits page N. At most one page is prefetched, never past the end, and a loop in
// the chain (a cursor announced twice in one pass) fails the pass instead of paging forever.

/** A fetched page plus how many records it carried (valid or not): 0 means the listing is exhausted. */
export interface FetchedPage extends Page {
  recordCount: number;
}

/** Fetches the page that starts at `cursor` (null: the first page). */
export type PageFetcher = (cursor: string | null, signal: AbortSignal) => Promise<FetchedPage>;

/** Options of one walk. */
export interface PaginateOptions {
  /** Start cursor (a resumed sweep), or null for the beginning. */
  start: string | null;
  /** Fetch the next page while the current one is being processed. Default true. */
  prefetch?: boolean;
  signal?: AbortSignal;
}

const noop = (): void => {};

/** Yields the pages of one pass; stops on an empty page or a missing cursor; throws 'cursor_loop' on a repeat. */
export async function* paginate(fetchPage: PageFetcher, options: PaginateOptions): AsyncGenerator<Page, void, void> {
  const prefetch = options.prefetch ?? true;
  // Aborts a prefetch in flight when the consumer stops early (break, throw) or the caller's signal aborts.
  const walk = new AbortController();
  const linked = linkSignals(options.signal, walk.signal);
  const signal = linked.signal;
  const seen = new Set<string>();
  if (options.start !== null) seen.add(options.start);
  let pending: Promise<FetchedPage> | null = fetchPage(options.start, signal);
  let pageNo = 0;
  try {
    while (pending !== null) {
      const fetched: FetchedPage = await pending;
      pending = null;
      pageNo += 1;
      if (fetched.recordCount === 0) return;
      const next = fetched.nextCursor;
      if (next !== null) {
        if (seen.has(next)) {
          throw new UpstreamError(
            'cursor_loop',
            `cursor loop: page ${pageNo} of this pass announced next cursor '${next.slice(0, 64)}', which this pass has already fetched; stopping instead of paging forever`,
            { endpoint: 'reviews', reason: 'cursor_loop' },
          );
        }
        seen.add(next);
        if (prefetch) {
          pending = fetchPage(next, signal);
          // Handled here so that an early failure is not "unhandled" while the consumer still holds this page.
          pending.catch(noop);
        }
      }
      const { recordCount: _count, ...page } = fetched;
      yield page;
      if (next === null) return;
      if (!prefetch) pending = fetchPage(next, signal);
    }
  } finally {
    walk.abort(new Error('page walk ended'));
    linked.dispose();
  }
}
