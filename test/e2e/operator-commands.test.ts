import type { ResyncRequest } from '../../src/core/resync-request.js';
import { afterEach, describe, expect, it } from 'vitest';
import { accountKeys, connectRedis } from '../../src/redis/connection.js';
import { startSimulator } from '../../src/simulator/index.js';
import { SnapshotStore } from '../../src/redis/snapshot-store.js';
import { testEnv } from '../helpers/bridge.js';
import { runCli, runCliFull } from '../helpers/processes.js';
import { openRedis, redisAddress } from '../helpers/topologies.js';

// The operator commands of issue 11 as an operator runs them: separate processes against the real Redis (and, for
// a sweep run in place, the simulator and Kafka). What the leader does with the flags is the loop's part.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function storeOf(env: Record<string, string>): SnapshotStore {
  // The bridge's own Redis, whatever the topology the run selected (TEST_TOPOLOGY).
  const address = redisAddress(env);
  const redis = connectRedis(
    typeof address === 'string' ? address : { target: address, waitReplicas: 0, waitTimeoutMs: 1_000 },
  );
  cleanups.push(async () => void (await redis.quit()));
  return new SnapshotStore(redis, accountKeys(env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!));
}

describe('operator commands', () => {
  it('pause, status, resume and resync requests go through Redis; bad arguments exit 2 with a clear message', async () => {
    const env = testEnv('http://127.0.0.1:9');
    const store = storeOf(env);

    const paused = JSON.parse(await runCli('pause', env));
    expect(paused.paused).toBe(true);
    const since = await store.pausedSince();
    expect(since).not.toBeNull();
    // The name status and the admin API use, and the former one kept for scripts.
    const pausedSince = new Date(since!).toISOString();
    expect(paused).toMatchObject({ account: env.BRIDGE_ACCOUNT, pausedSince, since: pausedSince });
    const status = JSON.parse(await runCli('status', env));
    expect(status).toMatchObject({ paused: true, pausedSince: new Date(since!).toISOString(), progress: null });

    expect(JSON.parse(await runCli('resume', env))).toMatchObject({ paused: false, wasPaused: true });
    expect(await store.pausedSince()).toBeNull();
    expect(JSON.parse(await runCli('status', env)).paused).toBe(false);

    const requested = JSON.parse(await runCli(['resync', '--ids', '5,3'], env));
    expect(requested).toMatchObject({ requested: true, scope: { kind: 'ids', ids: [3, 5] } });
    expect(JSON.parse(await runCli('status', env)).resyncRequested).toMatchObject({
      id: requested.id,
      scope: { kind: 'ids' },
    });
    const taken = await store.takeResyncRequest();
    expect(taken).toMatchObject({ id: requested.id, scope: { kind: 'ids', ids: [3, 5] } });
    // Taken, it stays active until its resync completes (a leader killed meanwhile hands it to the next one).
    expect(await store.takeResyncRequest()).toEqual(taken);
    await store.finishResync(taken as ResyncRequest);
    expect(await store.takeResyncRequest()).toBeNull();

    const bad = await runCliFull(['resync', '--ids', '1,x'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('reviews-bridge resync: --ids: "x" is not a review id');
    expect(await store.takeResyncRequest()).toBeNull();
    const none = await runCliFull(['resync'], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('exactly one of --ids 1,2,3 | --since <date> | --all');
  });

  it('sweep --wait without a leader runs the sweep here and reports progress as plain lines', async () => {
    const sim = await startSimulator({ reviewCount: 1_500, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, { UPSTREAM_PAGE_SIZE: '50' });
    const result = await runCliFull(['sweep', '--wait'], env, 120_000);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ completed: true, kind: 'initial' });
    const lines = result.stderr.split('\n').filter((l) => l.startsWith('sweep '));
    expect(lines.length).toBeGreaterThan(0);
    // The last line gives the count the sweep ended at, not the last sample against the estimate.
    expect(lines.at(-1)).toMatch(/^sweep 1500\/1500 100\.0% .* completed$/);
    expect(lines.slice(0, -1).every((l) => !l.includes(' 100.0% '))).toBe(true);
    expect(result.stderr).not.toContain('\r');
    const unknown = await runCliFull(['sweep', '--now'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      'reviews-bridge sweep: unknown argument "--now" (sweep takes only --wait, --account <id>)\n',
    );

    // Redis loses the account's snapshot; `restore` without a leader rebuilds it from the Kafka changelog.
    const keys = accountKeys(env.REDIS_KEY_PREFIX!, env.BRIDGE_ACCOUNT!);
    const redis = openRedis(redisAddress(env));
    cleanups.push(async () => void (await redis.quit()));
    const buckets = await redis.keys(`${keys.bucketPattern}`);
    await redis.del(keys.checkpoint, keys.count, ...buckets);
    const restored = await runCliFull('restore', env, 120_000);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ restored: true, snapshotReviews: 1_500 });
  });
});
