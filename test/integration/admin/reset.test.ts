import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { fetch } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { startAdminServer } from '../../../src/admin/server.js';
import { loadConfig } from '../../../src/config/config.js';
import { accountKeys, connectRedis } from '../../../src/redis/connection.js';
import { Lease } from '../../../src/redis/lease.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { sampleEntry } from '../../helpers/entries.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';

// An operator's reset through the admin API, on a real Redis: refused unless the account is paused; then the
// account's snapshot and checkpoint are gone (the lease, epoch and pause stay), a restore is asked of the leader,
// and one log line says who did it. This is what lifts a refusal that Redis causes (another deployment's
// checkpoint, a changelog topic created again): the leader then rebuilds from its own changelog or starts over.

const dir = mkdtempSync(join(tmpdir(), 'rb-reset-int-'));
const TOKEN = 'integration-reset-token-0123456789';
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('admin reset', () => {
  it("forgets a paused account's Redis state and asks for a restore; refused while it runs", async () => {
    const account = uniqueName('reset');
    const tokens = join(dir, `${account}.tokens`);
    writeFileSync(tokens, `oncall:${TOKEN}\n`);
    const config = loadConfig({
      BRIDGE_ACCOUNT: account,
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      UPSTREAM_CLIENT_ID: 'id',
      UPSTREAM_CLIENT_SECRET: 'secret',
      KAFKA_BROKERS: '127.0.0.1:9',
      REDIS_URL: redisUrl(),
      REDIS_KEY_PREFIX: 'rbreset',
      HTTP_HOST: '127.0.0.1',
      ADMIN_PORT: '0',
      ADMIN_TOKEN_FILE: tokens,
      FINGERPRINT_KEY_GENERATE: 'true',
    });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const server = await startAdminServer({ admin: config.admin!, accounts: [config], durability: () => null, logger });
    const redis = connectRedis(redisUrl());
    const keys = accountKeys('rbreset', account);
    const store = new SnapshotStore(redis, keys);
    const lease = new Lease(redis, keys, 30_000, Date.now, 'replica-a');
    const post = async (action: string) => {
      const res = await fetch(`${server.url}/v1/accounts/${account}/${action}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    try {
      const epoch = await lease.renew();
      const entry = { ...sampleEntry(7, 1), keyId: 1 };
      await store.commit(epoch, [[7, entry]], { watermark: 1_000, initialDone: true }, { txn: 3, offsets: { 0: 40 } });
      expect(await store.size()).toBe(1);

      // Not paused: refused, nothing touched.
      expect(await post('reset')).toMatchObject({ status: 409 });
      expect(await store.size()).toBe(1);
      expect((await store.checkpoint()).initialDone).toBe(true);

      await post('pause');
      expect(await post('reset')).toMatchObject({ status: 202, json: { account, requested: true } });
      expect(await store.size()).toBe(0);
      expect(await store.checkpoint()).toMatchObject({ initialDone: false, watermark: null });
      expect(await store.changelogState()).toMatchObject({ txn: null, offsets: {} });
      expect(await store.restoreRequested()).toBe(true);
      expect(await store.pausedSince()).not.toBeNull();
      expect(await redis.exists(keys.epoch)).toBe(1);
      const said = lines.filter((l) => String(l.msg).startsWith('account reset by an operator'));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ tokenName: 'oncall', account });
      expect(JSON.stringify(lines)).not.toContain(TOKEN);
    } finally {
      await server.close();
      await redis.quit();
    }
  });
});
