import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SimulatorHttpControl } from '../../../src/simulator/index.js';
import { list, requestToken, token, type Envelope } from './helpers.js';

// The standalone simulator (`tsx src/simulator/main.ts`, later `reviews-bridge simulate`): logs its URL and demo
// credentials, serves, and exits 0 on SIGTERM.

const main = fileURLToPath(new URL('../../../src/simulator/main.ts', import.meta.url));

describe('simulator CLI', () => {
  it('serves the configured simulator until SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        main,
        '--port',
        '0',
        '--reviews',
        '120',
        '--seed',
        '3',
        '--rps',
        'off',
        '--cursor-path',
        'paging.next',
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      const lines = createInterface({ input: child.stdout });
      let started: Record<string, unknown> | undefined;
      for await (const line of lines) {
        started = JSON.parse(line) as Record<string, unknown>;
        if (started.msg === 'simulator listening') break;
      }
      expect(started).toMatchObject({
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        reviews: 120,
        clientId: 'demo-client',
        clientSecret: 'demo-secret',
      });
      const url = started?.url as string;

      const page = (await list(url, await token(url), { limit: 100 })).json() as Envelope;
      expect(page.paging).toEqual({ next: '101' });
      expect(await new SimulatorHttpControl(url).reviewCount()).toBe(120);

      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('exits 1 with a message naming a bad flag', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', main, '--reviews', 'many'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(1);
    expect(stderr).toContain('--reviews');
  });

  it('serves numbered accounts and writes their credential files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sim-creds-'));
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', main, '--accounts', '2', '--reviews', '30', '--rps', 'off', '--credentials-dir', dir],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const logged = await linesUntilListening(child);
      const started = logged.at(-1);
      expect(started).toMatchObject({ url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), accounts: 2 });
      const url = started?.url as string;
      const accounts = logged.filter((line) => line.msg === 'simulator account');
      expect(accounts.map((line) => [line.account, line.url])).toEqual([
        ['acct-01', `${url}/accounts/acct-01`],
        ['acct-02', `${url}/accounts/acct-02`],
      ]);
      // With a credentials directory the secret stays out of the log.
      expect(accounts[0]).not.toHaveProperty('clientSecret');

      const manifest = JSON.parse(await readFile(join(dir, 'accounts.json'), 'utf8')) as {
        id: string;
        baseUrl: string;
        clientIdFile: string;
        clientSecretFile: string;
      }[];
      expect(manifest.map((entry) => entry.id)).toEqual(['acct-01', 'acct-02']);
      const credentialOf = async (entry: (typeof manifest)[number]): Promise<{ id: string; secret: string }> => ({
        id: await readFile(entry.clientIdFile, 'utf8'),
        secret: await readFile(entry.clientSecretFile, 'utf8'),
      });
      const [first, second] = manifest as [(typeof manifest)[number], (typeof manifest)[number]];
      expect((await stat(first.clientSecretFile)).mode & 0o777).toBe(0o600);
      const one = await credentialOf(first);
      expect(one.id).toBe('client-acct-01');

      const page = (await list(first.baseUrl, await token(first.baseUrl, one), { limit: 100 })).json() as Envelope;
      expect(page.count).toBe(30);
      expect((await requestToken(second.baseUrl, one)).status).toBe(401);
      expect((await requestToken(second.baseUrl, await credentialOf(second))).status).toBe(200);

      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('serves the accounts of an accounts file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sim-accounts-'));
    const file = join(dir, 'accounts.json');
    await writeFile(
      file,
      JSON.stringify([
        { id: 'shop-a', options: { reviewCount: 12 } },
        { id: 'shop-b', options: { clientId: 'b-id' } },
      ]),
    );
    const child = spawn(process.execPath, ['--import', 'tsx', main, '--accounts-file', file, '--reviews', '7'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const accounts = (await linesUntilListening(child)).filter((line) => line.msg === 'simulator account');
      expect(accounts).toMatchObject([
        { account: 'shop-a', reviews: 12, clientId: 'client-shop-a', clientSecret: 'secret-shop-a' },
        { account: 'shop-b', reviews: 7, clientId: 'b-id', clientSecret: 'secret-shop-b' },
      ]);
      const b = accounts[1] as { url: string };
      const answer = await requestToken(b.url, { id: 'b-id', secret: 'secret-shop-b' });
      expect(answer.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** The JSON log lines of a simulator child up to and including 'simulator listening'. */
async function linesUntilListening(child: { stdout: Readable }): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  for await (const line of createInterface({ input: child.stdout })) {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    lines.push(parsed);
    if (parsed.msg === 'simulator listening') break;
  }
  return lines;
}
