import { describe, expect, it, vi } from 'vitest';
import { CursorFormatError, createCursorLocator, cursorFromValue, readPath } from '../../../src/upstream/cursor.js';

describe('readPath', () => {
  it('follows dotted paths and stops at non-objects', () => {
    const doc = { paging: { next_page: 'abc' }, list: [1], n: 3 };
    expect(readPath(doc, 'paging.next_page')).toBe('abc');
    expect(readPath(doc, 'paging.missing')).toBeUndefined();
    expect(readPath(doc, 'n.x')).toBeUndefined();
    expect(readPath(doc, 'list.0')).toBeUndefined();
    expect(readPath(null, 'a')).toBeUndefined();
  });
});

describe('cursorFromValue', () => {
  it('accepts strings and numbers, treats null/empty as the end', () => {
    expect(cursorFromValue('c1', 'p')).toBe('c1');
    expect(cursorFromValue(' c1 ', 'p')).toBe('c1');
    expect(cursorFromValue(1234, 'p')).toBe('1234');
    expect(cursorFromValue(null, 'p')).toBeNull();
    expect(cursorFromValue(undefined, 'p')).toBeNull();
    expect(cursorFromValue('', 'p')).toBeNull();
  });

  it('extracts next_page from a link URL (absolute or relative)', () => {
    expect(cursorFromValue('https://api.example.com/v1/reviews?limit=100&next_page=abc%3D', 'links.next')).toBe('abc=');
    expect(cursorFromValue('/v1/reviews?next_page=42', 'links.next')).toBe('42');
    expect(cursorFromValue('?cursor=zz', 'links.next')).toBe('zz');
    expect(cursorFromValue({ href: '/v1/reviews?next_page=7' }, '_links.next')).toBe('7');
  });

  it('fails clearly on a link without a cursor parameter or a non-scalar', () => {
    expect(() => cursorFromValue('https://api.example.com/v1/reviews?page=2', 'links.next')).toThrow(CursorFormatError);
    expect(() => cursorFromValue('https://api.example.com/v1/reviews?page=2', 'links.next')).toThrow(/cursor path/);
    expect(() => cursorFromValue(['a'], 'next')).toThrow(/array/);
    expect(() => cursorFromValue(true, 'next')).toThrow(CursorFormatError);
  });
});

describe('createCursorLocator', () => {
  it('reads only the configured path', () => {
    const locator = createCursorLocator('paging.next_page');
    expect(locator.next({ paging: { next_page: 'p2' }, next_page: 'other' })).toBe('p2');
    expect(locator.next({ next_page: 'other' })).toBeNull();
    expect(locator.path).toBe('paging.next_page');
  });

  it.each([
    [{ next_page: 'a' }, 'next_page', 'a'],
    [{ nextPage: 'a' }, 'nextPage', 'a'],
    [{ next_page_token: 'a' }, 'next_page_token', 'a'],
    [{ cursor: 'a' }, 'cursor', 'a'],
    [{ next: 'a' }, 'next', 'a'],
    [{ paging: { next_page: 'a' } }, 'paging.next_page', 'a'],
    [{ paging: { next: 'a' } }, 'paging.next', 'a'],
    [{ meta: { next_page: 12 } }, 'meta.next_page', '12'],
    [{ links: { next: 'https://x.example/v1/reviews?next_page=a' } }, 'links.next', 'a'],
  ])('detects %j at %s', (envelope, path, cursor) => {
    const onDetected = vi.fn();
    const locator = createCursorLocator(undefined, onDetected);
    expect(locator.next({ count: 1, reviews: [], ...envelope })).toBe(cursor);
    expect(locator.path).toBe(path);
    expect(onDetected).toHaveBeenCalledWith(path);
  });

  it('locks the detected path so that a later page cannot switch fields', () => {
    const locator = createCursorLocator(null);
    expect(locator.next({ paging: { next_page: 'p2' } })).toBe('p2');
    expect(locator.next({ next: 'unrelated' })).toBeNull();
  });

  it('returns null and detects nothing on an envelope without a cursor', () => {
    const locator = createCursorLocator();
    expect(locator.next({ count: 0, reviews: [] })).toBeNull();
    expect(locator.next({ next_page: null, next: {} })).toBeNull();
    expect(locator.path).toBeNull();
  });
});
