import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import { MINIMAL_ENV, errorOf } from '../../helpers/config.js';

// SCHEMA_REGISTRY_*: opt-in, credentials from files and never in the URL, a TLS CA like the other connections,
// the rule and the wire format.

const dir = mkdtempSync(join(tmpdir(), 'rb-registry-config-'));
const passwordFile = join(dir, 'password');
writeFileSync(passwordFile, 'registry-s3cret\n');
const caFile = join(dir, 'ca.pem');
writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');

const env = (extra: Record<string, string>) => ({ ...MINIMAL_ENV, ...extra });

describe('schema registry settings', () => {
  it('are off by default', () => {
    expect(loadConfig(MINIMAL_ENV).schemaRegistry).toBeNull();
  });

  it('take the URL, the rule (default BACKWARD) and the wire format (default structured)', () => {
    const config = loadConfig(env({ SCHEMA_REGISTRY_URL: 'http://127.0.0.1:8080/apis/ccompat/v7/' }));
    expect(config.schemaRegistry).toEqual({
      url: 'http://127.0.0.1:8080/apis/ccompat/v7',
      username: null,
      password: null,
      caFile: null,
      compatibility: 'BACKWARD',
      wireFormat: 'structured',
    });
    const other = loadConfig(
      env({
        SCHEMA_REGISTRY_URL: 'https://registry.example.com/apis/ccompat/v7',
        SCHEMA_REGISTRY_USERNAME: 'bridge',
        SCHEMA_REGISTRY_PASSWORD_FILE: passwordFile,
        SCHEMA_REGISTRY_CA_FILE: caFile,
        SCHEMA_REGISTRY_COMPATIBILITY: 'FULL_TRANSITIVE',
        SCHEMA_REGISTRY_WIRE_FORMAT: 'confluent',
      }),
    );
    expect(other.schemaRegistry).toMatchObject({
      username: 'bridge',
      password: { file: passwordFile },
      caFile,
      compatibility: 'FULL_TRANSITIVE',
      wireFormat: 'confluent',
    });
  });

  it('refuse credentials in the URL, a password over plain http to another host, and half of a login', () => {
    expect(errorOf(env({ SCHEMA_REGISTRY_URL: 'https://u:p@registry.example.com' })).setting).toBe(
      'SCHEMA_REGISTRY_URL',
    );
    const clear = errorOf(
      env({
        SCHEMA_REGISTRY_URL: 'http://registry.example.com',
        SCHEMA_REGISTRY_USERNAME: 'bridge',
        SCHEMA_REGISTRY_PASSWORD_FILE: passwordFile,
      }),
    );
    expect(clear.setting).toBe('SCHEMA_REGISTRY_URL');
    expect(clear.message).toContain('https://');
    expect(
      errorOf(env({ SCHEMA_REGISTRY_URL: 'https://registry.example.com', SCHEMA_REGISTRY_USERNAME: 'bridge' })).setting,
    ).toBe('SCHEMA_REGISTRY_PASSWORD');
    expect(errorOf(env({ SCHEMA_REGISTRY_URL: 'ftp://registry.example.com' })).setting).toBe('SCHEMA_REGISTRY_URL');
  });

  it('refuse registry settings without SCHEMA_REGISTRY_URL, by name', () => {
    expect(errorOf(env({ SCHEMA_REGISTRY_WIRE_FORMAT: 'confluent' })).setting).toBe('SCHEMA_REGISTRY_WIRE_FORMAT');
    expect(errorOf(env({ SCHEMA_REGISTRY_USERNAME: 'bridge' })).setting).toBe('SCHEMA_REGISTRY_USERNAME');
    expect(errorOf(env({ SCHEMA_REGISTRY_PASSWORD_FILE: passwordFile })).setting).toBe('SCHEMA_REGISTRY_PASSWORD');
    expect(errorOf(env({ SCHEMA_REGISTRY_COMPATIBILITY: 'SOMETIMES' })).setting).toBe('SCHEMA_REGISTRY_COMPATIBILITY');
  });

  it('name an unreadable CA or password file', () => {
    const base = { SCHEMA_REGISTRY_URL: 'https://registry.example.com' };
    expect(errorOf(env({ ...base, SCHEMA_REGISTRY_CA_FILE: join(dir, 'missing.pem') })).setting).toBe(
      'SCHEMA_REGISTRY_CA_FILE',
    );
    const missing = errorOf(
      env({ ...base, SCHEMA_REGISTRY_USERNAME: 'b', SCHEMA_REGISTRY_PASSWORD_FILE: join(dir, 'missing') }),
    );
    expect(missing.setting).toBe('SCHEMA_REGISTRY_PASSWORD_FILE');
    expect(missing.message).not.toContain('registry-s3cret');
  });
});
