import { readFileSync, writeFileSync } from 'node:fs';
import { renderConfigReference } from '../src/config/reference.js';
import { renderMetricsReference } from '../src/ops/metrics-reference.js';

// `npm run docs`: writes the generated reference pages; `--check` only reports which are stale (exit 1).

/** The generated pages: path from the repository root, and how to render it. */
export const GENERATED_DOCS: ReadonlyArray<[path: string, render: () => string]> = [
  ['docs/reference/configuration.md', renderConfigReference],
  ['docs/reference/metrics.md', renderMetricsReference],
];

const root = new URL('../', import.meta.url);
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [path, render] of GENERATED_DOCS) {
    const file = new URL(path, root);
    const text = render();
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      /* missing: stale */
    }
    if (current === text) continue;
    stale += 1;
    if (check) console.error(`stale: ${path} (run npm run docs)`);
    else {
      writeFileSync(file, text);
      console.log(`wrote ${path}`);
    }
  }
  if (check && stale > 0) process.exit(1);
}
