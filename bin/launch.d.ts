// Types of bin/launch.js (plain JavaScript, so that a Node too old to run the bridge can still parse it).

/** The one-line refusal for a Node older than a `>=X.Y.Z` engines range, or null when `version` meets it. */
export function nodeRefusal(version: string, range: string | undefined): string | null;

/** Whether the command runs the compiled CLI (dist/), the sources through tsx, or nothing can run. */
export function chooseEntry(found: {
  distBuiltAt: number | null;
  newestSourceAt: number | null;
  tsx: boolean;
}): 'dist' | 'sources' | 'none';
