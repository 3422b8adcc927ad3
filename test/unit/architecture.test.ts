import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

// The layer rule of src/ (docs/architecture.md, .dependency-cruiser.cjs): core imports nothing outside core,
// adapters never import the orchestration, nothing imports in a circle. A wrong-way import fails here.

const ROOT = join(dirname(new URL(import.meta.url).pathname), '../..');

describe('architecture', () => {
  it('src/ imports go one way, without circles (dependency-cruiser)', () => {
    let output: string;
    try {
      output = execFileSync(
        process.execPath,
        [
          join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs'),
          'src',
          '--config',
          '.dependency-cruiser.cjs',
          '--output-type',
          'err',
        ],
        { cwd: ROOT, encoding: 'utf8', stdio: 'pipe' },
      );
    } catch (err) {
      output = String((err as { stdout?: string }).stdout ?? err);
    }
    expect(output).toContain('no dependency violations found');
  }, 60_000);
});
