import { afterEach } from 'vitest';
import { startSimulator, type Simulator } from '../../../src/simulator/index.js';
import { createUpstreamClient, type UpstreamClient, type UpstreamClientConfig } from '../../../src/upstream/client.js';
import { fileOrEnvCredentials } from '../../../src/upstream/credentials.js';
import type { ListOptions, Page, Reject, UpstreamHooks } from '../../../src/upstream/types.js';
import type { Review } from '../../../src/core/review.js';

// Shared plumbing of the upstream integration tests: a client with recording hooks, and a pass drained to arrays.

/** Everything the hooks reported, for assertions on behaviour. */
export interface HookLog {
  requests: { endpoint: string; status: number; sentAt: number; doneAt: number }[];
  throttled: { status: number; retryAfter: number | null }[];
  retries: { endpoint: string; reason: string }[];
  tokenRefreshes: string[];
  limiterWaitSeconds: number;
  rejects: string[];
  unknownStatuses: string[];
  pageShrinks: string[];
}

/** Hooks that append to a HookLog. */
export function recordingHooks(): { hooks: UpstreamHooks; log: HookLog } {
  const log: HookLog = {
    requests: [],
    throttled: [],
    retries: [],
    tokenRefreshes: [],
    limiterWaitSeconds: 0,
    rejects: [],
    unknownStatuses: [],
    pageShrinks: [],
  };
  const hooks: UpstreamHooks = {
    onRequest: (endpoint, status, seconds) => {
      const doneAt = performance.now();
      log.requests.push({ endpoint, status, sentAt: doneAt - seconds * 1000, doneAt });
    },
    onThrottled: (status, retryAfter) => log.throttled.push({ status, retryAfter }),
    onRetry: (endpoint, reason) => log.retries.push({ endpoint, reason }),
    onTokenRefresh: (outcome) => log.tokenRefreshes.push(outcome),
    onLimiterWait: (_kind, seconds) => {
      log.limiterWaitSeconds += seconds;
    },
    onReject: (reason) => log.rejects.push(reason),
    onUnknownStatus: (field) => log.unknownStatuses.push(field),
    onPageShrunk: (reason) => log.pageShrinks.push(reason),
  };
  return { hooks, log };
}

/** The simulator's default scoped credentials. */
export const DEMO = { clientId: 'demo-client', clientSecret: 'demo-secret' };

/** A client against `baseUrl` with literal credentials and fast retries unless overridden. */
export function testClient(
  baseUrl: string,
  overrides: Partial<UpstreamClientConfig> = {},
  credentials: { clientId: string; clientSecret: string } = DEMO,
): { client: UpstreamClient; log: HookLog } {
  const { hooks, log } = recordingHooks();
  const client = createUpstreamClient(
    {
      baseUrl,
      credentials: fileOrEnvCredentials({
        clientId: { value: credentials.clientId },
        clientSecret: { value: credentials.clientSecret },
      }),
      backoff: { baseMs: 20, capMs: 200 },
      ...overrides,
    },
    hooks,
  );
  return { client, log };
}

/** A whole pass, collected. */
export interface Drained {
  pages: Page[];
  reviews: Review[];
  rejects: Reject[];
}

/** Runs a pass to its end; `onPage` runs after each page is collected (e.g. to revoke tokens mid-pass). */
export async function drain(
  client: UpstreamClient,
  options: Partial<ListOptions> = {},
  onPage?: (index: number) => void | Promise<void>,
): Promise<Drained> {
  const out: Drained = { pages: [], reviews: [], rejects: [] };
  for await (const page of client.pages({ kind: 'sweep', ...options })) {
    out.pages.push(page);
    out.reviews.push(...page.reviews);
    out.rejects.push(...page.rejects);
    await onPage?.(out.pages.length - 1);
  }
  return out;
}

/** Ids 1..n, for comparing a full pass with the simulator's store. */
export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** The rejection of a promise (fails the test if it resolves). */
export async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the operation to fail');
}

/** Simulators and clients a test file starts, closed after each test (`cleanup` takes anything else). */
export function perTestResources(): {
  simulator(opts: Parameters<typeof startSimulator>[0]): Promise<Simulator>;
  track<T extends { client: UpstreamClient }>(made: T): T;
  cleanup: (() => Promise<unknown>)[];
} {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });
  return {
    async simulator(opts) {
      const sim = await startSimulator(opts);
      cleanup.push(() => sim.close());
      return sim;
    },
    track(made) {
      cleanup.push(() => made.client.close());
      return made;
    },
    cleanup,
  };
}
