import {
  accountStatus,
  accountSummary,
  accountsOverview,
  type AccountStatus,
  type AccountsOverview,
} from '../core/account-status.js';
import { accountKeys, liveReplicas, type BridgeRedis } from './connection.js';
import { leaseHolder } from './lease.js';
import { SnapshotStore } from './snapshot-store.js';
import { readRefusal } from './refusal.js';
import { probeRedisWrite, readReplicaHealth } from './replica-health.js';
import {
  dependencyReport,
  failureReason,
  nextDependencyState,
  type DependencyState,
} from '../core/dependency-health.js';

// Reads what `status` shows of an account (and the admin API's GET /v1/accounts) from Redis: one implementation
// for the command line and the admin API; the shape is src/core/account-status.ts.

/** Which account, under which key prefix. */
export interface AccountRef {
  account: string;
  keyPrefix: string;
}

/** One account's status as Redis records it now; `redisDurability` is what the caller knows of REDIS_WAIT_REPLICAS. */
export async function readAccountStatus(
  redis: BridgeRedis,
  ref: AccountRef,
  redisDurability: string | null,
  clock: () => number = Date.now,
): Promise<AccountStatus> {
  const keys = accountKeys(ref.keyPrefix, ref.account);
  const store = new SnapshotStore(redis, keys);
  const refusal = readRefusal(redis, keys.refused);
  const [checkpoint, snapshotReviews, lease, sweepRequested, pausedSince, pass, resync, changelog, restoreRequested] =
    await Promise.all([
      store.checkpoint(),
      store.size(),
      leaseHolder(redis, keys),
      store.sweepRequested(),
      store.pausedSince(),
      store.passProgress(),
      store.pendingResync(),
      store.changelogState(),
      store.restoreRequested(),
    ]);
  const refused = await refusal;
  const { dependencies, freshness } = await readDependencies(redis, ref, lease?.holder ?? null, clock());
  return accountStatus(
    {
      dependencies,
      freshness,
      account: ref.account,
      checkpoint,
      snapshotReviews,
      lease,
      sweepRequested,
      pausedSince,
      pass,
      resync,
      changelogTxn: changelog.txn,
      restoreRequested,
      refused,
      redisDurability,
    },
    clock(),
  );
}

/**
 * The dependencies as the account's leader last reported them, and Redis as this reader finds it: a small write,
 * so a Redis at maxmemory (noeviction) or read-only shows here even when the leader cannot report any more. The
 * leader's report also carries the bound that holds for the account's late changes.
 */
async function readDependencies(
  redis: BridgeRedis,
  ref: AccountRef,
  leader: string | null,
  now: number,
): Promise<{ dependencies: AccountStatus['dependencies']; freshness: AccountStatus['freshness'] }> {
  const prefix = ref.keyPrefix;
  const [health, written] = await Promise.all([
    leader === null ? null : readReplicaHealth(redis, prefix, leader).catch(() => null),
    probeRedisWrite(redis, prefix).then(
      () => null,
      (err: unknown) => err,
    ),
  ]);
  const report = { ...(health?.dependencies ?? {}) };
  const known = report.redis;
  const previous: DependencyState | undefined =
    known?.status === 'failing' && known.reason && known.since
      ? { status: 'failing', reason: known.reason, since: Date.parse(known.since), settings: known.settings ?? [] }
      : known?.status === 'ok' && known.since
        ? { status: 'ok', since: Date.parse(known.since) }
        : undefined;
  const failure = written === null ? null : { reason: failureReason(written) };
  report.redis = dependencyReport(nextDependencyState('redis', previous, failure, now).state);
  return {
    dependencies: { checkedBy: health?.replica ?? null, checkedAt: health?.checkedAt ?? null, report },
    freshness: health?.freshness?.[ref.account] ?? null,
  };
}

/** Every account's overview line and the live replicas of the deployment (`ttlMs`: the longest lease ttl). */
export async function readAccountsOverview(
  redis: BridgeRedis,
  refs: readonly AccountRef[],
  ttlMs: number,
): Promise<AccountsOverview> {
  const prefix = refs[0]?.keyPrefix ?? '';
  const [replicas, rows] = await Promise.all([
    liveReplicas(redis, prefix, ttlMs),
    Promise.all(
      refs.map(async (ref) => {
        const keys = accountKeys(ref.keyPrefix, ref.account);
        const store = new SnapshotStore(redis, keys);
        const [lease, checkpoint, pausedSince] = await Promise.all([
          leaseHolder(redis, keys),
          store.checkpoint(),
          store.pausedSince(),
        ]);
        return accountSummary(ref.account, checkpoint, lease?.holder ?? null, pausedSince);
      }),
    ),
  ]);
  return accountsOverview(rows, replicas, ttlMs);
}
