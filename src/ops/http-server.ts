import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { MetricsSource } from './metrics.js';
import { errorKind } from './logger.js';

// The operations endpoint: metrics for Prometheus, liveness and readiness for the orchestrator. It stays on
// node:http (no framework) and every handler is cheap: probes run every few seconds on every replica, so the
// expensive checks are cached by the caller and readiness results are additionally reused for a second here.

/** Result of the liveness check: is the process alive and its main loop not stuck. */
export interface LivenessResult {
  ok: boolean;
  detail?: Record<string, unknown>;
}

/** Result of the readiness check with named checks (redis, kafka, upstream credentials, role). */
export interface ReadinessResult {
  ok: boolean;
  checks: Record<string, boolean | string>;
  /** Each dependency: ok, or failing with a reason code, since when and the settings to check. */
  dependencies?: Record<string, { status: string; since?: string; reason?: string; settings?: readonly string[] }>;
  /** The bound that holds for late changes of the accounts led here (informational: no part of `ok`). */
  freshness?: unknown;
}

/** Options of {@link startOpsServer}. */
export interface OpsServerOptions {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** A prom-client Registry, or the merge of several (src/ops/metrics.ts mergedMetrics). */
  metrics: MetricsSource;
  /** Must be synchronous and cheap, typically "last loop tick younger than N s". */
  liveness: () => LivenessResult;
  /** Should be cheap too; results are reused for `readinessCacheMs`. */
  readiness: () => Promise<ReadinessResult>;
  logger?: Logger;
  /** How long a readiness result is reused (default 1000 ms; 0 disables the cache). */
  readinessCacheMs?: number;
  /** A readiness check slower than this counts as not ready (default 2000 ms). */
  readinessTimeoutMs?: number;
  /** Times the reuse of a readiness result (default Date.now; tests pass a fake). */
  now?: () => number;
}

/** A running ops server. */
export interface OpsServer {
  /** Base URL, e.g. http://127.0.0.1:9464 (with the real port when 0 was asked). */
  url: string;
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** Starts the HTTP server for /metrics, /healthz and /readyz; resolves once it listens. */
export async function startOpsServer(opts: OpsServerOptions): Promise<OpsServer> {
  const cacheMs = opts.readinessCacheMs ?? 1000;
  const timeoutMs = opts.readinessTimeoutMs ?? 2000;
  const now = opts.now ?? Date.now;
  let cached: { at: number; result: ReadinessResult } | null = null;
  let pending: Promise<ReadinessResult> | null = null;

  // Concurrent probes share one evaluation, and a slow one keeps being shared until it settles (probes that
  // time out must not pile up further checks); a throwing or hanging check is reported, never propagated.
  const readiness = (): Promise<ReadinessResult> => {
    if (cached && now() - cached.at < cacheMs) return Promise.resolve(cached.result);
    pending ??= Promise.resolve()
      .then(() => opts.readiness())
      .catch((err: unknown): ReadinessResult => {
        opts.logger?.warn({ err }, 'readiness check failed');
        return { ok: false, checks: { readiness: errorKind(err) } };
      })
      .then((result) => {
        cached = { at: now(), result };
        return result;
      })
      .finally(() => {
        pending = null;
      });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<ReadinessResult>((resolve) => {
      timer = setTimeout(() => resolve({ ok: false, checks: { readiness: 'timeout' } }), timeoutMs);
    });
    return Promise.race([pending, timeout]).finally(() => clearTimeout(timer));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const head = req.method === 'HEAD';
    if (req.method !== 'GET' && !head) {
      send(res, 405, JSON_TYPE, JSON.stringify({ error: 'method not allowed' }), head, { allow: 'GET, HEAD' });
      return;
    }
    switch (path) {
      case '/metrics': {
        const body = await opts.metrics.metrics();
        send(res, 200, opts.metrics.contentType, body, head);
        return;
      }
      case '/healthz': {
        let result: LivenessResult;
        try {
          result = opts.liveness();
        } catch (err) {
          opts.logger?.warn({ err }, 'liveness check failed');
          result = { ok: false, detail: { error: errorKind(err) } };
        }
        const body = { status: result.ok ? 'ok' : 'fail', ...(result.detail ? { detail: result.detail } : {}) };
        send(res, result.ok ? 200 : 503, JSON_TYPE, JSON.stringify(body), head);
        return;
      }
      case '/readyz': {
        const result = await readiness();
        const body = {
          status: result.ok ? 'ready' : 'not_ready',
          checks: result.checks,
          ...(result.dependencies ? { dependencies: result.dependencies } : {}),
          ...(result.freshness !== undefined ? { freshness: result.freshness } : {}),
        };
        send(res, result.ok ? 200 : 503, JSON_TYPE, JSON.stringify(body), head);
        return;
      }
      default:
        send(res, 404, JSON_TYPE, JSON.stringify({ error: 'not found' }), head);
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      opts.logger?.error({ err, path: req.url }, 'ops request failed');
      if (!res.headersSent) send(res, 500, JSON_TYPE, JSON.stringify({ error: 'internal error' }), false);
      else res.destroy();
    });
  });
  // Probes and scrapes are tiny; a slow client must not hold a socket for long.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  opts.logger?.info({ url }, 'ops server listening');

  let closing: Promise<void> | null = null;
  return {
    url,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Scrapers keep connections alive; without this close() would wait for them to time out.
        server.closeIdleConnections();
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function send(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: string,
  head: boolean,
  extraHeaders: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...extraHeaders,
  });
  res.end(head ? undefined : body);
}
