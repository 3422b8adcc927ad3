import { z } from 'zod';
import type { ResyncScope } from '../core/resync-request.js';
import { parseWatermark } from '../core/checkpoint-change.js';

// Request bodies of the admin API: their zod schemas (the OpenAPI document shows them as they are) and their
// validation, whose error names the field at fault so that a script or a runbook can say what to fix.

const MAX_IDS = 10_000;

/** The body of pause, resume, sweep and restore: none, or an empty object. */
export const EmptyBodySchema = z.strictObject({}).describe('No body, or an empty JSON object');

/** The body of resync: exactly one of ids, since or all. */
export const ResyncBodySchema = z
  .union([
    z.strictObject({
      ids: z
        .array(z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER))
        .min(1)
        .max(MAX_IDS)
        .describe('review ids to re-read (at most 10,000)'),
    }),
    z.strictObject({
      since: z
        .union([z.iso.datetime({ offset: true }), z.iso.date(), z.number().int().nonnegative()])
        .describe('re-read reviews updated since: an ISO 8601 date or date-time, or epoch milliseconds'),
    }),
    z.strictObject({ all: z.literal(true).describe('re-read every review') }),
  ])
  .describe('Exactly one of ids, since, all');

/** The body of PUT .../checkpoint: the watermark to rewind (or move) to. */
export const CheckpointBodySchema = z
  .strictObject({
    watermark: z
      .union([z.iso.datetime({ offset: true }), z.iso.date(), z.number().int().nonnegative()])
      .describe('the new watermark: an ISO 8601 date or date-time, or epoch milliseconds; not in the future'),
  })
  .describe('The checkpoint fields to change (the account must be paused)');

/** A body that could not be accepted: which field (a dotted path, `body` for the whole) and what is wrong. */
export interface BodyProblem {
  field: string;
  message: string;
}

/** The outcome of validating a body. */
export type BodyResult<T> = { ok: true; value: T } | { ok: false; problem: BodyProblem };

const SCOPE_FIELDS = ['ids', 'since', 'all'] as const;

/** A field path as a client writes it: `ids[3]`, `since`. */
function fieldOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path)
    out += typeof part === 'number' ? `[${part}]` : out === '' ? String(part) : `.${String(part)}`;
  return out === '' ? 'body' : out;
}

function problemOf(issue: z.core.$ZodIssue): BodyProblem {
  if (issue.code === 'unrecognized_keys') {
    return { field: fieldOf([...issue.path, issue.keys[0]!]), message: 'unknown field' };
  }
  return { field: fieldOf(issue.path), message: issue.message };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validates the body of an action without one (undefined: the request had no body). */
export function parseEmptyBody(raw: unknown): BodyResult<Record<string, never>> {
  if (raw === undefined) return { ok: true, value: {} };
  const parsed = EmptyBodySchema.safeParse(raw);
  if (parsed.success) return { ok: true, value: {} };
  return { ok: false, problem: problemOf(parsed.error.issues[0]!) };
}

/** Validates a resync body into the scope of a resync request; `now` bounds `since`. */
export function parseResyncBody(raw: unknown, now: number): BodyResult<ResyncScope> {
  if (!isObject(raw)) return { ok: false, problem: { field: 'body', message: 'expected a JSON object' } };
  const unknown = Object.keys(raw).find((k) => !(SCOPE_FIELDS as readonly string[]).includes(k));
  if (unknown !== undefined) return { ok: false, problem: { field: unknown, message: 'unknown field' } };
  const given = SCOPE_FIELDS.filter((k) => k in raw);
  if (given.length !== 1) {
    return { ok: false, problem: { field: 'body', message: 'give exactly one of ids, since, all' } };
  }
  // The union's own error would not say which field failed: validate against the member the field selects.
  const member = ResyncBodySchema.options[SCOPE_FIELDS.indexOf(given[0]!)]!;
  const parsed = member.safeParse(raw);
  if (!parsed.success) return { ok: false, problem: problemOf(parsed.error.issues[0]!) };
  const body = parsed.data as { ids?: number[]; since?: string | number; all?: true };
  if (body.ids) return { ok: true, value: { kind: 'ids', ids: [...new Set(body.ids)].sort((a, b) => a - b) } };
  if (body.since !== undefined) {
    const since = typeof body.since === 'number' ? body.since : Date.parse(body.since);
    if (!Number.isFinite(since)) return { ok: false, problem: { field: 'since', message: 'not a date' } };
    if (since > now) return { ok: false, problem: { field: 'since', message: 'the date is in the future' } };
    return { ok: true, value: { kind: 'since', since } };
  }
  return { ok: true, value: { kind: 'all' } };
}

/** Validates the body of a checkpoint change into the watermark (ms); `now` bounds it. */
export function parseCheckpointBody(raw: unknown, now: number): BodyResult<{ watermark: number }> {
  const parsed = CheckpointBodySchema.safeParse(raw);
  if (!parsed.success) return { ok: false, problem: problemOf(parsed.error.issues[0]!) };
  const watermark = parseWatermark(parsed.data.watermark, now);
  if ('problem' in watermark) return { ok: false, problem: { field: 'watermark', message: watermark.problem } };
  return { ok: true, value: { watermark: watermark.ms } };
}
