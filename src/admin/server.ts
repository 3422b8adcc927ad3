import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AdminConfig, BridgeConfig } from '../config/config.js';
import { bearerToken } from '../core/admin-tokens.js';
import { newResyncRequest, type ResyncScope } from '../core/resync-request.js';
import { AdminMetrics, type AdminAction, type AdminOutcome } from '../ops/metrics.js';
import { errorKind } from '../ops/logger.js';
import { readAccountStatus, readAccountsOverview } from '../redis/account-status.js';
import { accountKeys, connectRedisFromConfig, type BridgeRedis } from '../redis/connection.js';
import { leaseHolder } from '../redis/lease.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import { matchRoute, type RouteSpec } from './api.js';
import { parseEmptyBody, parseResyncBody, type BodyProblem } from './bodies.js';
import { openApiDocument } from './openapi.js';
import { TokenFile } from './tokens.js';

// The admin HTTP API (docs/operations.md, Admin API): status and operator actions over HTTP, on a port of its own
// (apart from /metrics, so a NetworkPolicy can admit them separately), every request with a bearer token of
// ADMIN_TOKEN_FILE. An action is recorded in Redis exactly as the command line records it, and the replica leading
// the account takes it at its next tick: any replica answers for every account of the deployment.

/** Options of {@link startAdminServer}. */
export interface AdminServerOptions {
  admin: AdminConfig;
  /** The accounts of the process (the first one's Redis settings are the process's). */
  accounts: readonly BridgeConfig[];
  /** What the process knows of REDIS_WAIT_REPLICAS now (null: met), for the status. */
  durability: () => string | null;
  logger: Logger;
  clock?: () => number;
  /** How often the TLS certificate and key are checked for renewal (default 30 s; tests use less). */
  tlsReloadMs?: number;
}

/** A running admin API. */
export interface AdminServer {
  /** Base URL, e.g. https://127.0.0.1:9465 (with the real port when 0 was asked). */
  url: string;
  /** Its request counter, for the ops server's /metrics. */
  metrics: AdminMetrics;
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';
/** Largest request body: a resync of 10,000 ids fits with room to spare. */
const MAX_BODY_BYTES = 1024 * 1024;
/** How often a TLS certificate and key are checked for renewal. */
const TLS_RELOAD_MS = 30_000;

/** An answer to send: status, body and extra headers. */
interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  outcome: AdminOutcome;
}

const problem = (status: number, outcome: AdminOutcome, error: string, extra: BodyProblem | object = {}): Answer => ({
  status,
  outcome,
  body: { error, ...extra },
});

/** Starts the admin API; resolves once it listens. */
export async function startAdminServer(opts: AdminServerOptions): Promise<AdminServer> {
  const { admin, logger } = opts;
  const clock = opts.clock ?? Date.now;
  const first = opts.accounts[0];
  if (!first) throw new Error('startAdminServer: no account');
  const metrics = new AdminMetrics();
  const tokens = new TokenFile(admin.tokenFile, logger);
  // A connection of its own whose reads wait for no replica: status must answer while Redis lacks one (it says so).
  const redis: BridgeRedis = connectRedisFromConfig(first.redis);
  redis.durability.replicas = 0;
  const accounts = new Map(
    opts.accounts.map((c) => {
      const keys = accountKeys(c.redis.keyPrefix, c.account);
      return [c.account, { config: c, keys, store: new SnapshotStore(redis, keys) }] as const;
    }),
  );
  const refs = opts.accounts.map((c) => ({ account: c.account, keyPrefix: c.redis.keyPrefix }));
  const replicaTtlMs = Math.max(...opts.accounts.map((c) => c.lease.ttlMs));
  const document = JSON.stringify(openApiDocument());

  /** Runs an authenticated request of a known route on a known account (or none). */
  const act = async (route: RouteSpec, accountId: string | null, body: unknown, who: string): Promise<Answer> => {
    const now = clock();
    if (route.action === 'list') {
      return { status: 200, outcome: 'ok', body: await readAccountsOverview(redis, refs, replicaTtlMs) };
    }
    const account = accountId === null ? undefined : accounts.get(accountId);
    if (!account) return problem(404, 'not_found', 'unknown account');
    const ref = { account: account.config.account, keyPrefix: account.config.redis.keyPrefix };
    if (route.action === 'status') {
      return { status: 200, outcome: 'ok', body: await readAccountStatus(redis, ref, opts.durability(), clock) };
    }
    let scope: ResyncScope | null = null;
    const checked = route.action === 'resync' ? parseResyncBody(body, now) : parseEmptyBody(body);
    if (!checked.ok) return problem(400, 'bad_request', 'bad request', checked.problem);
    if (route.action === 'resync') scope = checked.value as ResyncScope;
    const { store, keys } = account;
    const iso = (ms: number) => new Date(ms).toISOString();
    let result: Record<string, unknown>;
    let detail: Record<string, unknown> = {};
    switch (route.action) {
      case 'pause': {
        await store.pause(now);
        result = { account: ref.account, paused: true, pausedSince: iso((await store.pausedSince()) ?? now) };
        break;
      }
      case 'resume': {
        result = { account: ref.account, paused: false, wasPaused: await store.resume() };
        break;
      }
      case 'sweep':
      case 'restore': {
        await (route.action === 'sweep' ? store.requestSweep() : store.requestRestore());
        const lease = await leaseHolder(redis, keys);
        result = { account: ref.account, requested: true, requestedAt: iso(now), leader: lease?.holder ?? null };
        break;
      }
      case 'resync': {
        const request = newResyncRequest(scope!, now);
        await store.requestResync(request);
        const lease = await leaseHolder(redis, keys);
        result = {
          account: ref.account,
          requested: true,
          requestedAt: iso(now),
          leader: lease?.holder ?? null,
          id: request.id,
          scope: request.scope,
        };
        detail = {
          requestId: request.id,
          scope: scope!.kind,
          ...(scope!.kind === 'ids' ? { ids: scope!.ids.length } : {}),
        };
        break;
      }
      default:
        return problem(404, 'not_found', 'not found');
    }
    // Who did what to which account, once: the token's name, never the token.
    logger.info({ tokenName: who, action: route.action, account: ref.account, ...detail }, 'admin action');
    return { status: route.status, outcome: 'ok', body: result };
  };

  const handle = async (req: IncomingMessage): Promise<Answer & { action: AdminAction }> => {
    const path = (req.url ?? '/').split('?')[0]!;
    const method = req.method ?? 'GET';
    const matched = path === '/openapi.json' ? 'openapi' : matchRoute(method, path);
    const action: AdminAction = matched === 'openapi' ? 'openapi' : matched?.route ? matched.route.action : 'unknown';
    // Authentication comes first: without a valid token nothing is told, not even whether the path exists.
    const presented = bearerToken(req.headers.authorization);
    const who = presented === null ? null : await tokens.match(presented);
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
      if (method !== 'GET')
        return { action, ...problem(405, 'bad_request', 'method not allowed'), headers: { allow: 'GET' } };
      return { action, status: 200, outcome: 'ok', body: document };
    }
    if (matched === null) return { action, ...problem(404, 'not_found', 'not found') };
    if (matched.route === null) {
      return {
        action,
        ...problem(405, 'bad_request', 'method not allowed'),
        headers: { allow: matched.allowed.join(', ') },
      };
    }
    let body: unknown;
    if (matched.route.body) {
      const text = await readBody(req);
      if (text === null) return { action, ...problem(413, 'bad_request', 'body too large') };
      if (text.trim() !== '') {
        try {
          body = JSON.parse(text);
        } catch {
          return {
            action,
            ...problem(400, 'bad_request', 'bad request', { field: 'body', message: 'not valid JSON' }),
          };
        }
      }
    }
    try {
      const answer = await act(matched.route, matched.account, body, who);
      // The answer is what the OpenAPI document promises: checked against the same schema.
      if (answer.outcome === 'ok') answer.body = matched.route.response.parse(answer.body);
      return { action, ...answer };
    } catch (err) {
      logger.error({ err, action, account: matched.account }, 'admin request failed');
      return { action, ...problem(500, 'error', 'internal error') };
    }
  };

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req).then(
      (answer) => {
        metrics.request(answer.action, answer.outcome);
        send(res, answer.status, answer.body, answer.headers);
      },
      (err: unknown) => {
        // Reading the request failed (the client went away, or the token file check threw).
        metrics.request('unknown', 'error');
        logger.warn({ err: errorKind(err) }, 'admin request failed');
        if (!res.headersSent) send(res, 500, { error: 'internal error' });
        else res.destroy();
      },
    );
  };

  let server: Server | HttpsServer;
  let reload: NodeJS.Timeout | null = null;
  if (admin.tls) {
    const { certFile, keyFile } = admin.tls;
    const https = createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, listener);
    // A renewed certificate (cert-manager rewrites the Secret) is taken without a restart.
    let version = await tlsVersion(certFile, keyFile);
    reload = setInterval(() => {
      void tlsVersion(certFile, keyFile).then((next) => {
        if (next === version || next === null) return;
        try {
          https.setSecureContext({ cert: readFileSync(certFile), key: readFileSync(keyFile) });
          version = next;
          logger.info('admin API certificate reloaded');
        } catch (err) {
          logger.error({ err: errorKind(err) }, 'admin API certificate could not be reloaded; the old one stays');
        }
      });
    }, opts.tlsReloadMs ?? TLS_RELOAD_MS);
    reload.unref();
    server = https;
  } else {
    server = createServer(listener);
  }
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(admin.port, admin.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    if (reload) clearInterval(reload);
    redis.disconnect();
    throw err;
  }
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `${admin.tls ? 'https' : 'http'}://${host}:${address.port}`;
  logger.info({ url }, 'admin API listening');

  let closing: Promise<void> | null = null;
  return {
    url,
    metrics,
    close(): Promise<void> {
      closing ??= (async () => {
        if (reload) clearInterval(reload);
        await new Promise<void>((resolve, reject) => {
          server.close((err) => (err ? reject(err) : resolve()));
          server.closeIdleConnections();
          server.closeAllConnections();
        });
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}

/** The request body as text, or null when it exceeds MAX_BODY_BYTES. */
async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function tlsVersion(certFile: string, keyFile: string): Promise<string | null> {
  try {
    const [c, k] = await Promise.all([stat(certFile), stat(keyFile)]);
    return `${c.ino}:${c.mtimeMs}:${c.size}/${k.ino}:${k.mtimeMs}:${k.size}`;
  } catch {
    return null;
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...headers,
  });
  res.end(text);
}
