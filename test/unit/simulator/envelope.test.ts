import { describe, expect, it } from 'vitest';
import { buildEnvelope, setAtPath } from '../../../src/simulator/envelope.js';

describe('setAtPath', () => {
  it('sets a top-level key', () => {
    const target: Record<string, unknown> = { count: 1 };
    setAtPath(target, 'next_page', '5');
    expect(target).toEqual({ count: 1, next_page: '5' });
  });

  it('creates intermediate objects for a dotted path', () => {
    const target: Record<string, unknown> = {};
    setAtPath(target, 'meta.paging.next', '7');
    expect(target).toEqual({ meta: { paging: { next: '7' } } });
  });

  it('keeps existing siblings and replaces non-object intermediates', () => {
    const target: Record<string, unknown> = { meta: { total: 3 }, links: 'x' };
    setAtPath(target, 'meta.next', '9');
    setAtPath(target, 'links.next', '9');
    expect(target).toEqual({ meta: { total: 3, next: '9' }, links: { next: '9' } });
  });
});

describe('buildEnvelope', () => {
  const records = [{ id: 1 }, { id: 2 }];

  it('puts count, reviews and the next id as a string cursor', () => {
    expect(buildEnvelope(records, 3, 'next_page', 'absent')).toEqual({ count: 2, reviews: records, next_page: '3' });
    expect(buildEnvelope(records, 3, 'paging.next_page', 'absent')).toEqual({
      count: 2,
      reviews: records,
      paging: { next_page: '3' },
    });
  });

  it('leaves the cursor out, or sets it null, on the last page', () => {
    expect(buildEnvelope(records, null, 'paging.next_page', 'absent')).toEqual({ count: 2, reviews: records });
    expect(buildEnvelope(records, null, 'paging.next_page', 'null')).toEqual({
      count: 2,
      reviews: records,
      paging: { next_page: null },
    });
  });
});
