import { z } from 'zod';
import { AccountStatusSchema, AccountsOverviewSchema } from '../core/account-status.js';
import { ResyncScopeSchema } from '../core/resync-request.js';
import type { AdminAction } from '../ops/metrics.js';
import { CheckpointViewSchema } from '../core/checkpoint-change.js';
import { CheckpointBodySchema, EmptyBodySchema, ResyncBodySchema } from './bodies.js';

// The admin API's routes and the zod schemas of what they take and answer: the server validates bodies and its own
// answers with them, and the OpenAPI document (src/admin/openapi.ts) is generated from the same table, so the two
// cannot drift.

const iso = z.iso.datetime().describe('ISO 8601 date-time (UTC)');
const account = z.string().describe('the account id');
const leader = z
  .string()
  .nullable()
  .describe('the replica leading the account, which acts on the request; null: none leads now, the next leader will');

/** The answer to pause. */
export const PausedSchema = z.object({ account, paused: z.literal(true), pausedSince: iso });

/** The answer to resume. */
export const ResumedSchema = z.object({
  account,
  paused: z.literal(false),
  wasPaused: z.boolean().describe('false: the account was not paused'),
});

/** The answer to sweep and restore: the request is recorded in Redis for the leader. */
export const RequestedSchema = z.object({ account, requested: z.literal(true), requestedAt: iso, leader });

/** The answer to resync: the request (follow it by its id in the status's progress and lastPass). */
export const ResyncRequestedSchema = RequestedSchema.extend({
  id: z.string().describe('the request id: progress.requestId and lastPass.requestId of the status name it'),
  scope: ResyncScopeSchema,
});

/** The answer to a checkpoint change: recorded for the leader, which applies it while the account stays paused. */
export const CheckpointChangeRequestedSchema = RequestedSchema.extend({
  watermark: iso.describe('the watermark the leader commits (to the Kafka changelog, then Redis)'),
});

/** Every error answer: what went wrong, and for a bad body the field at fault. */
export const ErrorSchema = z.object({
  error: z.string(),
  field: z.string().optional().describe('the body field at fault (bad request)'),
  message: z.string().optional(),
});

/** Named schemas of the OpenAPI document's components. */
export const NAMED_SCHEMAS: ReadonlyArray<[name: string, schema: z.ZodType, io: 'input' | 'output']> = [
  ['AccountsOverview', AccountsOverviewSchema, 'output'],
  ['AccountStatus', AccountStatusSchema, 'output'],
  ['Paused', PausedSchema, 'output'],
  ['Resumed', ResumedSchema, 'output'],
  ['Requested', RequestedSchema, 'output'],
  ['ResyncRequested', ResyncRequestedSchema, 'output'],
  ['Checkpoint', CheckpointViewSchema, 'output'],
  ['CheckpointChangeRequested', CheckpointChangeRequestedSchema, 'output'],
  ['Error', ErrorSchema, 'output'],
  ['EmptyBody', EmptyBodySchema, 'input'],
  ['ResyncBody', ResyncBodySchema, 'input'],
  ['CheckpointBody', CheckpointBodySchema, 'input'],
];

/** One route of the admin API. */
export interface RouteSpec {
  method: 'GET' | 'POST' | 'PUT';
  /** OpenAPI path template; `{account}` is the one parameter. */
  path: string;
  action: AdminAction;
  summary: string;
  /** The request body's schema (POST). */
  body?: z.ZodType;
  /** The success status and the answer's schema. */
  status: 200 | 202;
  response: z.ZodType;
  /** When the route answers 409, why. */
  conflict?: string;
}

const ACCOUNT_PATH = '/v1/accounts/{account}';

/** Every route but /openapi.json (which answers the document itself). */
export const ROUTES: readonly RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/accounts',
    action: 'list',
    summary: 'Every account: the replica leading it, watermark, pause, sweep running; the live replicas',
    status: 200,
    response: AccountsOverviewSchema,
  },
  {
    method: 'GET',
    path: ACCOUNT_PATH,
    action: 'status',
    summary: 'One account: leader, epoch, watermark and lag, pause, pending requests, pass progress with ETA',
    status: 200,
    response: AccountStatusSchema,
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/pause`,
    action: 'pause',
    summary: 'Stop upstream traffic (the leader honours it within a second; kept across restarts)',
    body: EmptyBodySchema,
    status: 200,
    response: PausedSchema,
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/resume`,
    action: 'resume',
    summary: 'Lift a pause: polling continues from the watermark, nothing is lost',
    body: EmptyBodySchema,
    status: 200,
    response: ResumedSchema,
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/sweep`,
    action: 'sweep',
    summary: 'Ask the leader for a reconciliation sweep now (follow it with GET: progress, lastSweepAt)',
    body: EmptyBodySchema,
    status: 202,
    response: RequestedSchema,
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/resync`,
    action: 'resync',
    summary: 'Ask the leader to re-read chosen reviews: ids, since a date, or all (replaces a pending request)',
    body: ResyncBodySchema,
    status: 202,
    response: ResyncRequestedSchema,
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/restore`,
    action: 'restore',
    summary: 'Ask the leader to rebuild the Redis snapshot and checkpoint from the Kafka changelog',
    body: EmptyBodySchema,
    status: 202,
    response: RequestedSchema,
  },
  {
    method: 'GET',
    path: `${ACCOUNT_PATH}/checkpoint`,
    action: 'checkpoint',
    summary:
      'The checkpoint: watermark, sweep cursor, initial-load state, changelog position, deployment identity, pause',
    status: 200,
    response: CheckpointViewSchema,
  },
  {
    method: 'PUT',
    path: `${ACCOUNT_PATH}/checkpoint`,
    action: 'checkpoint_set',
    summary:
      'Rewind (or move) the watermark while the account is paused; the leader commits it to the changelog and Redis, ' +
      'and polls re-read from there on resume (the diff drops what the snapshot already has)',
    body: CheckpointBodySchema,
    status: 202,
    response: CheckpointChangeRequestedSchema,
    conflict: 'The account is not paused: pause it first (KIP-875: offsets change only while stopped)',
  },
  {
    method: 'POST',
    path: `${ACCOUNT_PATH}/reset`,
    action: 'reset',
    summary:
      "Start a paused account over: forget its Redis state; the leader rebuilds it from this deployment's changelog, or runs a new initial load",
    body: EmptyBodySchema,
    status: 202,
    response: RequestedSchema,
    conflict: 'The account is not paused: pause it before a reset',
  },
];

/** The route a method and path name, with the account of the path; null when no route has the path. */
export function matchRoute(
  method: string,
  path: string,
): { route: RouteSpec; account: string | null } | { route: null; allowed: string[] } | null {
  const parts = path.split('/').filter((p) => p !== '');
  const candidates: { route: RouteSpec; account: string | null }[] = [];
  for (const route of ROUTES) {
    const template = route.path.split('/').filter((p) => p !== '');
    if (template.length !== parts.length) continue;
    let account: string | null = null;
    const same = template.every((t, i) => {
      if (t !== '{account}') return t === parts[i];
      try {
        account = decodeURIComponent(parts[i]!);
      } catch {
        return false;
      }
      return true;
    });
    if (same) candidates.push({ route, account });
  }
  if (candidates.length === 0) return null;
  return (
    candidates.find((c) => c.route.method === method) ?? { route: null, allowed: candidates.map((c) => c.route.method) }
  );
}
