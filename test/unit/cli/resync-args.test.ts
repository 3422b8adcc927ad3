import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  parseResyncArgs,
  ResyncRequestSchema,
  newResyncRequest,
  UsageError,
} from '../../../src/core/resync-request.js';

const NOW = Date.parse('2026-11-23T12:00:00Z');

describe('parseResyncArgs', () => {
  it('reads exactly one scope, and --wait', () => {
    expect(parseResyncArgs(['--ids', '3,1, 2,3'], NOW)).toEqual({
      scope: { kind: 'ids', ids: [1, 2, 3] },
      wait: false,
    });
    expect(parseResyncArgs(['--ids=7'], NOW).scope).toEqual({ kind: 'ids', ids: [7] });
    expect(parseResyncArgs(['--since', '2026-11-01'], NOW).scope).toEqual({
      kind: 'since',
      since: Date.parse('2026-11-01'),
    });
    expect(parseResyncArgs(['--since=2026-11-01T10:00:00Z', '--wait'], NOW)).toEqual({
      scope: { kind: 'since', since: Date.parse('2026-11-01T10:00:00Z') },
      wait: true,
    });
    expect(parseResyncArgs(['--since', '1700000000000'], NOW).scope).toEqual({
      kind: 'since',
      since: 1_700_000_000_000,
    });
    expect(parseResyncArgs(['--wait', '--all'], NOW)).toEqual({ scope: { kind: 'all' }, wait: true });
  });

  it.each([
    [[], 'exactly one'],
    [['--all', '--ids', '1'], 'exactly one'],
    [['--ids'], '--ids needs a value'],
    [['--ids', '--all'], '--ids needs a value'],
    [['--ids', '1,x'], '"x" is not a review id'],
    [['--ids', '1,-2'], '"-2" is not a review id'],
    [['--ids', '1,,2'], '"" is not a review id'],
    [['--since', 'yesterday'], 'not a date'],
    [['--since', '2026-13-45'], 'not a date'],
    [['--since', '2027-01-01'], 'future'],
    [['--everything'], 'unknown argument "--everything"'],
  ])('rejects %j with a clear message (%s)', (args, fragment) => {
    expect(() => parseResyncArgs(args, NOW)).toThrow(UsageError);
    expect(() => parseResyncArgs(args, NOW)).toThrow(fragment);
  });

  it('refuses more than 10,000 ids', () => {
    const ids = Array.from({ length: 10_001 }, (_, i) => i).join(',');
    expect(() => parseResyncArgs(['--ids', ids], NOW)).toThrow('at most 10000');
  });

  it('any list of ids round-trips, sorted and unique, into a valid request (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(1_000_000_000), { minLength: 1, maxLength: 50 }), (ids) => {
        const { scope } = parseResyncArgs(['--ids', ids.join(',')], NOW);
        expect(scope).toEqual({ kind: 'ids', ids: [...new Set(ids)].sort((a, b) => a - b) });
        const request = newResyncRequest(scope, NOW);
        expect(ResyncRequestSchema.parse(JSON.parse(JSON.stringify(request)))).toEqual(request);
      }),
    );
  });
});
