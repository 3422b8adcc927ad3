import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// The layer rule of src/ (docs/architecture.md, .dependency-cruiser.cjs): core imports nothing outside core,
// adapters never import the orchestration, the orchestration takes no runtime value from an adapter (only types;
// errors are told apart by kind), nothing imports in a circle. A wrong-way import fails here.

const ROOT = join(dirname(new URL(import.meta.url).pathname), '../..');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');

/** Runs dependency-cruiser with the project's rules over `src` of `cwd`; returns its report. */
function cruise(cwd: string): string {
  try {
    return execFileSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs'),
        'src',
        '--config',
        CONFIG,
        '--output-type',
        'err',
      ],
      { cwd, encoding: 'utf8', stdio: 'pipe' },
    );
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err);
  }
}

const scratch: string[] = [];
afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A throwaway project with the given files (path → source) and the repository's tsconfig settings. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'rb-arch-'));
  scratch.push(dir);
  const tsconfig = { compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), source);
  }
  return dir;
}

describe('architecture', () => {
  it('src/ imports go one way, without circles (dependency-cruiser)', () => {
    expect(cruise(ROOT)).toContain('no dependency violations found');
  }, 60_000);

  it('catches the orchestration taking an error class from an adapter, and allows adapter types', () => {
    const dir = project({
      'src/redis/connection.ts': [
        'export class ReplicationError extends Error {}',
        'export interface Durability { replicas: number }',
        '',
      ].join('\n'),
      'src/bridge/typed.ts': [
        "import type { Durability } from '../redis/connection.js';",
        'export const replicas = (d: Durability): number => d.replicas;',
        '',
      ].join('\n'),
      'src/bridge/loop.ts': [
        "import { ReplicationError } from '../redis/connection.js';",
        'export const isReplication = (err: unknown): boolean => err instanceof ReplicationError;',
        '',
      ].join('\n'),
    });
    const report = cruise(dir);
    expect(report).toContain('orchestration-uses-adapters-through-ports');
    expect(report).toMatch(/src\/bridge\/loop\.ts → src\/redis\/connection\.ts/);
    // The type-only import of the same module is fine: types vanish at run time.
    expect(report).not.toMatch(/src\/bridge\/typed\.ts/);
  }, 60_000);

  it('catches a core module importing an adapter and an import circle', () => {
    const dir = project({
      'src/kafka/publisher.ts': "export const topic = 'x';\n",
      'src/core/diff.ts': "import { topic } from '../kafka/publisher.js';\nexport const t = topic;\n",
      'src/ops/a.ts': "import { b } from './b.js';\nexport const a = (): number => b() + 1;\n",
      'src/ops/b.ts': "import { a } from './a.js';\nexport const b = (): number => (a ? 0 : 1);\n",
    });
    const report = cruise(dir);
    expect(report).toContain('core-is-pure');
    expect(report).toContain('no-circular');
  }, 60_000);
});
