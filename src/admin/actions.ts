import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import { newResyncRequest, type ResyncRequest, type ResyncScope } from '../core/resync-request.js';
import { readAccountStatus, readAccountsOverview } from '../redis/account-status.js';
import { accountKeys, type AccountKeys, type BridgeRedis } from '../redis/connection.js';
import { leaseHolder } from '../redis/lease.js';
import { SnapshotStore } from '../redis/snapshot-store.js';
import type { RouteSpec } from './api.js';
import { parseCheckpointBody, parseEmptyBody, parseResyncBody } from './bodies.js';
import { checkpointChangeRefusal } from '../core/checkpoint-change.js';
import { readCheckpointView } from '../redis/checkpoint-view.js';
import { problem, type Answer } from './answers.js';

// What the admin API does once a request is authenticated and routed: reads status from Redis, and records an
// operator's action there exactly as the command line does (the leader takes it at its next tick).

/** What {@link AdminActions} reads and writes with. */
export interface AdminActionsDeps {
  /** The admin API's own Redis connection. */
  redis: BridgeRedis;
  accounts: readonly BridgeConfig[];
  /** What the process knows of REDIS_WAIT_REPLICAS now (null: met), for the status. */
  durability: () => string | null;
  logger: Logger;
  clock: () => number;
}

interface AccountEntry {
  account: string;
  keyPrefix: string;
  keys: AccountKeys;
  store: SnapshotStore;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The admin API's actions on the accounts of the deployment: one instance per server, over its Redis connection. */
export class AdminActions {
  private readonly accounts: ReadonlyMap<string, AccountEntry>;
  private readonly refs: readonly { account: string; keyPrefix: string }[];
  /** The longest lease ttl: a replica not seen for that long is not live. */
  private readonly replicaTtlMs: number;

  constructor(private readonly deps: AdminActionsDeps) {
    this.accounts = new Map(
      deps.accounts.map((c) => {
        const keys = accountKeys(c.redis.keyPrefix, c.account);
        const entry = {
          account: c.account,
          keyPrefix: c.redis.keyPrefix,
          keys,
          store: new SnapshotStore(deps.redis, keys),
        };
        return [c.account, entry] as const;
      }),
    );
    this.refs = deps.accounts.map((c) => ({ account: c.account, keyPrefix: c.redis.keyPrefix }));
    this.replicaTtlMs = Math.max(...deps.accounts.map((c) => c.lease.ttlMs));
  }

  /** Runs an authenticated request of a known route on a known account (or none); `who` is the token's name. */
  async run(route: RouteSpec, accountId: string | null, body: unknown, who: string): Promise<Answer> {
    const { redis, clock } = this.deps;
    const now = clock();
    if (route.action === 'list') {
      return { status: 200, outcome: 'ok', body: await readAccountsOverview(redis, this.refs, this.replicaTtlMs) };
    }
    const account = accountId === null ? undefined : this.accounts.get(accountId);
    if (!account) return problem(404, 'not_found', 'unknown account');
    const ref = { account: account.account, keyPrefix: account.keyPrefix };
    if (route.action === 'status') {
      return { status: 200, outcome: 'ok', body: await readAccountStatus(redis, ref, this.deps.durability(), clock) };
    }
    if (route.action === 'checkpoint')
      return { status: 200, outcome: 'ok', body: await readCheckpointView(redis, ref) };
    const checked =
      route.action === 'resync'
        ? parseResyncBody(body, now)
        : route.action === 'checkpoint_set'
          ? parseCheckpointBody(body, now)
          : parseEmptyBody(body);
    if (!checked.ok) return problem(400, 'bad_request', 'bad request', checked.problem);
    let done: { result: Record<string, unknown>; detail?: Record<string, unknown> };
    switch (route.action) {
      case 'pause':
        await account.store.pause(now);
        done = {
          result: { account: ref.account, paused: true, pausedSince: iso((await account.store.pausedSince()) ?? now) },
        };
        break;
      case 'resume':
        done = { result: { account: ref.account, paused: false, wasPaused: await account.store.resume() } };
        break;
      case 'sweep':
      case 'restore':
        await (route.action === 'sweep' ? account.store.requestSweep(now) : account.store.requestRestore(now));
        done = { result: await this.requested(account, now) };
        break;
      case 'resync':
        done = await this.resync(account, checked.value as ResyncScope, now);
        break;
      case 'checkpoint_set': {
        const refusal = checkpointChangeRefusal(await account.store.pausedSince());
        if (refusal !== null) return problem(409, 'conflict', 'conflict', { message: refusal });
        const { watermark } = checked.value as { watermark: number };
        await account.store.requestCheckpointChange({ watermark, requestedAt: now, by: who });
        done = {
          result: { ...(await this.requested(account, now)), watermark: iso(watermark) },
          detail: { watermark: iso(watermark) },
        };
        break;
      }
      case 'reset':
        // Deliberate and destructive: only on a paused account, so that nothing runs against it meanwhile.
        if (!(await account.store.reset(now))) {
          return problem(409, 'conflict', 'the account is not paused: pause it before a reset');
        }
        this.deps.logger.warn(
          { tokenName: who, account: ref.account },
          "account reset by an operator: its Redis state is gone; the leader rebuilds it from this deployment's changelog or starts over",
        );
        done = { result: await this.requested(account, now) };
        break;
      default:
        return problem(404, 'not_found', 'not found');
    }
    // Who did what to which account, once: the token's name, never the token.
    this.deps.logger.info(
      { tokenName: who, action: route.action, account: ref.account, ...done.detail },
      'admin action',
    );
    return { status: route.status, outcome: 'ok', body: done.result };
  }

  /** Records a resync request; its answer and the log line's detail (the request id, the scope's kind and size). */
  private async resync(
    account: AccountEntry,
    scope: ResyncScope,
    now: number,
  ): Promise<{ result: Record<string, unknown>; detail: Record<string, unknown> }> {
    const request: ResyncRequest = newResyncRequest(scope, now);
    await account.store.requestResync(request);
    return {
      result: { ...(await this.requested(account, now)), id: request.id, scope: request.scope },
      detail: { requestId: request.id, scope: scope.kind, ...(scope.kind === 'ids' ? { ids: scope.ids.length } : {}) },
    };
  }

  /** The answer to a recorded request: when, and which replica leads the account to take it. */
  private async requested(account: AccountEntry, now: number): Promise<Record<string, unknown>> {
    const lease = await leaseHolder(this.deps.redis, account.keys);
    return { account: account.account, requested: true, requestedAt: iso(now), leader: lease?.holder ?? null };
  }
}
