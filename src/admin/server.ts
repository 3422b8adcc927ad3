import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AdminConfig, BridgeConfig } from '../config/config.js';
import { AdminMetrics } from '../ops/metrics.js';
import { errorKind } from '../ops/logger.js';
import { connectRedisFromConfig, type BridgeRedis } from '../redis/connection.js';
import { AdminActions } from './actions.js';
import { send } from './answers.js';
import { openApiDocument } from './openapi.js';
import { handleAdminRequest } from './requests.js';
import { readTlsFiles, watchTlsFiles } from './tls-reload.js';
import { TokenFile } from './tokens.js';

// The admin HTTP API (docs/operations.md, Admin API): status and operator actions over HTTP, on a port of its own
// (apart from /metrics, so a NetworkPolicy can admit them separately), every request with a bearer token of
// ADMIN_TOKEN_FILE. An action is recorded in Redis exactly as the command line records it, and the replica leading
// the account takes it at its next tick: any replica answers for every account of the deployment. This file starts
// and stops the server; src/admin/requests.ts authenticates and routes, src/admin/actions.ts acts.

/** Options of {@link startAdminServer}. */
export interface AdminServerOptions {
  admin: AdminConfig;
  /** The accounts of the process (the first one's Redis settings are the process's). */
  accounts: readonly BridgeConfig[];
  /** What the process knows of REDIS_WAIT_REPLICAS now (null: met), for the status. */
  durability: () => string | null;
  logger: Logger;
  /** The time of actions and status (default Date.now; tests pass a fixed one). */
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

/** How often a TLS certificate and key are checked for renewal. */
const TLS_RELOAD_MS = 30_000;

/** Starts the admin API; resolves once it listens. */
export async function startAdminServer(opts: AdminServerOptions): Promise<AdminServer> {
  const { admin, logger } = opts;
  const first = opts.accounts[0];
  if (!first) throw new Error('startAdminServer: no account');
  const metrics = new AdminMetrics();
  // A connection of its own whose reads wait for no replica: status must answer while Redis lacks one (it says so).
  const redis: BridgeRedis = connectRedisFromConfig(first.redis);
  redis.durability.replicas = 0;
  const deps = {
    tokens: new TokenFile(admin.tokenFile, logger),
    actions: new AdminActions({ ...opts, redis, clock: opts.clock ?? Date.now }),
    document: JSON.stringify(openApiDocument()),
    logger,
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handleAdminRequest(req, deps).then(
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
  let stopReload = (): void => {};
  if (admin.tls) {
    const https = createHttpsServer(readTlsFiles(admin.tls), listener);
    stopReload = await watchTlsFiles(https, admin.tls, opts.tlsReloadMs ?? TLS_RELOAD_MS, logger);
    server = https;
  } else {
    server = createServer(listener);
  }
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  try {
    await listen(server, admin.port, admin.host);
  } catch (err) {
    stopReload();
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
        stopReload();
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

/** Resolves once `server` listens, rejects when it cannot (the port is taken). */
function listen(server: Server | HttpsServer, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
