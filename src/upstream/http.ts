import { EnvHttpProxyAgent, Pool, type Dispatcher } from 'undici';
import { pipeline } from 'node:stream/promises';
import { rootCertificates as tlsRootCertificates } from 'node:tls';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createUnzip } from 'node:zlib';
import { UpstreamError, redact, type Endpoint } from './errors.js';
import { deadlineSignal, linkSignals } from './signals.js';

// The transport: one keep-alive undici Pool to the upstream origin, per-phase timeouts, and a body reader that
// decodes Content-Encoding while streaming and counts decoded bytes, so a 10 MB cap holds even for a small
// compressed body that inflates to gigabytes. It knows nothing about tokens, retries or JSON; it only turns
// every failure into an UpstreamError whose kind says whether another attempt makes sense.

/** Timeouts of one request, in milliseconds. */
export interface HttpTimeouts {
  /** TCP (and TLS) connection establishment. */
  connectMs: number;
  /** From sending the request to receiving the response headers. */
  headersMs: number;
  /** Maximum idle time between two body chunks. */
  bodyMs: number;
  /** Whole request, headers and body included: the last resort against a trickling server. */
  requestMs: number;
}

/** Default timeouts: quick to connect, generous for a slow page. */
export const DEFAULT_TIMEOUTS: HttpTimeouts = {
  connectMs: 10_000,
  headersMs: 30_000,
  bodyMs: 30_000,
  requestMs: 60_000,
};

/** Options of the transport. */
export interface HttpTransportOptions {
  timeouts: HttpTimeouts;
  /** Cap of the decoded body of a successful response. */
  maxBodyBytes: number;
  /** Keep-alive connections in the pool (a pager needs 1-2; incremental and sweep passes may overlap). */
  connections?: number;
  /** Ask for compressed responses; decoding happens whenever the server compresses, asked or not. */
  requestCompression?: boolean;
  /** PEM CA bundle trusted for the upstream's certificate, in addition to the system CAs (UPSTREAM_CA_FILE). */
  ca?: Buffer;
  /** The environment read for HTTPS_PROXY / HTTP_PROXY / NO_PROXY (lower-case forms too). Default process.env. */
  env?: NodeJS.ProcessEnv;
}

const PROXY_VARS = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'];

/** One request as the client sends it. */
export interface HttpRequest {
  endpoint: Endpoint;
  method: 'GET' | 'POST';
  /** Path relative to the base URL, with its query string ('/v1/reviews?limit=100'). */
  path: string;
  headers: Record<string, string>;
  signal?: AbortSignal;
}

/** A response with its body fully read and decoded. */
export interface HttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

// pipeline()'s overloads cannot type a variable number of decoders ahead of an async sink; the array form runs
// the same at runtime.
type PipelineStages = readonly NodeJS.ReadWriteStream[];

/** Error bodies are read only for a message excerpt and to keep the connection reusable. */
const ERROR_BODY_BYTES = 64 * 1024;

/** HTTP transport to one upstream origin over a keep-alive pool. */
export class HttpTransport {
  private readonly pool: Dispatcher;
  private readonly origin: string;
  private readonly prefix: string;
  private readonly options: HttpTransportOptions;

  constructor(baseUrl: string, options: HttpTransportOptions) {
    const url = new URL(baseUrl);
    this.prefix = url.pathname.replace(/\/+$/, '');
    this.options = options;
    this.origin = url.origin;
    // The system CAs stay trusted: a custom bundle is added to them, not put in their place.
    const tls = options.ca ? { ca: [...tlsRootCertificates, options.ca.toString('utf8')] } : {};
    const common = {
      connections: options.connections ?? 4,
      headersTimeout: options.timeouts.headersMs,
      bodyTimeout: options.timeouts.bodyMs,
      keepAliveTimeout: 30_000,
      // undici 8 negotiates HTTP/2 over TLS by default; the client's connection count, timeouts and error
      // classification are built and tested for HTTP/1.1, so it stays on HTTP/1.1.
      allowH2: false,
    };
    const env = options.env ?? process.env;
    // With a proxy configured, undici's EnvHttpProxyAgent decides per request (NO_PROXY) and tunnels https
    // through CONNECT; otherwise one Pool to the origin, as before.
    this.pool = PROXY_VARS.some((v) => env[v])
      ? new EnvHttpProxyAgent({
          ...common,
          httpProxy: env.HTTP_PROXY ?? env.http_proxy ?? '',
          httpsProxy: env.HTTPS_PROXY ?? env.https_proxy ?? '',
          noProxy: env.NO_PROXY ?? env.no_proxy ?? '',
          connect: { timeout: options.timeouts.connectMs, ...tls },
          requestTls: { timeout: options.timeouts.connectMs, ...tls },
        })
      : new Pool(url.origin, { ...common, connect: { timeout: options.timeouts.connectMs, ...tls } });
  }

  /**
   * Sends a request and reads its body (decoded, capped). Throws UpstreamError ('network', 'body', 'too_large');
   * when the caller's signal aborts, rethrows its reason instead.
   */
  async request(req: HttpRequest): Promise<HttpResponse> {
    const deadline = deadlineSignal(this.options.timeouts.requestMs);
    const linked = linkSignals(req.signal, deadline.signal);
    try {
      return await this.send(req, linked.signal, deadline.signal);
    } finally {
      deadline.dispose();
      linked.dispose();
    }
  }

  /** Closes the pool; in-flight requests are allowed to finish. */
  async close(): Promise<void> {
    await this.pool.close();
  }

  private async send(req: HttpRequest, signal: AbortSignal, deadline: AbortSignal): Promise<HttpResponse> {
    const headers: Record<string, string> = {
      'accept-encoding': this.options.requestCompression === false ? 'identity' : 'gzip, deflate, br',
      ...req.headers,
    };
    let response: Dispatcher.ResponseData;
    try {
      response = await this.pool.request({
        origin: this.origin,
        method: req.method,
        path: this.prefix + req.path,
        headers,
        signal,
      });
    } catch (err) {
      throw this.failure(req, err, 'request', deadline);
    }
    const ok = response.statusCode >= 200 && response.statusCode < 300;
    const limit = ok ? this.options.maxBodyBytes : ERROR_BODY_BYTES;
    try {
      const body = await readBody(response.body, response.headers, limit, req.endpoint, ok);
      return { status: response.statusCode, headers: response.headers, body };
    } catch (err) {
      response.body.destroy();
      if (err instanceof UpstreamError) throw err;
      throw this.failure(req, err, 'body', deadline);
    }
  }

  private failure(req: HttpRequest, err: unknown, phase: 'request' | 'body', deadline: AbortSignal): unknown {
    if (req.signal?.aborted) return req.signal.reason ?? err;
    const code = errorCode(err);
    const where = `${req.method} ${req.endpoint === 'token' ? 'token endpoint' : 'review listing'}`;
    if (deadline.aborted) {
      return new UpstreamError('network', `${where}: no complete answer within ${this.options.timeouts.requestMs} ms`, {
        endpoint: req.endpoint,
        reason: 'timeout',
        cause: err,
      });
    }
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      const what =
        code === 'UND_ERR_CONNECT_TIMEOUT' ? 'connect' : code === 'UND_ERR_HEADERS_TIMEOUT' ? 'headers' : 'body';
      return new UpstreamError('network', `${where}: ${what} timeout (${code})`, {
        endpoint: req.endpoint,
        reason: 'timeout',
        cause: err,
      });
    }
    const message = redact(err instanceof Error ? err.message : String(err));
    if (phase === 'body') {
      // The headers came, the body did not arrive whole: a cut connection, a short Content-Length, a broken stream.
      const reason = isZlibError(code) ? 'decode' : 'truncated';
      return new UpstreamError(
        'body',
        `${where}: response body ${reason === 'decode' ? 'undecodable' : 'truncated'}: ${message} (${code ?? 'error'})`,
        {
          endpoint: req.endpoint,
          reason,
          cause: err,
        },
      );
    }
    return new UpstreamError('network', `${where}: connection failed: ${message} (${code ?? 'error'})`, {
      endpoint: req.endpoint,
      reason: 'connection',
      cause: err,
    });
  }
}

function errorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

function isZlibError(code: string | undefined): boolean {
  return code !== undefined && (code.startsWith('Z_') || code.startsWith('ERR_BROTLI') || code === 'ERR__ERROR');
}

/** Decoders for a Content-Encoding header, in the order they must be applied (the reverse of the header's). */
export function decodersFor(
  contentEncoding: string | string[] | undefined,
  endpoint: Endpoint,
): NodeJS.ReadWriteStream[] {
  const header = Array.isArray(contentEncoding) ? contentEncoding.join(',') : (contentEncoding ?? '');
  const codings = header
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  return codings.reverse().map((coding) => {
    switch (coding) {
      case 'gzip':
      case 'x-gzip':
      case 'deflate':
        // Unzip detects the gzip and zlib wrappers by their header, so a mislabelled one still decodes.
        return createUnzip();
      case 'br':
        return createBrotliDecompress();
      default:
        throw new UpstreamError('body', `unsupported Content-Encoding '${coding.slice(0, 32)}'`, {
          endpoint,
          reason: 'encoding',
        });
    }
  });
}

/**
 * Reads a body through its decoders, counting decoded bytes and aborting past `limit`. For a successful
 * response that is a too_large failure; an error body is only cut short (it serves for an excerpt).
 */
export async function readBody(
  body: Readable,
  headers: Record<string, string | string[] | undefined>,
  limit: number,
  endpoint: Endpoint,
  enforce = true,
): Promise<Buffer> {
  const decoders = decodersFor(headers['content-encoding'], endpoint);
  const declared = Number(headers['content-length']);
  if (enforce && decoders.length === 0 && Number.isFinite(declared) && declared > limit) {
    throw tooLarge(limit, endpoint, `Content-Length ${declared}`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  let cut = false;
  let refused: UpstreamError | null = null;
  const sink = async (source: AsyncIterable<Buffer>): Promise<void> => {
    for await (const chunk of source) {
      total += chunk.length;
      if (total > limit) {
        if (enforce) {
          refused = tooLarge(limit, endpoint, 'decoded body');
          throw refused;
        }
        chunks.push(chunk.subarray(0, chunk.length - (total - limit)));
        cut = true;
        return;
      }
      chunks.push(chunk);
    }
  };
  try {
    await pipeline([body, ...decoders, sink] as unknown as PipelineStages);
  } catch (err) {
    // pipeline() may report the teardown (an AbortError of the source) instead of the sink's own error.
    if (refused) throw refused;
    // A cut error body ends its stream early on purpose; anything else propagates.
    if (!cut) throw err;
  }
  return Buffer.concat(chunks);
}

function tooLarge(limit: number, endpoint: Endpoint, what: string): UpstreamError {
  return new UpstreamError(
    'too_large',
    `${endpoint === 'token' ? 'token' : 'listing'} response too large: ${what} exceeds the ${limit}-byte cap (maxBodyBytes); refusing to buffer it`,
    { endpoint, reason: 'too_large' },
  );
}
