import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/config.js';
import { configErrorOf } from '../../helpers/config.js';
import { redisOptions } from '../../../src/redis/connection.js';

// How TLS to Redis is chosen on each topology (REDIS_TLS, or the rediss:// scheme of REDIS_URL), what a wrong
// combination says, and the ioredis options each topology gets: the same TLS files and ACL user for the Sentinels,
// the primary they announce and every Cluster node.

const dir = mkdtempSync(join(tmpdir(), 'redis-tls-'));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const files = {
  REDIS_TLS_CA_FILE: file('ca.pem', 'CA'),
  REDIS_TLS_CERT_FILE: file('client.pem', 'CERT'),
  REDIS_TLS_KEY_FILE: file('client.key', 'KEY'),
};
const base = {
  UPSTREAM_BASE_URL: 'http://127.0.0.1:8080',
  UPSTREAM_CLIENT_ID: 'id',
  UPSTREAM_CLIENT_SECRET: 's3cret-value',
  KAFKA_BROKERS: '127.0.0.1:9092',
  FINGERPRINT_KEY_GENERATE: 'true',
};
const sentinels = { REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'bridge' };
const cluster = { REDIS_CLUSTER_NODES: 'n1:6379,n2:6379' };

function errorOf(env: Record<string, string>): ConfigError {
  return configErrorOf(() => loadConfig({ ...base, ...env }));
}

describe('Redis TLS settings', () => {
  it.each([
    [{ ...sentinels, ...files }, 'REDIS_TLS', 'must be true when REDIS_TLS_* files are set'],
    [{ ...cluster, REDIS_TLS: 'false', ...files }, 'REDIS_TLS', 'must be true'],
    [{ REDIS_URL: 'redis://r:6379', REDIS_TLS: 'true' }, 'REDIS_TLS', 'rediss://'],
    [{ REDIS_URL: 'rediss://r:6379', REDIS_TLS: 'false' }, 'REDIS_TLS', 'contradicts'],
    [{ REDIS_URL: 'redis://r:6379', ...files }, 'REDIS_URL', 'rediss://'],
    [{ REDIS_TLS: 'maybe', ...cluster }, 'REDIS_TLS', ''],
    [{ REDIS_SENTINELS: 'rediss://s1:26379', REDIS_SENTINEL_NAME: 'b' }, 'REDIS_SENTINELS', 'REDIS_TLS=true'],
    [{ REDIS_CLUSTER_NODES: 'rediss://n1:6379' }, 'REDIS_CLUSTER_NODES', 'REDIS_TLS=true'],
    [{ ...cluster, REDIS_SENTINEL_PASSWORD: 'pw-1' }, 'REDIS_SENTINEL_PASSWORD', 'only used with REDIS_SENTINELS'],
    [{ REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_USERNAME: 'u' }, 'REDIS_SENTINEL_USERNAME', 'only used with'],
    [{ ...sentinels, REDIS_SENTINEL_USERNAME: 'u' }, 'REDIS_SENTINEL_PASSWORD', 'required'],
    [{ ...cluster, REDIS_TLS: 'true', REDIS_TLS_CERT_FILE: files.REDIS_TLS_CERT_FILE }, 'REDIS_TLS_KEY_FILE', ''],
  ])('refuses %o naming %s', (env, setting, fragment) => {
    const err = errorOf(env as Record<string, string>);
    expect(err.setting).toBe(setting);
    expect(err.message).toContain(setting);
    expect(err.message).toContain(fragment);
    expect(err.message).not.toContain('pw-1');
  });

  it('Sentinel: TLS to the Sentinels and to the primary they announce, with their own ACL user', () => {
    const config = loadConfig({
      ...base,
      ...sentinels,
      ...files,
      REDIS_TLS: 'true',
      REDIS_USERNAME: 'bridge',
      REDIS_PASSWORD: 'data-pw',
      REDIS_SENTINEL_USERNAME: 'sentinel-user',
      REDIS_SENTINEL_PASSWORD_FILE: file('sentinel.pw', 'sentinel-pw\n'),
    });
    expect(config.redis.tlsEnabled).toBe(true);
    const options = redisOptions(config.redis);
    const tls = { ca: Buffer.from('CA'), cert: Buffer.from('CERT'), key: Buffer.from('KEY') };
    expect(options).toEqual({
      username: 'bridge',
      password: 'data-pw',
      tls,
      enableTLSForSentinelMode: true,
      sentinelTLS: tls,
      sentinelUsername: 'sentinel-user',
      sentinelPassword: 'sentinel-pw',
    });
  });

  it('Sentinel without TLS or Sentinel credentials: the data nodes only get the ACL user, as before', () => {
    const config = loadConfig({ ...base, ...sentinels, REDIS_USERNAME: 'bridge', REDIS_PASSWORD: 'data-pw' });
    expect(redisOptions(config.redis)).toEqual({ username: 'bridge', password: 'data-pw' });
  });

  it('Cluster: the TLS files for every node (connectRedis hands them to each); a CA alone is enough', () => {
    const config = loadConfig({ ...base, ...cluster, REDIS_TLS: 'yes', REDIS_TLS_CA_FILE: files.REDIS_TLS_CA_FILE });
    expect(redisOptions(config.redis)).toEqual({ tls: { ca: Buffer.from('CA') } });
    // TLS with the system's CAs: no file at all.
    expect(redisOptions(loadConfig({ ...base, ...cluster, REDIS_TLS: 'true' }).redis)).toEqual({ tls: {} });
    expect(redisOptions(loadConfig({ ...base, ...cluster, REDIS_TLS: '' }).redis)).toEqual({});
  });

  it('single Redis: rediss:// alone turns TLS on, and REDIS_TLS=true may confirm it', () => {
    for (const extra of [{}, { REDIS_TLS: 'true' }]) {
      const config = loadConfig({ ...base, REDIS_URL: 'rediss://r:6380', ...files, ...extra });
      expect(config.redis.tlsEnabled).toBe(true);
      expect(redisOptions(config.redis).tls).toEqual({
        ca: Buffer.from('CA'),
        cert: Buffer.from('CERT'),
        key: Buffer.from('KEY'),
      });
    }
    expect(redisOptions(loadConfig({ ...base, REDIS_URL: 'redis://r:6379' }).redis)).toEqual({});
  });
});
