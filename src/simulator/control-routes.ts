import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyError, readJson, sendJson } from './http-util.js';
import { SimulatorConfigError } from './options.js';
import { StoreError } from './store.js';
import type { Faults, PoisonKind, SimulatorControl, SimulatorOptions } from './types.js';

// The control interface over HTTP, for a simulator run as its own process (demo, fault tests that run the bridge as
// a child). No authentication: it is a test tool and listens where the simulator listens.

type Route = (params: { id: number; body: unknown }) => { status: number; body?: unknown };

/** Answers a request under /_control/ by calling the in-process control facade. */
export async function handleControl(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  control: SimulatorControl,
): Promise<void> {
  const match = matchRoute(req.method ?? 'GET', url.pathname, control);
  if (match === null) {
    req.resume();
    return sendJson(res, 404, { error: 'no such control route' });
  }
  try {
    const body = await readJson(req);
    const result = match.route({ id: match.id, body });
    if (result.body === undefined) {
      res.writeHead(result.status).end();
    } else {
      sendJson(res, result.status, result.body);
    }
  } catch (error) {
    if (error instanceof StoreError)
      return sendJson(res, error.kind === 'not_found' ? 404 : 400, { error: error.message });
    if (error instanceof BodyError) return sendJson(res, error.status, { error: error.message });
    if (error instanceof SimulatorConfigError) return sendJson(res, 400, { error: error.message });
    throw error;
  }
}

function matchRoute(method: string, path: string, control: SimulatorControl): { route: Route; id: number } | null {
  const review = /^\/_control\/reviews\/(\d+)(\/status|\/late-status|\/restore)?$/.exec(path);
  if (review !== null) {
    const id = Number(review[1]);
    if (review[2] === '/late-status')
      return method === 'POST'
        ? { id, route: (p) => ok(control.setStatusLate(p.id, statusOf(p.body), lateByOf(p.body))) }
        : null;
    if (review[2] === '/restore')
      return method === 'POST' ? { id, route: (p) => noContent(() => control.restoreReview(p.id)) } : null;
    if (review[2] !== undefined)
      return method === 'POST' ? { id, route: (p) => ok(control.setStatus(p.id, statusOf(p.body))) } : null;
    if (method === 'GET') return { id, route: (p) => found(control.get(p.id), p.id) };
    if (method === 'PATCH') return { id, route: (p) => ok(control.edit(p.id, objectOf(p.body))) };
    if (method === 'DELETE') return { id, route: (p) => noContent(() => control.removeReview(p.id)) };
    return null;
  }
  const key = `${method} ${path}`;
  const routes: Record<string, Route> = {
    'POST /_control/reviews': (p) => ({
      status: 201,
      body: control.createReview(p.body === undefined ? {} : objectOf(p.body)),
    }),
    'GET /_control/review-count': () => ok({ count: control.reviewCount() }),
    'POST /_control/poison-reviews': (p) => ({ status: 201, body: control.addPoisonReviews(kindsOf(p.body)) }),
    'PUT /_control/faults': (p) => noContent(() => control.setFaults(objectOf(p.body) as Partial<Faults>)),
    'PUT /_control/rate-limit': (p) => noContent(() => control.setRateLimit(p.body as SimulatorOptions['rateLimit'])),
    'POST /_control/tokens/revoke': () => noContent(() => control.revokeTokens()),
    'GET /_control/stats': () => ok(control.stats()),
    'POST /_control/stats/reset': () => noContent(() => control.resetStats()),
  };
  const route = routes[key];
  return route === undefined ? null : { route, id: 0 };
}

function found(review: Record<string, unknown> | null, id: number): { status: number; body: unknown } {
  return review === null ? { status: 404, body: { error: `no review with id ${id}` } } : ok(review);
}

function ok(body: unknown): { status: number; body: unknown } {
  return { status: 200, body };
}

function noContent(action: () => void): { status: number } {
  action();
  return { status: 204 };
}

function objectOf(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BodyError(400, 'body must be a JSON object');
  return body as Record<string, unknown>;
}

function statusOf(body: unknown): { client?: string; pwr?: string } {
  const { client, pwr } = objectOf(body);
  for (const value of [client, pwr]) {
    if (value !== undefined && typeof value !== 'string') throw new BodyError(400, 'client and pwr must be strings');
  }
  return { client: client as string | undefined, pwr: pwr as string | undefined };
}

function lateByOf(body: unknown): number {
  const { lateByMs } = objectOf(body);
  if (typeof lateByMs !== 'number') throw new BodyError(400, 'lateByMs must be a number');
  return lateByMs;
}

function kindsOf(body: unknown): PoisonKind[] | undefined {
  if (body === undefined) return undefined;
  const { kinds } = objectOf(body);
  if (kinds === undefined) return undefined;
  if (!Array.isArray(kinds) || !kinds.every((k) => typeof k === 'string')) {
    throw new BodyError(400, 'kinds must be an array of poison kinds');
  }
  return kinds as PoisonKind[];
}
