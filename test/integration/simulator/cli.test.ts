import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SimulatorHttpControl } from '../../../src/simulator/index.js';
import { list, token, type Envelope } from './helpers.js';

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
});
