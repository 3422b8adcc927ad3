import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED_DOCS } from '../../../scripts/gen-docs.js';
import { EnvSchema } from '../../../src/config/config.js';
import { undescribedSettings } from '../../../src/config/reference.js';

// The docs a newcomer reads: a README of at most 200 lines, reference pages generated from the code and current,
// every setting described, and no link that leads out of the repository or to a file that is not there.

const ROOT = normalize(join(dirname(new URL(import.meta.url).pathname), '../../..'));

// Folders that are not the project's own text: dependencies, caches, build output, run state.
const NOT_OURS = new Set(['node_modules', '.cache', '.git', 'dist', '.run', 'coverage']);

function markdownFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    if (NOT_OURS.has(name)) return [];
    const path = dir === '.' ? name : join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

/** Link targets of a Markdown text: inline links and images, and reference definitions. */
function linkTargets(text: string): string[] {
  const inline = [...text.matchAll(/\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
  const defined = [...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1]!);
  return [...inline, ...defined];
}

/** Problems with a link target of `file` (a path from the repository root): outside the repository, or missing. */
function brokenLink(file: string, target: string): string | null {
  if (/^(https?:|mailto:|#)/.test(target)) return null;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('/'))
    return `${file}: ${target} is not a repository path`;
  const path = normalize(join(dirname(join(ROOT, file)), decodeURI(target.split('#')[0]!)));
  if (relative(ROOT, path).startsWith('..')) return `${file}: ${target} leaves the repository`;
  if (!existsSync(path)) return `${file}: ${target} does not exist`;
  return null;
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
    const files = markdownFiles('.');
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/guarantees.md', 'bench/README.md']));
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      if (/\.\.\/shared\b|shared\/DESIGN|\bDESIGN\.md\b|\breviews-api\.md\b/.test(text))
        broken.push(`${file}: names a file outside the repository`);
      for (const target of linkTargets(text)) {
        const problem = brokenLink(file, target);
        if (problem) broken.push(problem);
      }
    }
    expect(broken).toEqual([]);
  });

  it('the link check catches links out of the repository and to missing files', () => {
    expect(linkTargets('[a](../shared/DESIGN.md) ![b](docs/x.png "t")\n[c]: ./missing.md\n')).toEqual([
      '../shared/DESIGN.md',
      'docs/x.png',
      './missing.md',
    ]);
    expect(brokenLink('docs/guarantees.md', '../../shared/DESIGN.md')).toMatch(/leaves the repository/);
    expect(brokenLink('README.md', 'docs/nope.md')).toMatch(/does not exist/);
    expect(brokenLink('README.md', '/etc/passwd')).toMatch(/not a repository path/);
    expect(brokenLink('README.md', 'file:///tmp/x')).toMatch(/not a repository path/);
    expect(brokenLink('docs/guarantees.md', 'consumers.md#events')).toBeNull();
    expect(brokenLink('README.md', 'https://kafka.apache.org/')).toBeNull();
  });

  it('names only source, script and test paths that exist', () => {
    const missing: string[] = [];
    let named = 0;
    for (const file of markdownFiles('.')) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const [, path] of text.matchAll(/`((?:src|scripts|test|bench|deploy|schemas|patches)\/[\w./-]+)`/g)) {
        named += 1;
        if (!existsSync(join(ROOT, path!))) missing.push(`${file}: ${path}`);
      }
    }
    expect(named).toBeGreaterThan(20);
    expect(missing).toEqual([]);
  });

  it('names only settings that exist (or variables the scripts and tests read)', () => {
    const settings = new Set(Object.keys(EnvSchema.shape));
    // Variables of the scripts, tests and benchmarks (KAFKA_VERSION, TEST_KAFKA_COMPAT, ...) are not settings.
    const tooling = ['scripts', 'test/helpers', 'bench']
      .flatMap((dir) => readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }).map((f) => join(dir, f)))
      .filter((f) => /\.(sh|ts)$/.test(f))
      .map((f) => readFileSync(join(ROOT, f), 'utf8'))
      .join('\n');
    const prefix =
      /^(BRIDGE|UPSTREAM|KAFKA|REDIS|POLL|SWEEP|INITIAL|DELETE|HEARTBEAT|LEASE|EVENT|DEAD_LETTER|FINGERPRINT|HTTP|LOG|SHUTDOWN)_/;
    const unknown: string[] = [];
    for (const file of markdownFiles('.')) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const [, name] of text.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g)) {
        if (prefix.test(name!) && !settings.has(name!) && !tooling.includes(name!)) unknown.push(`${file}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});
