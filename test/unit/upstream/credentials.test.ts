import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialsError, envCredentials, fileOrEnvCredentials } from '../../../src/upstream/credentials.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'creds-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('fileOrEnvCredentials', () => {
  it('re-reads secret files on every call, so a rotated secret is picked up', async () => {
    const secretFile = join(dir, 'secret');
    await writeFile(secretFile, 'first-secret\n');
    const provider = fileOrEnvCredentials({ clientId: { value: 'client' }, clientSecret: { file: secretFile } });
    expect(await provider()).toEqual({ clientId: 'client', clientSecret: 'first-secret' });
    await writeFile(secretFile, 'rotated-secret');
    expect(await provider()).toEqual({ clientId: 'client', clientSecret: 'rotated-secret' });
  });

  it('prefers X_FILE over X for env sources and re-reads both each call', async () => {
    const env: NodeJS.ProcessEnv = { UPSTREAM_CLIENT_ID: 'id-from-env', UPSTREAM_CLIENT_SECRET: 'plain-secret' };
    const provider = envCredentials('UPSTREAM_', env);
    expect(await provider()).toEqual({ clientId: 'id-from-env', clientSecret: 'plain-secret' });
    const secretFile = join(dir, 'secret');
    await writeFile(secretFile, 'file-secret');
    env.UPSTREAM_CLIENT_SECRET_FILE = secretFile;
    expect((await provider()).clientSecret).toBe('file-secret');
    await writeFile(secretFile, 'file-secret-2');
    expect((await provider()).clientSecret).toBe('file-secret-2');
  });

  it('names the missing source without echoing any value', async () => {
    const provider = envCredentials('UPSTREAM_', { UPSTREAM_CLIENT_ID: 'id' });
    await expect(provider()).rejects.toThrow(/UPSTREAM_CLIENT_SECRET/);
    const missing = join(dir, 'nope');
    const fromFile = fileOrEnvCredentials({ clientId: { value: 'id' }, clientSecret: { file: missing } });
    await expect(fromFile()).rejects.toBeInstanceOf(CredentialsError);
    await expect(fromFile()).rejects.toThrow(/ENOENT/);
  });

  it('refuses empty secrets', async () => {
    const empty = join(dir, 'empty');
    await writeFile(empty, '\n');
    const provider = fileOrEnvCredentials({ clientId: { value: 'id' }, clientSecret: { file: empty } });
    await expect(provider()).rejects.toThrow(/empty/);
  });
});
