import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { UsageError } from './errors.js';

// A resync re-reads chosen reviews, refreshes their state-topic rows and publishes real differences as ordinary
// events. The CLI only records a request in Redis (like the on-demand sweep); the leader takes it at its next
// tick. This module is the request's shape and the parsing of the command's arguments.

/** Which reviews a resync re-reads. */
export const ResyncScopeSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('ids'), ids: z.array(z.number().int().nonnegative()).min(1).max(10_000) }),
  z.object({
    kind: z.literal('since'),
    since: z.number().int().nonnegative().describe('updated_date lower bound (ms)'),
  }),
  z.object({ kind: z.literal('all') }),
]);

/** Which reviews a resync re-reads. */
export type ResyncScope = z.infer<typeof ResyncScopeSchema>;

/** A pending resync request as stored in Redis. */
export const ResyncRequestSchema = z.object({
  id: z.string().min(1).describe('identifies the request, so `resync --wait` can follow its progress'),
  requestedAt: z.number().int(),
  scope: ResyncScopeSchema,
});

/** A pending resync request. */
export type ResyncRequest = z.infer<typeof ResyncRequestSchema>;

/** Re-exported from the one error model, where it is defined. */
export { UsageError };

/** The options of `reviews-bridge resync`. */
export interface ResyncArgs {
  scope: ResyncScope;
  /** Follow the resync's progress until it completes. */
  wait: boolean;
}

const MAX_IDS = 10_000;

/** Parses `--ids 1,2,3 | --since <date> | --all [--wait]`; exactly one scope. */
export function parseResyncArgs(args: readonly string[], now = Date.now()): ResyncArgs {
  const scopes: ResyncScope[] = [];
  let wait = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=')
        ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
        : [arg, undefined];
    const value = (): string => {
      const v = inline ?? args[++i];
      if (v === undefined || v === '' || (inline === undefined && v.startsWith('--')))
        throw new UsageError(`${flag} needs a value`);
      return v;
    };
    if (flag === '--ids') scopes.push({ kind: 'ids', ids: parseIds(value()) });
    else if (flag === '--since') scopes.push({ kind: 'since', since: parseSince(value(), now) });
    else if (flag === '--all') scopes.push({ kind: 'all' });
    else if (flag === '--wait') wait = true;
    else
      throw new UsageError(
        `unknown argument ${JSON.stringify(arg)} (expected --ids 1,2,3 | --since <date> | --all, and optionally --wait)`,
      );
  }
  if (scopes.length !== 1) throw new UsageError('give exactly one of --ids 1,2,3 | --since <date> | --all');
  return { scope: scopes[0]!, wait };
}

function parseIds(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  const ids = new Set<number>();
  for (const part of parts) {
    if (!/^\d{1,15}$/.test(part))
      throw new UsageError(`--ids: ${JSON.stringify(part)} is not a review id (comma-separated non-negative integers)`);
    ids.add(Number(part));
  }
  if (ids.size > MAX_IDS) throw new UsageError(`--ids: at most ${MAX_IDS} ids (use --since or --all for more)`);
  return [...ids].sort((a, b) => a - b);
}

function parseSince(text: string, now: number): number {
  // A bare number is epoch milliseconds (the upstream's unit); anything else must be an ISO-8601 date.
  const ms = /^\d+$/.test(text) ? Number(text) : /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN;
  if (!Number.isFinite(ms))
    throw new UsageError(
      `--since: ${JSON.stringify(text)} is not a date (ISO 8601 such as 2026-11-01 or 2026-11-01T12:00:00Z, or epoch ms)`,
    );
  if (ms > now) throw new UsageError('--since: the date is in the future');
  return ms;
}

/** A new request for this scope. */
export function newResyncRequest(scope: ResyncScope, now = Date.now()): ResyncRequest {
  return { id: randomUUID(), requestedAt: now, scope };
}
