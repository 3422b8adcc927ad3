import { createServer } from 'node:http';
import { createControl } from './control.js';
import { sendJson } from './http-util.js';
import { listen } from './listen.js';
import { DEFAULT_OPTIONS, resolveOptions, SimulatorConfigError, type ResolvedOptions } from './options.js';
import { createSimulatorHandler, requestUrl, type SimulatorHandler } from './server.js';
import { SimulatorState } from './state.js';
import type { SimulatorControl, SimulatorOptions } from './types.js';

// Several upstream accounts behind one HTTP server, for a bridge that serves many accounts from one process. Each
// account is a whole simulator (data, credentials, tokens, rate limit, faults, control) mounted under
// /accounts/<id>, so its base URL is <url>/accounts/<id> and single-account clients work on it unchanged.

/** One account to serve: its id (a URL path segment) and its simulator options (host and port are shared). */
export interface SimulatorAccountSpec {
  id: string;
  options?: Omit<SimulatorOptions, 'host' | 'port'>;
}

/** Where the shared server listens. */
export interface MultiSimulatorShared {
  host?: string;
  port?: number;
}

/** One served account: its base URL, its control and the credentials its token endpoint accepts. */
export interface SimulatorAccount {
  id: string;
  /** Base URL of the account, <server url>/accounts/<id>. */
  url: string;
  control: SimulatorControl;
  clientId: string;
  clientSecret: string;
  scopelessClientId: string;
  scopelessClientSecret: string;
}

/** A running multi-account simulator. */
export interface MultiSimulator {
  /** Server URL, e.g. http://127.0.0.1:12345 (accounts live under /accounts/<id>). */
  url: string;
  /** The accounts by id, in the order given. */
  accounts: Map<string, SimulatorAccount>;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ACCOUNT_PATH = /^\/accounts\/([^/]+)(\/.*)?$/;

/** Default credentials of an account: distinct per account so that a mixed-up bridge configuration is refused. */
export function defaultAccountCredentials(
  id: string,
): Pick<SimulatorOptions, 'clientId' | 'clientSecret' | 'scopelessClientId' | 'scopelessClientSecret'> {
  return {
    clientId: `client-${id}`,
    clientSecret: `secret-${id}`,
    scopelessClientId: `scopeless-${id}`,
    scopelessClientSecret: `scopeless-secret-${id}`,
  };
}

/**
 * Starts one server serving every account under /accounts/<id>; throws SimulatorConfigError (naming the account)
 * on a bad id or option. An account without a seed gets the default seed plus its index, so accounts hold
 * different data unless told otherwise.
 */
export async function startMultiSimulator(
  specs: readonly SimulatorAccountSpec[],
  shared: MultiSimulatorShared = {},
): Promise<MultiSimulator> {
  if (specs.length === 0) throw new SimulatorConfigError('invalid simulator setting accounts: at least one account');
  const host = shared.host ?? DEFAULT_OPTIONS.host;
  const port = shared.port ?? DEFAULT_OPTIONS.port;
  resolveOptions({ host, port });

  const mounted = new Map<
    string,
    { state: SimulatorState; handler: SimulatorHandler; account: Omit<SimulatorAccount, 'url'> }
  >();
  specs.forEach((spec, index) => {
    if (!ACCOUNT_ID.test(spec.id)) {
      throw new SimulatorConfigError(
        `invalid simulator setting accounts.id: '${spec.id}' must be 1-64 letters, digits, '.', '_' or '-'`,
      );
    }
    if (mounted.has(spec.id))
      throw new SimulatorConfigError(`invalid simulator setting accounts.id: '${spec.id}' twice`);
    const given = (spec.options ?? {}) as SimulatorOptions;
    if (given.host !== undefined || given.port !== undefined) {
      throw new SimulatorConfigError(`account ${spec.id}: host and port are shared by all accounts`);
    }
    const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
    let options: ResolvedOptions;
    try {
      options = resolveOptions({
        ...defaultAccountCredentials(spec.id),
        seed: DEFAULT_OPTIONS.seed + index,
        ...defined,
        host,
        port,
      });
    } catch (error) {
      if (error instanceof SimulatorConfigError) throw new SimulatorConfigError(`account ${spec.id}: ${error.message}`);
      throw error;
    }
    const state = new SimulatorState(options);
    const control = createControl(state);
    mounted.set(spec.id, {
      state,
      handler: createSimulatorHandler(state, control),
      account: {
        id: spec.id,
        control,
        clientId: options.clientId,
        clientSecret: options.clientSecret,
        scopelessClientId: options.scopelessClientId,
        scopelessClientSecret: options.scopelessClientSecret,
      },
    });
  });

  const server = createServer((req, res) => {
    const url = requestUrl(req);
    const match = ACCOUNT_PATH.exec(url.pathname);
    const target = match === null ? undefined : mounted.get(match[1] as string);
    if (target === undefined) {
      // Nothing is read from the body; draining keeps the connection reusable.
      req.resume();
      const error = match === null ? 'not found: accounts are served under /accounts/<id>' : 'no such account';
      return sendJson(res, 404, { error });
    }
    url.pathname = match?.[2] ?? '/';
    target.handler(req, res, url);
  });
  const listening = await listen(server, host, port, () => {
    for (const { state } of mounted.values()) state.closing.abort();
  });

  const accounts = new Map<string, SimulatorAccount>();
  for (const [id, { account }] of mounted) accounts.set(id, { ...account, url: `${listening.url}/accounts/${id}` });
  return { url: listening.url, accounts, close: listening.close };
}
