import { describe, expect, it } from 'vitest';
import { accountArg, chooseAccount, statusReport, type StatusFacts } from '../../../src/cli/commands.js';
import type { BridgeConfig } from '../../../src/config/config.js';
import { UsageError } from '../../../src/core/errors.js';

// The command line's own logic, without Redis or Kafka: which account a command acts on, and the JSON `status`
// prints (ISO times, progress from the leader's record or else from the checkpoint).

const config = (account: string) => ({ account }) as BridgeConfig;

describe('accountArg', () => {
  it('takes --account <id> out of the arguments wherever it stands', () => {
    expect(accountArg(['--wait'])).toEqual({ account: null, args: ['--wait'] });
    expect(accountArg(['--account', 'acme', '--wait'])).toEqual({ account: 'acme', args: ['--wait'] });
    expect(accountArg(['--ids', '1,2', '--account', 'b'])).toEqual({ account: 'b', args: ['--ids', '1,2'] });
  });

  it('refuses --account without an id', () => {
    expect(() => accountArg(['--account'])).toThrow(UsageError);
    expect(() => accountArg(['--account', '--wait'])).toThrow('--account needs an account id');
  });
});

describe('chooseAccount', () => {
  const one = { accounts: [config('solo')], file: null };
  const two = { accounts: [config('a'), config('b')], file: 'accounts.yaml' };

  it('takes the only account without --account, or the one named', () => {
    expect(chooseAccount(one, null).account).toBe('solo');
    expect(chooseAccount(two, 'b').account).toBe('b');
  });

  it('asks for --account when there are several, and names the file of an unknown one', () => {
    expect(() => chooseAccount(two, null)).toThrow('2 accounts in accounts.yaml: name one with --account <id>');
    expect(() => chooseAccount(two, 'c')).toThrow('no account "c" in accounts.yaml');
    expect(() => chooseAccount(one, 'c')).toThrow('no account "c" in the environment');
  });
});

describe('statusReport', () => {
  const now = Date.UTC(2026, 0, 2, 3, 4, 5);
  const facts: StatusFacts = {
    checkpoint: { watermark: now - 60_000, initialDone: true, sweep: null, lastSweepAt: null, lastIncrementalAt: now },
    size: 1_000,
    lease: { holder: 'replica-1', epoch: 7, ttlMs: 12_000 },
    sweepRequested: false,
    pausedSince: null,
    pass: null,
    resync: null,
    changelog: { txn: 42, offsets: {}, cluster: 'c1', empty: false },
    restoreRequested: false,
    durability: null,
  };

  it('shapes an idle account: ISO times, nulls where nothing is known, no progress', () => {
    expect(statusReport('acme', facts, now)).toEqual({
      account: 'acme',
      snapshotReviews: 1_000,
      watermark: '2026-01-02T03:03:05.000Z',
      initialLoadDone: true,
      sweepInProgress: null,
      sweepRequested: false,
      progress: null,
      resyncRequested: null,
      paused: false,
      pausedSince: null,
      changelogTxn: 42,
      restoreRequested: false,
      lastSweepAt: null,
      lastIncrementalAt: '2026-01-02T03:04:05.000Z',
      lease: { holder: 'replica-1', epoch: 7, ttlMs: 12_000 },
      redisDurability: null,
    });
  });

  it('reports a sweep in progress from the checkpoint, against the snapshot size', () => {
    const sweep = { kind: 'sweep' as const, cursor: 'c', startedAt: now - 10_000, seen: 250 };
    const report = statusReport('acme', { ...facts, checkpoint: { ...facts.checkpoint, sweep } }, now);
    expect(report.sweepInProgress).toEqual({ ...sweep, startedAt: '2026-01-02T03:03:55.000Z' });
    expect(report.progress).toMatchObject({ kind: 'sweep', seen: 250, estimatedTotal: 1_000, percent: 25 });
  });

  it("prefers the leader's running progress record (it knows a resync's total), and shows a pause", () => {
    const pass = {
      kind: 'resync' as const,
      requestId: 'r1',
      seen: 5,
      estimatedTotal: 10,
      startedAt: now - 1_000,
      finishedAt: null,
    };
    const sweep = { kind: 'sweep' as const, cursor: null, startedAt: now, seen: 1 };
    const report = statusReport(
      'acme',
      { ...facts, pass, pausedSince: now - 5_000, checkpoint: { ...facts.checkpoint, sweep } },
      now,
    );
    expect(report.progress).toMatchObject({ kind: 'resync', seen: 5, estimatedTotal: 10, percent: 50 });
    expect([report.paused, report.pausedSince]).toEqual([true, '2026-01-02T03:04:00.000Z']);
  });

  it('ignores a finished progress record', () => {
    const pass = { kind: 'sweep' as const, requestId: null, seen: 9, estimatedTotal: 9, startedAt: 0, finishedAt: now };
    expect(statusReport('acme', { ...facts, pass }, now).progress).toBeNull();
  });
});
