import { describe, expect, it } from 'vitest';
import { numberedAccounts, parseAccountsFile } from '../../../src/simulator/accounts.js';
import { parseSimulatorArgs, parseSimulatorCommand } from '../../../src/simulator/cli.js';
import { startMultiSimulator } from '../../../src/simulator/multi.js';
import { SimulatorConfigError } from '../../../src/simulator/options.js';

describe('numberedAccounts', () => {
  it('numbers accounts from acct-01 with seeds base + index', () => {
    const specs = numberedAccounts(3, { seed: 10, reviewCount: 50 });
    expect(specs).toEqual([
      { id: 'acct-01', options: { seed: 10, reviewCount: 50 } },
      { id: 'acct-02', options: { seed: 11, reviewCount: 50 } },
      { id: 'acct-03', options: { seed: 12, reviewCount: 50 } },
    ]);
  });

  it('pads to the width of the count and defaults the base seed to 1', () => {
    const specs = numberedAccounts(120);
    expect(specs[0]).toEqual({ id: 'acct-001', options: { seed: 1 } });
    expect(specs[119]?.id).toBe('acct-120');
  });

  it.each([0, -1, 1.5, 1001])('refuses %s accounts', (count) => {
    expect(() => numberedAccounts(count)).toThrow(SimulatorConfigError);
    expect(() => numberedAccounts(count)).toThrow('--accounts');
  });
});

describe('parseAccountsFile', () => {
  it('lays each entry’s options over the common ones, faults key by key', () => {
    const text = JSON.stringify([
      { id: 'shop-a', options: { seed: 7, faults: { latencyMs: 5 } } },
      { id: 'shop-b' },
      { id: 'shop-c', options: { rateLimit: null } },
    ]);
    const specs = parseAccountsFile(text, { seed: 100, reviewCount: 20, faults: { errorRate: 0.5 } });
    expect(specs).toEqual([
      { id: 'shop-a', options: { seed: 7, reviewCount: 20, faults: { errorRate: 0.5, latencyMs: 5 } } },
      { id: 'shop-b', options: { seed: 101, reviewCount: 20, faults: { errorRate: 0.5 } } },
      { id: 'shop-c', options: { seed: 102, reviewCount: 20, rateLimit: null, faults: { errorRate: 0.5 } } },
    ]);
  });

  it.each([
    ['not json', 'not valid JSON'],
    ['[]', '--accounts-file'],
    ['{"id":"a"}', '--accounts-file'],
    ['[{"id":"a","seed":3}]', 'seed'],
    ['[{"id":7}]', '0.id'],
  ])('refuses %s', (text, message) => {
    expect(() => parseAccountsFile(text)).toThrow(SimulatorConfigError);
    expect(() => parseAccountsFile(text)).toThrow(message);
  });
});

describe('parseSimulatorCommand', () => {
  it('is single-account without the multi-account flags, as before', () => {
    expect(parseSimulatorCommand(['--reviews', '5'])).toEqual({
      options: expect.objectContaining({ reviewCount: 5 }) as unknown,
      multi: null,
    });
    expect(parseSimulatorArgs(['--reviews', '5'])).toMatchObject({ reviewCount: 5 });
  });

  it('reads --accounts, --accounts-file and --credentials-dir', () => {
    expect(parseSimulatorCommand(['--accounts', '10', '--credentials-dir', '/tmp/c', '--rps', '5'])).toMatchObject({
      options: { rateLimit: { rps: 5 } },
      multi: { count: 10, file: null, credentialsDir: '/tmp/c' },
    });
    expect(parseSimulatorCommand(['--accounts-file', 'a.json'])).toMatchObject({
      multi: { count: null, file: 'a.json', credentialsDir: null },
    });
  });

  it.each([
    [['--accounts', 'ten'], '--accounts'],
    [['--accounts', '2', '--accounts-file', 'a.json'], 'not both'],
    [['--credentials-dir', '/tmp/c'], '--credentials-dir'],
    [['--accounts', '2', '--client-secret', 's'], '--client-secret'],
  ])('refuses %j', (argv, message) => {
    expect(() => parseSimulatorCommand(argv)).toThrow(SimulatorConfigError);
    expect(() => parseSimulatorCommand(argv)).toThrow(message);
  });
});

describe('startMultiSimulator settings', () => {
  it.each([
    [[], 'at least one account'],
    [[{ id: 'a/b' }], "'a/b'"],
    [[{ id: '' }], 'accounts.id'],
    [[{ id: 'a' }, { id: 'a' }], 'twice'],
    [[{ id: 'a', options: { port: 1234 } }], 'host and port'],
    [[{ id: 'a', options: { reviewCount: -1 } }], 'account a: invalid simulator setting reviewCount'],
  ])('refuses %j before listening', async (specs, message) => {
    const started = startMultiSimulator(specs as Parameters<typeof startMultiSimulator>[0]);
    await expect(started).rejects.toThrow(SimulatorConfigError);
    await expect(started).rejects.toThrow(message);
  });
});
