import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import type { UpstreamClient } from '../../../src/upstream/client.js';
import { UpstreamError, isUpstreamError } from '../../../src/upstream/errors.js';
import { drain, failure, testClient } from './helpers.js';

// Edges the simulator does not produce, each from a tiny node:http server of the test's own: a cursor loop, a
// link-shaped cursor, an error body echoing credentials and e-mails, each content coding, dead and slow servers.

const TOKEN = 'tok-0123456789abcdef';
const SECRET = 'Local-Secret-Value-99';

type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => void;

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Serves a token at /oauth2/token and hands /v1/reviews to `listing`. */
async function upstream(listing: Handler): Promise<{ url: string; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://local.invalid');
    req.resume();
    if (url.pathname === '/oauth2/token') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: TOKEN, expires_in: 3600, token_type: 'Bearer' }));
      return;
    }
    seen.push(req);
    listing(req, res, url);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function review(id: number): Record<string, unknown> {
  return {
    id,
    updated_date: 1_700_000_000_000 + id,
    client_publication_status: 'APPROVED',
    pwr_publication_status: 'APPROVED',
  };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function track<T extends { client: UpstreamClient }>(made: T): T {
  cleanup.push(() => made.client.close());
  return made;
}

const creds = { clientId: 'local-client', clientSecret: SECRET };

describe('upstream client edge cases (local servers)', () => {
  it('detects a cursor loop and fails clearly instead of paging forever', async () => {
    const next: Record<string, string> = { first: 'a', a: 'b', b: 'a' };
    const server = await upstream((_req, res, url) => {
      const cursor = url.searchParams.get('next_page') ?? 'first';
      json(res, 200, { count: 1, reviews: [review(cursor.length)], next_page: next[cursor] });
    });
    const { client } = track(testClient(server.url, {}, creds));
    const pages: (string | null)[] = [];

    const err = await failure(
      (async () => {
        for await (const page of client.pages({ kind: 'sweep' })) pages.push(page.cursor);
      })(),
    );

    expect(isUpstreamError(err, 'cursor_loop')).toBe(true);
    expect(err.message).toMatch(/cursor loop: page 3 of this pass announced next cursor 'a'/);
    expect(pages).toEqual([null, 'a']);
    expect(server.seen).toHaveLength(3);
  });

  it('follows a links.next URL by its next_page parameter', async () => {
    const server = await upstream((_req, res, url) => {
      const page = Number(url.searchParams.get('next_page') ?? '1');
      const links = page < 3 ? { next: `http://elsewhere.example/v1/reviews?limit=100&next_page=${page + 1}` } : {};
      json(res, 200, { count: 1, reviews: [review(page)], links });
    });
    const { client } = track(testClient(server.url, {}, creds));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual([1, 2, 3]);
  });

  it('never lets an echoed Authorization header, token, secret or e-mail into an error message', async () => {
    const server = await upstream((req, res) => {
      const echo = `bad request from jane.doe@example.com with ${req.headers.authorization} (${TOKEN}, ${SECRET})`;
      json(res, 400, { error: echo });
    });
    const { client } = track(testClient(server.url, {}, creds));

    const err = await failure(drain(client));

    expect(isUpstreamError(err, 'client')).toBe(true);
    expect(err.message).toMatch(/answered 400/);
    for (const leak of [TOKEN, SECRET, 'jane.doe@example.com', 'Bearer tok']) expect(err.message).not.toContain(leak);
    // A 400 is not retried as if transient; it is only asked again for smaller pages (the way the upstream refuses
    // a page over its payload limit), then given up on.
    const limits = server.seen.map((req) => new URL(req.url ?? '/', 'http://x').searchParams.get('limit'));
    expect(limits).toEqual(['100', '50', '25', '12', '6', '3', '1']);
  });

  it('does not retry a 404, and names it a configuration error', async () => {
    const server = await upstream((_req, res) => json(res, 404, { error: 'not found' }));
    const { client } = track(testClient(server.url, {}, creds));
    const err = await failure(drain(client));
    expect(isUpstreamError(err, 'config')).toBe(true);
    expect((err as UpstreamError).status).toBe(404);
    expect(server.seen).toHaveLength(1);
  });

  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const)('decodes %s sent although the client asked for identity', async (coding, compress) => {
    const server = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding });
      res.end(compress(Buffer.from(JSON.stringify({ count: 2, reviews: [review(1), review(2)] }))));
    });
    const { client } = track(testClient(server.url, { requestCompression: false }, creds));

    const pass = await drain(client);

    expect(pass.reviews.map((r) => r.id)).toEqual([1, 2]);
    expect(server.seen[0]!.headers['accept-encoding']).toBe('identity');
  });

  it('retries a 200 whose envelope is not a listing, then gives up with a body error', async () => {
    const server = await upstream((_req, res) => json(res, 200, { maintenance: true }));
    const { client } = track(testClient(server.url, { maxRetries: 2 }, creds));
    const err = await failure(drain(client));
    expect(isUpstreamError(err, 'body')).toBe(true);
    expect(err.message).toMatch(/no reviews array \(reviews is missing\); gave up after 3 attempts/);
    expect(server.seen).toHaveLength(3);
  });

  it('retries an unreachable upstream as a network error and names it', async () => {
    const server = await upstream(() => undefined);
    // The server is closed (and its port free) once its cleanup resolves.
    await Promise.all(cleanup.splice(0).map((fn) => fn()));
    const { client } = track(testClient(server.url, { maxRetries: 2 }, creds));

    const err = await failure(client.checkCredentials());

    expect(isUpstreamError(err, 'network')).toBe(true);
    expect(err.message).toMatch(/token endpoint: connection failed: .*ECONNREFUSED.*gave up after 3 attempts/);
  });

  it('times out a server that never answers, as a retryable network error', async () => {
    const server = await upstream(() => undefined);
    const { client, log } = track(testClient(server.url, { maxRetries: 1, timeouts: { headersMs: 200 } }, creds));

    const err = await failure(drain(client));

    expect(isUpstreamError(err, 'network')).toBe(true);
    expect(err.message).toMatch(/headers timeout/);
    expect(log.retries).toEqual([{ endpoint: 'reviews', reason: 'timeout' }]);
  });

  it('aborts promptly with the caller signal reason (graceful shutdown), not an UpstreamError', async () => {
    // The shutdown comes while the listing request is in flight: once the server has it (and never answers).
    const controller = new AbortController();
    const server = await upstream(() => controller.abort(new Error('shutting down')));
    const { client } = track(testClient(server.url, {}, creds));

    const err = await failure(drain(client, { signal: controller.signal }));

    expect(err.message).toBe('shutting down');
    expect(err).not.toBeInstanceOf(UpstreamError);
  });
});
