import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import { errorOf, MINIMAL_ENV } from '../../helpers/config.js';

// The admin API's settings: off unless ADMIN_PORT is set; then a valid token file is required, and TLS needs both
// files. Errors name the setting and never a token.

const dir = mkdtempSync(join(tmpdir(), 'rb-admin-config-'));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const TOKEN = 'a-long-enough-admin-token-0123456789';
const tokens = file('tokens', `alice:${TOKEN}\n`);
const pem = file('cert.pem', '-----BEGIN CERTIFICATE-----\n');

const minimal = MINIMAL_ENV;

describe('admin API settings', () => {
  it('are off by default', () => {
    expect(loadConfig(minimal).admin).toBeNull();
    expect(loadConfig({ ...minimal, ADMIN_PORT: '' }).admin).toBeNull();
  });

  it('with ADMIN_PORT and a token file: on, on HTTP_HOST unless ADMIN_HOST is set', () => {
    const c = loadConfig({ ...minimal, HTTP_HOST: '127.0.0.1', ADMIN_PORT: '9465', ADMIN_TOKEN_FILE: tokens });
    expect(c.admin).toEqual({ host: '127.0.0.1', port: 9465, tokenFile: tokens, tls: null });
    const other = loadConfig({ ...minimal, ADMIN_PORT: '0', ADMIN_HOST: '::1', ADMIN_TOKEN_FILE: tokens });
    expect(other.admin).toMatchObject({ host: '::1', port: 0 });
    const tls = loadConfig({
      ...minimal,
      ADMIN_PORT: '9465',
      ADMIN_TOKEN_FILE: tokens,
      ADMIN_TLS_CERT_FILE: pem,
      ADMIN_TLS_KEY_FILE: pem,
    });
    expect(tls.admin?.tls).toEqual({ certFile: pem, keyFile: pem });
  });

  it('refuses a missing, unreadable or invalid token file by name, never echoing a token', () => {
    expect(errorOf({ ...minimal, ADMIN_PORT: '9465' }).message).toBe(
      'invalid configuration: ADMIN_TOKEN_FILE: required when ADMIN_PORT is set',
    );
    expect(errorOf({ ...minimal, ADMIN_PORT: '9465', ADMIN_TOKEN_FILE: join(dir, 'nope') }).setting).toBe(
      'ADMIN_TOKEN_FILE',
    );
    const dup = file('dup', `alice:${TOKEN}\nbob:${TOKEN}\n`);
    const err = errorOf({ ...minimal, ADMIN_PORT: '9465', ADMIN_TOKEN_FILE: dup });
    expect(err.message).toBe('invalid configuration: ADMIN_TOKEN_FILE: line 2: the same token as an earlier line');
    expect(err.message).not.toContain(TOKEN);
    const short = file('short', 'alice:short\n');
    expect(errorOf({ ...minimal, ADMIN_PORT: '9465', ADMIN_TOKEN_FILE: short }).message).toMatch(/line 1: .*shorter/);
  });

  it('refuses half a TLS pair, the ops port, and admin settings without ADMIN_PORT', () => {
    const base = { ...minimal, ADMIN_PORT: '9465', ADMIN_TOKEN_FILE: tokens };
    expect(errorOf({ ...base, ADMIN_TLS_CERT_FILE: pem }).setting).toBe('ADMIN_TLS_KEY_FILE');
    expect(errorOf({ ...base, ADMIN_TLS_KEY_FILE: pem }).setting).toBe('ADMIN_TLS_CERT_FILE');
    expect(errorOf({ ...base, ADMIN_TLS_CERT_FILE: join(dir, 'nope'), ADMIN_TLS_KEY_FILE: pem }).setting).toBe(
      'ADMIN_TLS_CERT_FILE',
    );
    expect(errorOf({ ...base, HTTP_PORT: '9465' }).message).toMatch(/ADMIN_PORT: must differ from HTTP_PORT/);
    expect(errorOf({ ...base, ADMIN_PORT: '70000' }).setting).toBe('ADMIN_PORT');
    expect(errorOf({ ...minimal, ADMIN_TOKEN_FILE: tokens }).message).toBe(
      'invalid configuration: ADMIN_PORT: required when ADMIN_TOKEN_FILE is set (the admin API is off without it)',
    );
  });
});
