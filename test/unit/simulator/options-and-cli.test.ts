import { describe, expect, it } from 'vitest';
import { parseSimulatorArgs } from '../../../src/simulator/cli.js';
import { DEFAULT_OPTIONS, resolveOptions, SimulatorConfigError } from '../../../src/simulator/options.js';

describe('resolveOptions', () => {
  it('fills spec-faithful defaults', () => {
    expect(resolveOptions()).toEqual(DEFAULT_OPTIONS);
    expect(DEFAULT_OPTIONS).toMatchObject({
      tokenTtlSeconds: 3600,
      rateLimit: { rps: 10, status: 503 },
      payloadLimitBytes: 10 * 1024 * 1024,
      cursorPath: 'next_page',
      updatedDateUnit: 'ms',
      updatedDateComparison: 'gte',
    });
  });

  it.each([
    [{ reviewCount: -1 }, 'reviewCount'],
    [{ cursorPath: 'paging..next' }, 'cursorPath'],
    [{ rateLimit: { rps: 0 } }, 'rateLimit.rps'],
    [{ faults: { truncateRate: 1.5 } }, 'faults.truncateRate'],
    [{ updatedDateUnit: 'us' as 'ms' }, 'updatedDateUnit'],
    [{ scopelessClientId: 'demo-client' }, 'scopelessClientId'],
    [{ dataClockOffsetMs: 0.5 }, 'dataClockOffsetMs'],
  ])('names the bad setting: %o', (options, name) => {
    expect(() => resolveOptions(options)).toThrow(SimulatorConfigError);
    expect(() => resolveOptions(options)).toThrow(name);
  });
});

describe('parseSimulatorArgs', () => {
  it('maps flags to options', () => {
    expect(
      parseSimulatorArgs([
        '--port',
        '8080',
        '--reviews',
        '10000',
        '--seed',
        '1',
        '--rps',
        '5',
        '--throttle-status',
        '429',
        '--retry-after',
        'none',
        '--cursor-path',
        'paging.next_page',
        '--error-rate',
        '0.1',
        '--error-statuses',
        '500, 503',
        '--updated-date-unit',
        's',
        '--data-clock-offset-ms=-300000',
      ]),
    ).toMatchObject({
      port: 8080,
      reviewCount: 10000,
      seed: 1,
      rateLimit: { rps: 5, status: 429, retryAfterSeconds: null },
      cursorPath: 'paging.next_page',
      updatedDateUnit: 's',
      dataClockOffsetMs: -300000,
      faults: { errorRate: 0.1, errorStatuses: [500, 503] },
    });
  });

  it('switches throttling off with --rps off and leaves defaults alone otherwise', () => {
    expect(parseSimulatorArgs(['--rps', 'off'])).toMatchObject({ rateLimit: null });
    const options = parseSimulatorArgs([]);
    expect(options).not.toBe('help');
    expect(options === 'help' ? null : options.rateLimit).toBeUndefined();
    expect(resolveOptions(options === 'help' ? {} : options)).toEqual(DEFAULT_OPTIONS);
  });

  it('rejects non-numbers and unknown flags', () => {
    expect(() => parseSimulatorArgs(['--port', 'eighty'])).toThrow('--port');
    expect(() => parseSimulatorArgs(['--colour', 'red'])).toThrow();
    expect(parseSimulatorArgs(['--help'])).toBe('help');
  });
});
