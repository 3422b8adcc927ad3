// The decisions of bin/reviews-bridge.js, kept apart so that unit tests can call them (test/unit/cli/launch.test.ts).
// Plain JavaScript with no syntax newer than Node 18: this module is loaded before anything checks the Node
// version, so an old Node must be able to parse it and print the refusal instead of a SyntaxError.

/**
 * The one-line refusal for a Node older than package.json's `engines.node` (a `>=X.Y.Z` range), or null when
 * `version` (process.versions.node) meets it. Another form of range is not checked (null).
 * @param {string} version
 * @param {string | undefined} range
 * @returns {string | null}
 */
export function nodeRefusal(version, range) {
  const wanted = /^\s*>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$/.exec(range || '');
  if (!wanted) return null;
  const need = [Number(wanted[1]), Number(wanted[2] || 0), Number(wanted[3] || 0)];
  const have = String(version)
    .replace(/^v/, '')
    .split('.')
    .map((part) => parseInt(part, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if ((have[i] || 0) > need[i]) return null;
    if ((have[i] || 0) < need[i]) {
      return (
        `reviews-bridge: Node ${need.join('.')} or newer is needed (this is Node ${version}): ` +
        'in a clone, `source scripts/node.sh && use_node24` puts Node 24 first on PATH; ' +
        'otherwise install Node 24 LTS (https://nodejs.org/) or run the container image'
      );
    }
  }
  return null;
}

/**
 * Where the command runs from: `dist` (the compiled CLI) when it is built and no source file is newer than it, or
 * when the sources or tsx are missing (a production image has dist/ and neither); `sources` (src/cli.ts through
 * tsx, a devDependency) in a clone without a build or with sources edited since; `none` when neither can run.
 * @param {{ distBuiltAt: number | null, newestSourceAt: number | null, tsx: boolean }} found
 *   distBuiltAt: mtime (ms) of dist/src/cli.js, null when absent; newestSourceAt: newest mtime under src/, null
 *   when there is no src/; tsx: whether tsx can be loaded
 * @returns {'dist' | 'sources' | 'none'}
 */
export function chooseEntry(found) {
  const built = found.distBuiltAt !== null;
  const sources = found.newestSourceAt !== null && found.tsx;
  if (built && (!sources || found.newestSourceAt <= found.distBuiltAt)) return 'dist';
  return sources ? 'sources' : built ? 'dist' : 'none';
}
