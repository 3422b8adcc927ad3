import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, ENV_VARS, loadConfig, readSecret } from '../../src/config.js';

const minimal = {
  UPSTREAM_BASE_URL: 'http://127.0.0.1:8080',
  UPSTREAM_CLIENT_ID: 'id',
  UPSTREAM_CLIENT_SECRET: 's3cret-value',
  KAFKA_BROKERS: '127.0.0.1:9092',
  REDIS_URL: 'redis://127.0.0.1:6379',
};

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies defaults', () => {
    const c = loadConfig(minimal);
    expect(c.account).toBe('default');
    expect(c.upstream.rateLimitRps).toBe(9.6);
    expect(c.upstream.rateLimitBurst).toBe(1.3);
    expect(c.upstream.pageSize).toBe(100);
    expect(c.kafka.topics).toEqual({
      created: 'review.created',
      statusChanged: 'review.status_changed',
      updated: 'review.updated',
      deadLetter: 'review.dead_letter',
    });
    expect(c.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(c.eventSource).toBe('urn:reviews-bridge:default');
    expect(c.initialLoadMode).toBe('mark');
  });

  it.each([
    [{ UPSTREAM_BASE_URL: undefined }, 'UPSTREAM_BASE_URL', 'required'],
    [{ UPSTREAM_BASE_URL: 'ftp://x' }, 'UPSTREAM_BASE_URL', ''],
    [{ KAFKA_BROKERS: 'nohostport' }, 'KAFKA_BROKERS', 'host:port'],
    [{ UPSTREAM_PAGE_SIZE: '101' }, 'UPSTREAM_PAGE_SIZE', ''],
    [{ UPSTREAM_RATE_LIMIT_RPS: '-1' }, 'UPSTREAM_RATE_LIMIT_RPS', ''],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL', 'redis://'],
    [{ INITIAL_LOAD_MODE: 'skip' }, 'INITIAL_LOAD_MODE', ''],
    [{ UPSTREAM_CLIENT_SECRET: undefined }, 'UPSTREAM_CLIENT_SECRET', 'required'],
    [
      { UPSTREAM_CLIENT_SECRET_FILE: '/nonexistent/secret', UPSTREAM_CLIENT_SECRET: undefined },
      'UPSTREAM_CLIENT_SECRET_FILE',
      'cannot be read',
    ],
    [{ POLL_INTERVAL_MS: '10000', POLL_OVERLAP_MS: '5000' }, 'POLL_OVERLAP_MS', 'POLL_INTERVAL_MS'],
    [{ KAFKA_TOPIC_UPDATED: 'review.created' }, 'KAFKA_TOPIC_DEAD_LETTER', 'distinct'],
    [{ BRIDGE_ACCOUNT: 'a b' }, 'BRIDGE_ACCOUNT', ''],
  ])('rejects %o naming %s', (override, setting, fragment) => {
    const env = { ...minimal, ...override } as Record<string, string>;
    for (const [k, v] of Object.entries(override)) if (v === undefined) delete env[k];
    const err = errorOf(env);
    expect(err.setting).toBe(setting);
    expect(err.message).toContain(setting);
    expect(err.message).toContain(fragment);
  });

  it('never echoes a secret in its error', () => {
    const err = errorOf({ ...minimal, UPSTREAM_CLIENT_SECRET_FILE: '/x' });
    expect(err.message).not.toContain('s3cret-value');
  });

  it('re-reads a file secret on every use, so rotation needs no restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'secret');
    writeFileSync(file, 'first\n');
    const c = loadConfig({ ...minimal, UPSTREAM_CLIENT_SECRET: undefined, UPSTREAM_CLIENT_SECRET_FILE: file });
    expect(readSecret(c.upstream.clientSecret)).toBe('first');
    writeFileSync(file, 'second\n');
    expect(readSecret(c.upstream.clientSecret)).toBe('second');
  });

  it('lists every variable it reads', () => {
    expect(ENV_VARS).toContain('UPSTREAM_CLIENT_SECRET_FILE');
    expect(ENV_VARS).toContain('KAFKA_BROKERS');
  });
});
