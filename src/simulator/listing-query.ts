import type { StoreQuery } from './store.js';

// The query parameters of GET /v1/reviews, checked as strictly as the spec allows: anything it does not define as
// valid is a 400 with a JSON error, so a client bug shows up against the simulator rather than in production.

/** How the updated_date parameter is read (the spec leaves both open). */
export interface UpdatedDateRule {
  unit: 'ms' | 's';
  comparison: 'gte' | 'gt';
}

/** Parsed query, or the message of the 400 answer. */
export type ListingQueryResult = { ok: true; query: StoreQuery } | { ok: false; error: string };

const MAX_LIMIT = 100;
const DIGITS = /^\d{1,15}$/;

/** Validates limit, next_page and updated_date against the current highest id and the updated_date rule. */
export function parseListingQuery(params: URLSearchParams, maxId: number, rule: UpdatedDateRule): ListingQueryResult {
  let limit = MAX_LIMIT;
  const rawLimit = params.get('limit');
  if (rawLimit !== null) {
    limit = DIGITS.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= MAX_LIMIT)) return { ok: false, error: 'limit must be an integer from 1 to 100' };
  }

  let startId = 1;
  const cursor = params.get('next_page');
  if (cursor !== null) {
    startId = /^[1-9]\d{0,14}$/.test(cursor) ? Number(cursor) : NaN;
    if (!(startId <= maxId)) return { ok: false, error: 'next_page is not a known cursor' };
  }

  let minUpdated: number | null = null;
  const rawUpdated = params.get('updated_date');
  if (rawUpdated !== null) {
    if (!DIGITS.test(rawUpdated)) {
      return {
        ok: false,
        error: `updated_date must be a non-negative integer (Unix time in ${rule.unit === 'ms' ? 'milliseconds' : 'seconds'})`,
      };
    }
    minUpdated = lowerBoundMs(Number(rawUpdated), rule);
  }
  return { ok: true, query: { startId, limit, minUpdated, fromCursor: cursor !== null } };
}

/** The inclusive lower bound in ms that the parameter value means under the rule (seconds compare whole seconds). */
export function lowerBoundMs(value: number, rule: UpdatedDateRule): number {
  const unitMs = rule.unit === 'ms' ? 1 : 1000;
  return (rule.comparison === 'gte' ? value : value + 1) * unitMs;
}
