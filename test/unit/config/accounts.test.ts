import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAccounts, PER_ACCOUNT_SETTINGS } from '../../../src/config/accounts.js';
import { ConfigError } from '../../../src/config/config.js';
import { configErrorOf } from '../../helpers/config.js';

const dir = mkdtempSync(join(tmpdir(), 'rb-accounts-unit-'));
const secret = join(dir, 'secret');
writeFileSync(secret, 'a-client-secret');

const env = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  KAFKA_BROKERS: '127.0.0.1:9092',
  REDIS_URL: 'redis://127.0.0.1:6379',
  FINGERPRINT_KEY_GENERATE: 'true',
};

function file(content: string, name = 'accounts.yaml'): string {
  const path = join(dir, `${Math.random().toString(36).slice(2)}-${name}`);
  writeFileSync(path, content);
  return path;
}

function errorOf(e: Record<string, string>): ConfigError {
  return configErrorOf(() => loadAccounts(e));
}

const two = `
accounts:
  - id: brand-a
    upstream: { clientId: a, clientSecretFile: ${secret} }
    settings: { UPSTREAM_RATE_LIMIT_RPS: 5, POLL_INTERVAL_MS: 10000 }
  - id: brand-b
    upstream: { baseUrl: "https://other.example.com", clientIdFile: ${secret}, clientSecretFile: ${secret} }
`;

describe('loadAccounts', () => {
  it('without BRIDGE_ACCOUNTS_FILE: the single account of the environment, keys unprefixed', () => {
    const { accounts, file: from } = loadAccounts({ ...env, UPSTREAM_CLIENT_ID: 'x', UPSTREAM_CLIENT_SECRET: 'y' });
    expect(from).toBeNull();
    expect(accounts.map((a) => a.account)).toEqual(['default']);
    expect(accounts[0]!.kafka.keyPrefix).toBeUndefined();
  });

  it('reads YAML: per-account upstream, credentials and overrides; the rest from the environment', () => {
    const { accounts } = loadAccounts({ ...env, POLL_INTERVAL_MS: '3000', BRIDGE_ACCOUNTS_FILE: file(two) });
    const [a, b] = accounts;
    expect(a!.account).toBe('brand-a');
    expect(a!.upstream.baseUrl).toBe('https://api.example.com');
    expect(a!.upstream.rateLimitRps).toBe(5);
    expect(a!.poll.intervalMs).toBe(10_000);
    expect(a!.upstream.clientId).toEqual({ value: 'a' });
    expect(a!.upstream.clientSecret).toEqual({ file: secret });
    expect(b!.upstream.baseUrl).toBe('https://other.example.com');
    expect(b!.poll.intervalMs).toBe(3_000);
    expect(b!.upstream.rateLimitRps).toBe(9.6);
    expect(a!.eventSource).toBe('urn:reviews-bridge:brand-a');
    // Shared topics (no {account}): every key carries its account.
    expect(a!.kafka.topics.created).toBe('review.created');
    expect([a!.kafka.keyPrefix, b!.kafka.keyPrefix]).toEqual(['brand-a:', 'brand-b:']);
  });

  it('reads JSON, and {account} in topic names gives a topic per account with plain review-id keys', () => {
    const json = JSON.stringify({
      accounts: [
        { id: 'x', upstream: { clientId: 'x', clientSecretFile: secret } },
        { id: 'y', upstream: { clientId: 'y', clientSecretFile: secret } },
      ],
    });
    const topics = Object.fromEntries(
      ['CREATED', 'STATUS_CHANGED', 'UPDATED', 'DEAD_LETTER', 'STATE', 'DELETED', 'HEARTBEAT'].map((t) => [
        `KAFKA_TOPIC_${t}`,
        `{account}.review.${t.toLowerCase()}`,
      ]),
    );
    const { accounts } = loadAccounts({ ...env, ...topics, BRIDGE_ACCOUNTS_FILE: file(json, 'a.json') });
    expect(accounts.map((a) => a.kafka.topics.created)).toEqual(['x.review.created', 'y.review.created']);
    expect(accounts.map((a) => a.kafka.keyPrefix)).toEqual([undefined, undefined]);
  });

  it('names the account and the setting on a bad override, and never echoes the value', () => {
    const bad = file(
      `accounts:\n  - id: a\n    upstream: { clientId: a, clientSecretFile: ${secret} }\n    settings: { POLL_INTERVAL_MS: "sekrit-ish" }\n`,
    );
    const err = errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: bad });
    expect(err.setting).toBe('BRIDGE_ACCOUNTS_FILE');
    expect(err.message).toContain('accounts[0] (a).settings.POLL_INTERVAL_MS');
    expect(err.message).not.toContain('sekrit');
  });

  it("reports every account's problems and the environment's at once, the environment's once", () => {
    const bad = file(
      `accounts:
  - id: a
    upstream: { clientId: a, clientSecretFile: ${secret} }
    settings: { POLL_INTERVAL_MS: "soon", NO_SUCH: 1 }
  - id: b
    upstream: { baseUrl: "ftp://b.example.com", clientId: b, clientSecretFile: ${secret} }
`,
    );
    const err = errorOf({ ...env, KAFKA_BROKERS: 'nohostport', BRIDGE_ACCOUNTS_FILE: bad });
    expect(err.message.split('\n')).toEqual([
      'invalid configuration: BRIDGE_ACCOUNTS_FILE: accounts[0] (a).settings.NO_SUCH: unknown setting',
      'invalid configuration: KAFKA_BROKERS: a comma-separated list of host:port',
      expect.stringMatching(
        /^invalid configuration: BRIDGE_ACCOUNTS_FILE: accounts\[0\] \(a\)\.settings\.POLL_INTERVAL_MS: /,
      ),
      'invalid configuration: BRIDGE_ACCOUNTS_FILE: accounts[1] (b).upstream.baseUrl: wrong URL scheme ftp://: use http:// or https://',
    ]);
  });

  it('refuses process-wide settings, unknown settings, inline secrets, duplicates and a missing secret file', () => {
    const entry = (extra: string) =>
      `accounts:\n  - id: a\n    upstream: { clientId: a, clientSecretFile: ${secret} }\n${extra}`;
    expect(
      errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: file(entry('    settings: { KAFKA_BROKERS: "h:1" }\n')) }).message,
    ).toMatch(/settings\.KAFKA_BROKERS: not a per-account setting/);
    expect(errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: file(entry('    settings: { NO_SUCH: 1 }\n')) }).message).toMatch(
      /settings\.NO_SUCH: unknown setting/,
    );
    const inline = file(
      `accounts:\n  - id: a\n    upstream: { clientId: a, clientSecret: hunter2, clientSecretFile: ${secret} }\n`,
    );
    const inlineErr = errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: inline });
    expect(inlineErr.message).toContain('accounts.0.upstream');
    expect(inlineErr.message).not.toContain('hunter2');
    const dup = file(`${entry('')}  - id: a\n    upstream: { clientId: a, clientSecretFile: ${secret} }\n`);
    expect(errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: dup }).message).toMatch(/accounts\[1\] \(a\): the id appears twice/);
    const missing = file(
      `accounts:\n  - id: a\n    upstream: { clientId: a, clientSecretFile: ${join(dir, 'nope')} }\n`,
    );
    expect(errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: missing }).message).toMatch(
      /accounts\[0\] \(a\)\.upstream\.clientSecretFile: .*cannot be read/,
    );
    expect(errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: join(dir, 'absent.yaml') }).message).toMatch(/file cannot be read/);
    expect(errorOf({ ...env, BRIDGE_ACCOUNTS_FILE: file('accounts: [') }).message).toMatch(/not valid YAML or JSON/);
    expect(errorOf({ ...env, BRIDGE_ACCOUNT: 'x', BRIDGE_ACCOUNTS_FILE: file(two) }).setting).toBe('BRIDGE_ACCOUNT');
    // A problem of the environment itself is named as such.
    expect(errorOf({ ...env, KAFKA_BROKERS: '', BRIDGE_ACCOUNTS_FILE: file(two) }).setting).toBe('KAFKA_BROKERS');
  });

  it('per-account settings are the upstream, polling, sweep, deletion, event, lease and heartbeat ones', () => {
    expect(PER_ACCOUNT_SETTINGS).toContain('UPSTREAM_RATE_LIMIT_RPS');
    expect(PER_ACCOUNT_SETTINGS).toContain('POLL_MIN_INTERVAL_MS');
    expect(PER_ACCOUNT_SETTINGS).toContain('EVENT_FIELDS_EXCLUDE');
    for (const processWide of [
      'KAFKA_BROKERS',
      'REDIS_URL',
      'HTTP_PORT',
      'LOG_LEVEL',
      'UPSTREAM_BASE_URL',
      'UPSTREAM_CLIENT_SECRET_FILE',
    ])
      expect(PER_ACCOUNT_SETTINGS).not.toContain(processWide);
  });
});
