#!/usr/bin/env node
// The installed command (`npx reviews-bridge`, `npm run bridge`). It first refuses a Node older than package.json's
// `engines` in one line (this file and ./launch.js are plain JavaScript an old Node parses), then runs the compiled
// CLI from dist/ when it is built and current, or else the sources through tsx in this same process (a clone after
// `npm ci` needs no build, and there is no child process to outlive a signal). bin/launch.js says how it chooses.
// `run` caps Node's heap itself unless the command line or NODE_OPTIONS does (src/app/node-flags.ts), so no flags
// here. The container image runs dist/src/cli.js directly.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chooseEntry, nodeRefusal } from './launch.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const refusal = nodeRefusal(
  process.versions.node,
  JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines?.node,
);
if (refusal !== null) {
  process.stderr.write(`${refusal}\n`);
  process.exit(1);
}

/** @param {string} path */
function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return null;
  }
}

// The newest modification time of the files under dir (null: no such folder).
/** @param {string} dir @returns {number | null} */
function newestUnder(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return null;
  }
  let newest = 0;
  for (const entry of entries) {
    const at = entry.isDirectory() ? newestUnder(join(dir, entry.name)) : mtime(join(dir, entry.name));
    if (at !== null && at > newest) newest = at;
  }
  return newest;
}

async function loadTsx() {
  try {
    return await import('tsx/esm/api');
  } catch {
    return null;
  }
}

const distEntry = join(root, 'dist', 'src', 'cli.js');
const distBuiltAt = mtime(distEntry);
const newestSourceAt = newestUnder(join(root, 'src'));
// tsx is loaded only when the sources could be run from (a built, current dist/ is used without it).
const tsx = newestSourceAt !== null && (distBuiltAt === null || newestSourceAt > distBuiltAt) ? await loadTsx() : null;
const entry = chooseEntry({ distBuiltAt, newestSourceAt, tsx: tsx !== null });
if (entry === 'dist') {
  await import(pathToFileURL(distEntry).href);
} else if (entry === 'sources' && tsx !== null) {
  tsx.register();
  await import(pathToFileURL(join(root, 'src', 'cli.ts')).href);
} else {
  process.stderr.write(
    'reviews-bridge: nothing to run: no build (dist/) and no tsx to run the sources; `npm ci` then `npm run build`\n',
  );
  process.exit(1);
}
