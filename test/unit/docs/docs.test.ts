import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED_DOCS } from '../../../scripts/gen-docs.js';
import { undescribedSettings } from '../../../src/config/reference.js';

// The docs a newcomer reads: a README of at most 200 lines, reference pages generated from the code and current,
// every setting described, and no link that leads out of the repository or to a file that is not there.

const ROOT = normalize(join(dirname(new URL(import.meta.url).pathname), '../../..'));

function markdownFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

describe('docs', () => {
  it('generated reference pages are current (npm run docs)', () => {
    for (const [path, render] of GENERATED_DOCS) {
      expect(readFileSync(join(ROOT, path), 'utf8'), `${path} is stale: run npm run docs`).toBe(render());
    }
  });

  it('describes every setting', () => {
    expect(undescribedSettings()).toEqual([]);
  });

  it('keeps the README to a five-minute read', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(200);
  });

  it('links only to files inside the repository that exist', () => {
    const files = ['README.md', ...markdownFiles('docs'), 'bench/README.md'];
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      if (/\.\.\/shared\b|shared\/DESIGN/.test(text)) broken.push(`${file}: names a file outside the repository`);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:|#)/.test(target!)) continue;
        const path = normalize(join(dirname(join(ROOT, file)), target!.split('#')[0]!));
        if (relative(ROOT, path).startsWith('..')) broken.push(`${file}: ${target} leaves the repository`);
        else if (!existsSync(path)) broken.push(`${file}: ${target} does not exist`);
      }
    }
    expect(broken).toEqual([]);
  });
});
