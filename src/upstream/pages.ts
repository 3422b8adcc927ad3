import type { Logger } from 'pino';
import type { RecordLimits } from './bounds.js';
import { CursorFormatError, type CursorLocator } from './cursor.js';
import { UpstreamError } from './errors.js';
import type { Reject, UpstreamHooks } from './types.js';
import { validateRecords } from './validate.js';
import type { Review } from '../core/review.js';

// Page parsing: what one listing answer holds (the next cursor, the valid reviews, the rejected records), and what
// a refused page means (ask again with fewer, or give up with a kind the pass can act on). Pure apart from the
// hooks and the log line about rejects.

/** What parsing a page needs: the cursor locator, the record bounds, the reject hooks and the logger. */
export interface PageParsing {
  cursors: CursorLocator;
  limits: RecordLimits;
  hooks: UpstreamHooks;
  log: Logger;
  /** The wall clock (ms since the epoch): the future bound of record dates, when a page was read; default Date.now. */
  now?: () => number;
}

/** The parts of a page read from one listing answer. */
export interface ParsedPage {
  nextCursor: string | null;
  reviews: Review[];
  rejects: Reject[];
  recordCount: number;
}

/** Reads the next cursor and validates the records of a listing answer; `describe` names the request in errors. */
export function parsePage(json: unknown, records: unknown[], describe: string, parsing: PageParsing): ParsedPage {
  let nextCursor: string | null;
  try {
    nextCursor = parsing.cursors.next(json);
  } catch (err) {
    if (!(err instanceof CursorFormatError)) throw err;
    throw new UpstreamError('client', `${describe}: ${err.message}`, { endpoint: 'reviews', reason: 'cursor_format' });
  }
  const { reviews, rejects } = validateRecords(records, parsing.hooks, {
    limits: parsing.limits,
    ...(parsing.now ? { clock: parsing.now } : {}),
  });
  if (rejects.length > 0) {
    parsing.log.warn(
      { rejects: rejects.map((r) => ({ id: r.id, reason: r.reason, detail: r.detail })) },
      'records failed validation',
    );
  }
  return { nextCursor, reviews, rejects, recordCount: records.length };
}

/** What to do after a listing request failed: ask again with a smaller limit, or throw `error`. */
export type Refusal =
  { retryWith: number; hookReason: 'too_large' | 'status_400'; reason: string } | { error: unknown };

/**
 * A page the upstream cannot serve (a body over the cap, or a 400, which is how it refuses a page over its payload
 * limit) is asked for again with half the `limit`, down to 1: one oversized review then costs a page of one. A 400
 * even for a page of one is about the request itself: with a cursor, the cursor (expired or invalid:
 * `cursor_invalid`, the pass restarts without it); about the size (the text says so): `too_large`; else `client`.
 */
export function refusal(err: unknown, cursor: string | null, limit: number): Refusal {
  if (!(err instanceof UpstreamError) || err.endpoint !== 'reviews') return { error: err };
  const refused = err.kind === 'too_large' || err.status === 400;
  if (refused && limit > 1) {
    const tooLarge = err.kind === 'too_large';
    return {
      retryWith: Math.max(1, Math.floor(limit / 2)),
      hookReason: tooLarge ? 'too_large' : 'status_400',
      reason: tooLarge ? 'too_large' : (err.reason ?? 'status_400'),
    };
  }
  if (err.status !== 400) return { error: err };
  const kind = err.reason === 'payload_too_large' ? 'too_large' : cursor !== null ? 'cursor_invalid' : 'client';
  if (kind === 'client') return { error: err };
  const why =
    kind === 'too_large'
      ? 'the upstream cannot serve even a page of one review at this position (over its payload limit)'
      : 'the listing refused the cursor (expired or invalid) even for a page of one; the pass must restart from its beginning';
  const error = new UpstreamError(kind, `${err.message}: ${why}`, {
    endpoint: 'reviews',
    status: 400,
    attempts: err.attempts,
    reason: kind,
    final: true,
    cause: err,
  });
  return { error };
}
