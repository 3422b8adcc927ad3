import { CursorFormatError } from '../core/errors.js';
// The specification does not say where the next-page cursor is in the listing envelope. A configured dotted path
// wins; without one, the common shapes are tried in order and the first that yields a cursor is remembered (so a
// later page cannot switch to an unrelated field that merely looks like a cursor).

/** Paths tried, in order, when no cursor path is configured. */
export const CURSOR_CANDIDATES: readonly string[] = [
  'next_page',
  'nextPage',
  'next_page_token',
  'nextPageToken',
  'cursor',
  'next_cursor',
  'next',
  'paging.next_page',
  'paging.next',
  'paging.cursors.after',
  'meta.next_page',
  'meta.next',
  'pagination.next_page',
  'links.next',
  '_links.next',
];

/** Query parameters that carry the cursor when the envelope holds a link instead of a bare cursor. */
const LINK_PARAMS = ['next_page', 'nextPage', 'cursor', 'page_token'];

/** Re-exported from the one error model, where it is defined. */
export { CursorFormatError };

/** Reads the value at a dotted path ('paging.next_page') of a parsed JSON value, or undefined. */
export function readPath(root: unknown, path: string): unknown {
  let node: unknown = root;
  for (const key of path.split('.')) {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * Turns what the envelope holds at the cursor's place into a cursor string, or null for "no next page".
 * Numbers become strings; a link (absolute or relative URL with a query) yields its cursor query parameter;
 * an object with an `href` (HAL-style links) is followed to that link.
 */
export function cursorFromValue(value: unknown, path: string): string | null {
  if (value === undefined || value === null || value === false) return null;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new CursorFormatError(`cursor at '${path}' is not a finite number`);
    return String(value);
  }
  if (typeof value === 'object' && !Array.isArray(value) && 'href' in value) {
    return cursorFromValue((value as { href: unknown }).href, `${path}.href`);
  }
  if (typeof value !== 'string') throw new CursorFormatError(`cursor at '${path}' is a ${kindOf(value)}, not a string`);
  const text = value.trim();
  if (text === '') return null;
  if (!looksLikeLink(text)) return text;
  const url = new URL(text, 'http://relative.invalid');
  for (const param of LINK_PARAMS) {
    const found = url.searchParams.get(param);
    if (found !== null) return found === '' ? null : found;
  }
  throw new CursorFormatError(
    `cursor at '${path}' is a link without a ${LINK_PARAMS.join('/')} query parameter; set the cursor path explicitly`,
  );
}

function looksLikeLink(text: string): boolean {
  return /^https?:\/\//i.test(text) || (text.includes('?') && (text.startsWith('/') || text.startsWith('?')));
}

function kindOf(value: unknown): string {
  return Array.isArray(value) ? 'array' : typeof value;
}

/** Finds the next-page cursor of a page: configured path, or detected among CURSOR_CANDIDATES. */
export interface CursorLocator {
  /** The cursor of the next page, or null when the envelope announces none. */
  next(envelope: unknown): string | null;
  /** The path in use: configured, detected, or null while nothing has been detected yet. */
  readonly path: string | null;
}

/**
 * Creates a locator. With `configuredPath` only that path is read. Without it the first candidate that yields a
 * cursor is locked in (reported through `onDetected`) and used from then on.
 */
export function createCursorLocator(
  configuredPath?: string | null,
  onDetected?: (path: string) => void,
): CursorLocator {
  let locked: string | null = configuredPath?.trim() || null;
  return {
    get path() {
      return locked;
    },
    next(envelope) {
      if (locked !== null) return cursorFromValue(readPath(envelope, locked), locked);
      for (const candidate of CURSOR_CANDIDATES) {
        const value = readPath(envelope, candidate);
        // Only a usable scalar or link identifies the shape; e.g. a `next: {}` placeholder does not.
        const usable =
          typeof value === 'string' ||
          typeof value === 'number' ||
          (typeof value === 'object' && value !== null && 'href' in value);
        if (!usable) continue;
        const cursor = cursorFromValue(value, candidate);
        if (cursor !== null) {
          locked = candidate;
          onDetected?.(candidate);
          return cursor;
        }
      }
      return null;
    },
  };
}
