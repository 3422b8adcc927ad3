import { afterAll, describe, expect, it } from 'vitest';
import { newResyncRequest } from '../../../src/core/resync-request.js';
import { accountKeys, connectRedis } from '../../../src/redis/connection.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// Operator requests on the real Redis: a resync taken by a leader that dies before it completes is resumed by the
// next leader (it stays in the active key until finished), and a restore request is taken once.

const redis = connectRedis(redisUrl());
afterAll(async () => {
  await redis.quit();
});

describe('operator requests', () => {
  it('a resync taken and not finished is handed to the next leader; a finished one is gone', async () => {
    const keys = accountKeys('it-requests', uniqueName('acct'));
    const leader = new SnapshotStore(redis, keys);
    const request = newResyncRequest({ kind: 'ids', ids: [1, 2] }, Date.now());
    await leader.requestResync(request);
    expect(await leader.takeResyncRequest()).toEqual(request);
    // The leader is SIGKILLed here: a new leader (another store, same keys) gets the same request back.
    const next = new SnapshotStore(redis, keys);
    expect(await next.takeResyncRequest()).toEqual(request);
    expect(await next.pendingResync()).toEqual(request);
    // A newer request waits behind the active one, and runs once the active one is finished.
    const later = newResyncRequest({ kind: 'all' }, Date.now());
    await next.requestResync(later);
    await next.finishResync(request);
    expect(await next.takeResyncRequest()).toEqual(later);
    await next.finishResync(later);
    expect(await next.takeResyncRequest()).toBeNull();
  });

  it('a restore request is taken once', async () => {
    const store = new SnapshotStore(redis, accountKeys('it-requests', uniqueName('acct')));
    expect(await store.takeRestoreRequest()).toBe(false);
    await store.requestRestore();
    expect(await store.restoreRequested()).toBe(true);
    expect(await store.takeRestoreRequest()).toBe(true);
    expect(await store.takeRestoreRequest()).toBe(false);
  });
});
