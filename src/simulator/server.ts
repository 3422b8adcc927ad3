import {
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { chooseEncoding, compress } from './compression.js';
import { handleControl } from './control-routes.js';
import { buildEnvelope } from './envelope.js';
import { applyRecordFaults } from './faults.js';
import { sendJson } from './http-util.js';
import { parseListingQuery } from './listing-query.js';
import type { SimulatorState } from './state.js';
import type { SimulatorControl } from './types.js';

// The simulated upstream over HTTP: the two endpoints of the spec, plus the control routes under /_control/.
// Order of checks on the API: throttle (a gateway refuses before anything else), injected latency, authentication,
// injected errors, parameters; then the page is built, faults applied, compressed, size-checked and sent.

/** Answers one request whose URL is already relative to the simulator's base (any mount prefix removed). */
export type SimulatorHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void;

/** The request handling of one simulator over the given state, to serve alone or mounted under a path prefix. */
export function createSimulatorHandler(state: SimulatorState, control: SimulatorControl): SimulatorHandler {
  return (req, res, url) => {
    // The service's own clock (skewed on purpose in tests): what its Date headers say.
    res.setHeader('Date', new Date(state.now()).toUTCString());
    handle(state, control, req, res, url).catch(() => {
      // Aborted latency on close, or a bug: never leave a client hanging, never leak details.
      if (res.headersSent || state.closing.signal.aborted) res.destroy();
      else sendJson(res, 500, { error: 'internal simulator error' });
    });
  };
}

/** An HTTP server answering like the reviews service, over the given state. */
export function createSimulatorServer(state: SimulatorState, control: SimulatorControl): Server {
  const handler = createSimulatorHandler(state, control);
  return createServer((req, res) => handler(req, res, requestUrl(req)));
}

/** The request's URL, parsed against a placeholder origin (only path and query matter). */
export function requestUrl(req: IncomingMessage): URL {
  return new URL(req.url ?? '/', 'http://simulator.invalid');
}

async function handle(
  state: SimulatorState,
  control: SimulatorControl,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  if (url.pathname.startsWith('/_control/')) return handleControl(req, res, url, control);

  // The API reads nothing from request bodies; draining keeps the connection reusable.
  req.resume();
  const api = new ApiAnswer(state, res);
  if (url.pathname === '/oauth2/token') {
    if (req.method !== 'POST') return api.json(405, { error: 'method not allowed' }, { Allow: 'POST' });
    return issueToken(state, req, url, api);
  }
  if (url.pathname === '/v1/reviews') {
    if (req.method !== 'GET') return api.json(405, { error: 'method not allowed' }, { Allow: 'GET' });
    return listReviews(state, req, url, api);
  }
  return api.json(404, { error: 'not found' });
}

/** Answers on the API, counting every answer in the stats. */
class ApiAnswer {
  constructor(
    private readonly state: SimulatorState,
    readonly res: ServerResponse,
  ) {}

  json(status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
    this.state.stats.answered(status);
    sendJson(this.res, status, body, headers);
  }

  /** Refuses the request when over the rate limit; true when it did. */
  throttled(): boolean {
    const admission = this.state.limiter?.admit();
    if (admission === undefined || admission.allowed) return false;
    this.state.stats.throttled();
    const headers = admission.retryAfterSeconds === null ? {} : { 'Retry-After': String(admission.retryAfterSeconds) };
    this.json(admission.status, { error: 'request rate limit exceeded' }, headers);
    return true;
  }

  /** Waits out the injected latency; false when the client went away meanwhile. */
  async delay(): Promise<boolean> {
    const { latencyMs } = this.state.faults.current();
    if (latencyMs > 0) await sleep(latencyMs, undefined, { signal: this.state.closing.signal });
    return !this.res.destroyed;
  }
}

async function issueToken(state: SimulatorState, req: IncomingMessage, url: URL, api: ApiAnswer): Promise<void> {
  if (api.throttled() || !(await api.delay())) return;
  const grantType = url.searchParams.get('grant_type');
  if (grantType !== 'client_credentials') {
    const error = grantType === null ? 'invalid_request' : 'unsupported_grant_type';
    return api.json(400, { error, error_description: 'query parameter grant_type must be client_credentials' });
  }
  const credential = parseBasic(req.headers.authorization);
  const scope = credential === null ? null : state.tokens.authenticate(credential.id, credential.secret);
  if (scope === null) {
    return api.json(401, { error: 'invalid_client' }, { 'WWW-Authenticate': 'Basic realm="reviews"' });
  }
  const { token, expiresIn } = state.tokens.issue(scope);
  state.stats.tokenIssued();
  api.json(200, { access_token: token, expires_in: expiresIn, token_type: 'Bearer' }, { 'Cache-Control': 'no-store' });
}

function parseBasic(header: string | undefined): { id: string; secret: string } | null {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (match === null) return null;
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

async function listReviews(state: SimulatorState, req: IncomingMessage, url: URL, api: ApiAnswer): Promise<void> {
  if (api.throttled() || !(await api.delay())) return;

  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  const check = bearer === null ? 'missing' : state.tokens.check(bearer[1] as string);
  if (check === 'missing') {
    return api.json(401, { error: 'missing bearer token' }, { 'WWW-Authenticate': 'Bearer realm="reviews"' });
  }
  if (check === 'unknown' || check === 'expired') {
    const challenge = 'Bearer realm="reviews", error="invalid_token"';
    return api.json(
      401,
      { error: `${check === 'expired' ? 'expired' : 'invalid'} access token` },
      { 'WWW-Authenticate': challenge },
    );
  }
  if (check === 'no-scope') {
    const challenge = 'Bearer realm="reviews", error="insufficient_scope"';
    return api.json(403, { error: 'token lacks the scope to list reviews' }, { 'WWW-Authenticate': challenge });
  }

  const fault = state.faults.drawStatus(url.searchParams.has('next_page'));
  if (fault !== null) {
    const headers = fault.retryAfterSeconds === undefined ? {} : { 'Retry-After': String(fault.retryAfterSeconds) };
    return api.json(fault.status, statusFaultBody(fault.status, fault.cursorOnly === true), headers);
  }

  const injected = state.faults.drawError();
  if (injected !== null) return api.json(injected, { error: 'injected fault' });

  const { options, store } = state;
  const parsed = parseListingQuery(url.searchParams, store.count(), {
    unit: options.updatedDateUnit,
    comparison: options.updatedDateComparison,
  });
  if (!parsed.ok) return api.json(400, { error: parsed.error });

  const page = store.list(parsed.query);
  // A page of a full listing (no updated_date): what a client that re-lists the whole account would ask for.
  if (parsed.query.minUpdated === null) state.stats.fullListingPage();
  const records = applyRecordFaults(page.records, state.faults.current(), options.seed);
  const envelope = buildEnvelope(records, page.nextId, options.cursorPath, options.lastPageCursor);
  await sendPage(state, req, api, Buffer.from(JSON.stringify(envelope)));
}

/** What the upstream would plausibly say with each status of the spec's error table. */
function statusFaultBody(status: number, cursor: boolean): Record<string, string> {
  switch (status) {
    case 202:
      return { status: 'accepted', message: 'request accepted, processing not completed' };
    case 400:
      return { error: cursor ? 'next_page cursor is invalid or has expired' : 'bad request' };
    case 402:
      return { error: '2FA token required: retry with the header CB-2FA-Token' };
    case 404:
      return { error: 'not found' };
    default:
      return { error: 'injected status' };
  }
}

// Payload rule: a body over the limit uncompressed is compressed even unasked (field notes); if it is still over
// the limit on the wire (or compression is off) the client gets a 400 asking for a smaller page.
async function sendPage(state: SimulatorState, req: IncomingMessage, api: ApiAnswer, plain: Buffer): Promise<void> {
  const { compression, payloadLimitBytes } = state.options;
  const forced = compression === 'always' || plain.length > payloadLimitBytes;
  const encoding = compression === 'never' ? null : chooseEncoding(req.headers['accept-encoding'], forced);
  const body = encoding === null ? plain : await compress(plain, encoding);
  if (body.length > payloadLimitBytes) {
    const error = `page of ${plain.length} bytes exceeds the payload limit of ${payloadLimitBytes} bytes; use a smaller limit`;
    return api.json(400, { error });
  }
  const headers: OutgoingHttpHeaders = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': body.length,
    Vary: 'Accept-Encoding',
  };
  if (encoding !== null) headers['Content-Encoding'] = encoding;

  const { res } = api;
  if (res.destroyed) return;
  state.stats.answered(200);
  res.writeHead(200, headers);
  if (state.faults.drawTruncation()) {
    // The headers promise the whole body; half of it arrives, then the connection drops.
    res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.destroy());
    return;
  }
  res.end(body);
}
