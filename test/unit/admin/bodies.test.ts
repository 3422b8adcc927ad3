import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseEmptyBody, parseResyncBody } from '../../../src/admin/bodies.js';

// Admin API bodies: what is accepted, and for what is not, the field at fault.

const NOW = Date.parse('2026-11-24T12:00:00Z');

describe('parseResyncBody', () => {
  it('accepts exactly one of ids, since, all', () => {
    expect(parseResyncBody({ ids: [5, 3, 5] }, NOW)).toEqual({ ok: true, value: { kind: 'ids', ids: [3, 5] } });
    expect(parseResyncBody({ since: '2026-11-01' }, NOW)).toEqual({
      ok: true,
      value: { kind: 'since', since: Date.parse('2026-11-01T00:00:00Z') },
    });
    expect(parseResyncBody({ since: '2026-11-01T12:00:00+01:00' }, NOW)).toEqual({
      ok: true,
      value: { kind: 'since', since: Date.parse('2026-11-01T11:00:00Z') },
    });
    expect(parseResyncBody({ since: 1_700_000_000_000 }, NOW)).toEqual({
      ok: true,
      value: { kind: 'since', since: 1_700_000_000_000 },
    });
    expect(parseResyncBody({ all: true }, NOW)).toEqual({ ok: true, value: { kind: 'all' } });
  });

  it('names the field at fault', () => {
    const field = (raw: unknown) => {
      const r = parseResyncBody(raw, NOW);
      return r.ok ? null : r.problem.field;
    };
    expect(field(undefined)).toBe('body');
    expect(field([1, 2])).toBe('body');
    expect(field('all')).toBe('body');
    expect(field({})).toBe('body');
    expect(field({ ids: [1], all: true })).toBe('body');
    expect(field({ idz: [1] })).toBe('idz');
    expect(field({ ids: [1, 'x', 3] })).toBe('ids[1]');
    expect(field({ ids: [1, -2] })).toBe('ids[1]');
    expect(field({ ids: [1.5] })).toBe('ids[0]');
    expect(field({ ids: [] })).toBe('ids');
    expect(field({ ids: Array.from({ length: 10_001 }, (_, i) => i) })).toBe('ids');
    expect(field({ ids: '1,2' })).toBe('ids');
    expect(field({ since: 'yesterday' })).toBe('since');
    expect(field({ since: '2026-13-01' })).toBe('since');
    expect(field({ since: -1 })).toBe('since');
    expect(field({ since: '2027-01-01' })).toBe('since');
    expect(field({ all: false })).toBe('all');
    expect(field({ all: 'yes' })).toBe('all');
  });

  it('says what is wrong', () => {
    const r = parseResyncBody({ since: '2027-01-01' }, NOW);
    expect(r).toEqual({ ok: false, problem: { field: 'since', message: 'the date is in the future' } });
    const u = parseResyncBody({ ids: [1], extra: 1 }, NOW);
    expect(u).toEqual({ ok: false, problem: { field: 'extra', message: 'unknown field' } });
    const both = parseResyncBody({ ids: [1], since: 0 }, NOW);
    expect(both).toEqual({ ok: false, problem: { field: 'body', message: 'give exactly one of ids, since, all' } });
  });

  it('any list of non-negative integer ids is accepted as the sorted set of them', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 200 }), (ids) => {
        const r = parseResyncBody({ ids }, NOW);
        expect(r).toEqual({ ok: true, value: { kind: 'ids', ids: [...new Set(ids)].sort((a, b) => a - b) } });
      }),
    );
  });
});

describe('parseEmptyBody', () => {
  it('accepts no body or {}, and names any field given', () => {
    expect(parseEmptyBody(undefined)).toEqual({ ok: true, value: {} });
    expect(parseEmptyBody({})).toEqual({ ok: true, value: {} });
    expect(parseEmptyBody({ force: true })).toEqual({
      ok: false,
      problem: { field: 'force', message: 'unknown field' },
    });
    const notObject = parseEmptyBody([1]);
    expect(notObject.ok).toBe(false);
    expect(notObject.ok ? null : notObject.problem.field).toBe('body');
  });
});
