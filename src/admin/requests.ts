import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { bearerToken } from '../core/admin-tokens.js';
import type { AdminAction } from '../ops/metrics.js';
import type { AdminActions } from './actions.js';
import { matchRoute } from './api.js';
import { problem, readBody, type Answer } from './answers.js';
import type { TokenFile } from './tokens.js';

// The admin API's front door: authentication first (nothing is told without a valid token, not even whether a
// path exists), then the routing table (src/admin/api.ts), the body, and the action; every answer of an action is
// checked against the schema the OpenAPI document promises.

/** An answer and the action the request counter records it under. */
export type RoutedAnswer = Answer & { action: AdminAction };

/** What {@link handleAdminRequest} needs. */
export interface AdminRequestDeps {
  tokens: TokenFile;
  actions: AdminActions;
  /** The OpenAPI document, serialised once. */
  document: string;
  logger: Logger;
}

/** Authenticates, routes and answers one request; rejects only when reading it fails. */
export async function handleAdminRequest(req: IncomingMessage, deps: AdminRequestDeps): Promise<RoutedAnswer> {
  const { logger } = deps;
  const path = (req.url ?? '/').split('?')[0]!;
  const method = req.method ?? 'GET';
  const matched = path === '/openapi.json' ? 'openapi' : matchRoute(method, path);
  const action: AdminAction = matched === 'openapi' ? 'openapi' : matched?.route ? matched.route.action : 'unknown';
  const presented = bearerToken(req.headers.authorization);
  const who = presented === null ? null : await deps.tokens.match(presented);
  if (who === null) {
    logger.warn(
      { action, remote: req.socket.remoteAddress, presented: presented === null ? 'nothing' : 'an unknown token' },
      'admin request refused',
    );
    return {
      action,
      ...problem(401, 'unauthorized', 'unauthorized'),
      headers: { 'www-authenticate': 'Bearer realm="reviews-bridge-admin"' },
    };
  }
  if (matched === 'openapi') {
    if (method !== 'GET') return { action, ...methodNotAllowed(['GET']) };
    return { action, status: 200, outcome: 'ok', body: deps.document };
  }
  if (matched === null) return { action, ...problem(404, 'not_found', 'not found') };
  if (matched.route === null) return { action, ...methodNotAllowed(matched.allowed) };
  let body: unknown;
  if (matched.route.body) {
    const parsed = await readJson(req);
    if ('refused' in parsed) return { action, ...parsed.refused };
    body = parsed.value;
  }
  try {
    const answer = await deps.actions.run(matched.route, matched.account, body, who);
    // The answer is what the OpenAPI document promises: checked against the same schema.
    if (answer.outcome === 'ok') answer.body = matched.route.response.parse(answer.body);
    return { action, ...answer };
  } catch (err) {
    logger.error({ err, action, account: matched.account }, 'admin request failed');
    return { action, ...problem(500, 'error', 'internal error') };
  }
}

function methodNotAllowed(allowed: readonly string[]): Answer {
  return { ...problem(405, 'bad_request', 'method not allowed'), headers: { allow: allowed.join(', ') } };
}

/** The body as JSON (undefined when empty), or the answer refusing it: too large, or not JSON. */
async function readJson(req: IncomingMessage): Promise<{ value: unknown } | { refused: Answer }> {
  const text = await readBody(req);
  if (text === null) return { refused: problem(413, 'bad_request', 'body too large') };
  if (text.trim() === '') return { value: undefined };
  try {
    return { value: JSON.parse(text) };
  } catch {
    return { refused: problem(400, 'bad_request', 'bad request', { field: 'body', message: 'not valid JSON' }) };
  }
}
