import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Agent, fetch } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { startAdminServer } from '../../../src/admin/server.js';
import { TokenFile } from '../../../src/admin/tokens.js';
import { loadConfig } from '../../../src/config/config.js';
import { accountKeys, connectRedis } from '../../../src/redis/connection.js';
import { SnapshotStore } from '../../../src/redis/snapshot-store.js';
import { makeCerts } from '../../helpers/secure-servers.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';
import { waitFor } from '../../helpers/wait.js';

// The admin server against a real Redis (no bridge running): HTTPS with a certificate renewed in place, the actions
// recorded under the account's keys exactly as the command line records them, and the token file re-read when a
// Kubernetes-style symlink swap replaces it.

const dir = mkdtempSync(join(tmpdir(), 'rb-admin-int-'));
const TOKEN = 'integration-admin-token-0123456789';
const NEW_TOKEN = 'integration-admin-token-rotated-000';
const certs = makeCerts();
const renewed = makeCerts();
afterAll(() => {
  certs.remove();
  renewed.remove();
  rmSync(dir, { recursive: true, force: true });
});

function env(account: string, extra: Record<string, string> = {}): Record<string, string> {
  const tokens = join(dir, `${account}.tokens`);
  writeFileSync(tokens, `ops:${TOKEN}\n`);
  return {
    BRIDGE_ACCOUNT: account,
    UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
    UPSTREAM_CLIENT_ID: 'id',
    UPSTREAM_CLIENT_SECRET: 'secret',
    KAFKA_BROKERS: '127.0.0.1:9',
    REDIS_URL: redisUrl(),
    REDIS_KEY_PREFIX: 'rbadmin',
    HTTP_HOST: '127.0.0.1',
    ADMIN_PORT: '0',
    ADMIN_TOKEN_FILE: tokens,
    FINGERPRINT_KEY_GENERATE: 'true',
    ...extra,
  };
}

describe('admin server', () => {
  it('serves HTTPS with the configured certificate, and takes a renewed one without a restart', async () => {
    const account = uniqueName('adm');
    // Copies, so that the renewal below rewrites the files the server was started with.
    const cert = join(dir, `${account}.pem`);
    const key = join(dir, `${account}.key`);
    copyFileSync(certs.serverCert, cert);
    copyFileSync(certs.serverKey, key);
    const config = loadConfig(env(account, { ADMIN_TLS_CERT_FILE: cert, ADMIN_TLS_KEY_FILE: key }));
    const server = await startAdminServer({
      admin: config.admin!,
      accounts: [config],
      durability: () => null,
      logger: pino({ level: 'silent' }),
      tlsReloadMs: 100,
    });
    try {
      expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const get = (ca: string) =>
        fetch(`${server.url}/v1/accounts/${account}`, {
          headers: { authorization: `Bearer ${TOKEN}` },
          dispatcher: new Agent({ connect: { ca: readFileSync(ca) } }),
        });
      const res = await get(certs.ca);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ account, leader: null, initialLoadDone: false, snapshotReviews: 0 });
      // Plain HTTP on the TLS port is no way in.
      await expect(fetch(server.url.replace('https:', 'http:') + '/v1/accounts')).rejects.toThrow();

      copyFileSync(renewed.serverKey, key);
      copyFileSync(renewed.serverCert, cert);
      await waitFor(
        async () => ((await get(renewed.ca)).status === 200 ? true : undefined),
        10_000,
        'the renewed certificate to be taken',
      );
      await expect(get(certs.ca)).rejects.toThrow();
    } finally {
      await server.close();
    }
  });

  it('records each action under the account keys, where the leader takes it', async () => {
    const account = uniqueName('adm');
    const config = loadConfig(env(account));
    const server = await startAdminServer({
      admin: config.admin!,
      accounts: [config],
      durability: () => null,
      logger: pino({ level: 'silent' }),
    });
    const redis = connectRedis(redisUrl());
    const store = new SnapshotStore(redis, accountKeys('rbadmin', account));
    const post = async (action: string, body?: unknown) => {
      const res = await fetch(`${server.url}/v1/accounts/${account}/${action}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    try {
      expect(await post('pause')).toMatchObject({ status: 200, json: { account, paused: true } });
      expect(await store.pausedSince()).not.toBeNull();
      expect(await post('resume', {})).toMatchObject({ status: 200, json: { paused: false, wasPaused: true } });
      expect(await store.pausedSince()).toBeNull();
      expect(await post('sweep')).toMatchObject({ status: 202, json: { requested: true, leader: null } });
      expect(await store.sweepRequested()).toBe(true);
      expect(await post('restore')).toMatchObject({ status: 202, json: { requested: true } });
      expect(await store.restoreRequested()).toBe(true);
      const resync = await post('resync', { ids: [3, 1, 3] });
      expect(resync).toMatchObject({ status: 202, json: { scope: { kind: 'ids', ids: [1, 3] } } });
      expect(await store.pendingResync()).toMatchObject({ id: resync.json.id, scope: { kind: 'ids', ids: [1, 3] } });
      const since = await post('resync', { since: '2026-01-01' });
      expect(await store.pendingResync()).toMatchObject({
        id: since.json.id,
        scope: { kind: 'since', since: Date.parse('2026-01-01T00:00:00Z') },
      });
      const status = await fetch(`${server.url}/v1/accounts/${account}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(await status.json()).toMatchObject({
        sweepRequested: true,
        restoreRequested: true,
        resyncRequested: { id: since.json.id },
        paused: false,
      });
    } finally {
      await server.close();
      await redis.quit();
    }
  });
});

describe('TokenFile', () => {
  it('follows a Kubernetes Secret update (a symlink swapped to a new directory), a removal and a return', async () => {
    // The kubelet's layout: tokens -> ..data/tokens, ..data -> ..<timestamp>/; an update swaps ..data at once.
    const mount = mkdtempSync(join(dir, 'secret-'));
    const version = (name: string, text: string) => {
      mkdirSync(join(mount, name));
      writeFileSync(join(mount, name, 'tokens'), text);
      symlinkSync(name, join(mount, '..data_tmp'));
      renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
    };
    version('..v1', `ops:${TOKEN}\n`);
    symlinkSync('..data/tokens', join(mount, 'tokens'));
    const file = new TokenFile(join(mount, 'tokens'));
    expect(await file.match(TOKEN)).toBe('ops');
    expect(await file.match(NEW_TOKEN)).toBeNull();

    version('..v2', `ci:${NEW_TOKEN}\n`);
    expect(await file.match(NEW_TOKEN)).toBe('ci');
    expect(await file.match(TOKEN)).toBeNull();

    rmSync(join(mount, 'tokens'));
    expect(await file.match(NEW_TOKEN)).toBeNull();
    symlinkSync('..data/tokens', join(mount, 'tokens'));
    expect(await file.match(NEW_TOKEN)).toBe('ci');
  });
});
