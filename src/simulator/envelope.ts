import type { SimRecord } from './data.js';

// The listing envelope. The spec names count and reviews but not the cursor field, so the cursor's place is a
// setting: clients must be tested against more than one shape.

/** Sets value at a dotted path, creating intermediate objects (`a.b.c`). */
export function setAtPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const segments = path.split('.');
  let node = target;
  for (const segment of segments.slice(0, -1)) {
    const child = node[segment];
    if (typeof child === 'object' && child !== null && !Array.isArray(child)) {
      node = child as Record<string, unknown>;
    } else {
      const created: Record<string, unknown> = {};
      node[segment] = created;
      node = created;
    }
  }
  node[segments[segments.length - 1] as string] = value;
}

/** The envelope of one page; the cursor is the next page's first id as a string, left out or null on the last page. */
export function buildEnvelope(
  records: readonly SimRecord[],
  nextId: number | null,
  cursorPath: string,
  lastPageCursor: 'absent' | 'null',
): Record<string, unknown> {
  const envelope: Record<string, unknown> = { count: records.length, reviews: records };
  if (nextId !== null) setAtPath(envelope, cursorPath, String(nextId));
  else if (lastPageCursor === 'null') setAtPath(envelope, cursorPath, null);
  return envelope;
}
