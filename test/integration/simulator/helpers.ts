import { gunzipSync, inflateSync, brotliDecompressSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach } from 'vitest';
import {
  startMultiSimulator,
  startSimulator,
  type MultiSimulator,
  type MultiSimulatorShared,
  type Simulator,
  type SimulatorAccountSpec,
  type SimulatorOptions,
} from '../../../src/simulator/index.js';

// Shared plumbing of the simulator contract tests: start simulators that are closed after each test, and speak
// to them over real HTTP with undici, exactly as a client would.

/** Credentials the simulator accepts by default. */
export const DEMO = { id: 'demo-client', secret: 'demo-secret' };
/** The default credential whose tokens lack the listing scope. */
export const SCOPELESS = { id: 'scopeless-client', secret: 'scopeless-secret' };

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
});

/** Starts a simulator (throttle off unless asked for) that is closed after the current test. */
export async function sim(options: SimulatorOptions = {}): Promise<Simulator> {
  const simulator = await startSimulator({ rateLimit: null, reviewCount: 250, ...options });
  running.push(simulator);
  return simulator;
}

/** Starts a multi-account simulator that is closed after the current test. */
export async function multiSim(
  accounts: SimulatorAccountSpec[],
  shared: MultiSimulatorShared = {},
): Promise<MultiSimulator> {
  const simulator = await startMultiSimulator(accounts, shared);
  running.push(simulator);
  return simulator;
}

/** An HTTP answer with its body decoded according to Content-Encoding. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
  text: string;
  json: () => unknown;
}

/** Sends a request and reads the whole body. */
export async function call(
  url: string,
  options: { method?: 'GET' | 'POST' | 'PUT'; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const response = await request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} });
  const raw = Buffer.from(await response.body.arrayBuffer());
  const encoding = response.headers['content-encoding'];
  const decoded =
    encoding === 'gzip'
      ? gunzipSync(raw)
      : encoding === 'deflate'
        ? inflateSync(raw)
        : encoding === 'br'
          ? brotliDecompressSync(raw)
          : raw;
  const text = decoded.toString('utf8');
  return { status: response.statusCode, headers: response.headers, raw, text, json: () => JSON.parse(text) as unknown };
}

/** HTTP Basic header value. */
export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/** Asks the token endpoint; returns the raw answer. */
export function requestToken(
  base: string,
  credential = DEMO,
  query = '?grant_type=client_credentials',
): Promise<Answer> {
  return call(`${base}/oauth2/token${query}`, {
    method: 'POST',
    headers: {
      authorization: basic(credential.id, credential.secret),
      'content-type': 'application/x-www-form-urlencoded',
    },
  });
}

/** A valid access token for the credential. */
export async function token(base: string, credential = DEMO): Promise<string> {
  const answer = await requestToken(base, credential);
  if (answer.status !== 200) throw new Error(`token request failed with ${answer.status}`);
  return (answer.json() as { access_token: string }).access_token;
}

/** The listing envelope as the tests read it. */
export interface Envelope {
  count: number;
  reviews: Record<string, unknown>[];
  next_page?: string | null;
  [key: string]: unknown;
}

/** GET /v1/reviews with the given query parameters. */
export function list(
  base: string,
  accessToken: string | null,
  params: Record<string, string | number> = {},
  headers: Record<string, string> = {},
): Promise<Answer> {
  const query = new URLSearchParams(
    Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]),
  ).toString();
  const auth: Record<string, string> = accessToken === null ? {} : { authorization: `Bearer ${accessToken}` };
  return call(`${base}/v1/reviews${query === '' ? '' : `?${query}`}`, { headers: { ...auth, ...headers } });
}

/** Follows the top-level next_page cursor to the end; returns every page in order. */
export async function walk(
  base: string,
  accessToken: string,
  params: Record<string, string | number> = {},
): Promise<Envelope[]> {
  const pages: Envelope[] = [];
  let cursor: string | undefined;
  for (;;) {
    const answer = await list(base, accessToken, cursor === undefined ? params : { ...params, next_page: cursor });
    if (answer.status !== 200) throw new Error(`listing failed with ${answer.status}: ${answer.text}`);
    const page = answer.json() as Envelope;
    pages.push(page);
    if (page.next_page === undefined || page.next_page === null) return pages;
    cursor = page.next_page;
  }
}

/** The ids of a sequence of pages, flattened. */
export function idsOf(pages: Envelope[]): unknown[] {
  return pages.flatMap((page) => page.reviews.map((review) => review.id));
}
