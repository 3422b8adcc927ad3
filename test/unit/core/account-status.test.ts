import { describe, expect, it } from 'vitest';
import {
  accountStatus,
  AccountStatusSchema,
  accountsOverview,
  accountSummary,
  type AccountRecords,
} from '../../../src/core/account-status.js';
import { EMPTY_CHECKPOINT } from '../../../src/core/checkpoint.js';

// The status document of `status` and GET /v1/accounts/{account}: which progress it shows, the lag, the last
// finished pass, and that it always fits its own schema (the OpenAPI document's).

const NOW = Date.parse('2026-11-24T12:00:00Z');
const base: AccountRecords = {
  account: 'acme',
  checkpoint: EMPTY_CHECKPOINT,
  snapshotReviews: 0,
  lease: null,
  sweepRequested: false,
  pausedSince: null,
  pass: null,
  resync: null,
  changelogTxn: null,
  restoreRequested: false,
  redisDurability: null,
};

describe('accountStatus', () => {
  it('an account that never ran: no leader, no watermark, no progress', () => {
    const s = accountStatus(base, NOW);
    expect(s).toMatchObject({ leader: null, epoch: null, watermark: null, watermarkLagSeconds: null, progress: null });
    expect(AccountStatusSchema.parse(s)).toEqual(s);
  });

  it('the lease, the watermark lag and the pause', () => {
    const s = accountStatus(
      {
        ...base,
        checkpoint: { ...EMPTY_CHECKPOINT, watermark: NOW - 90_000, initialDone: true },
        lease: { holder: 'pod-a:1:abcd', epoch: 7, ttlMs: 12_000 },
        pausedSince: NOW - 5_000,
      },
      NOW,
    );
    expect(s).toMatchObject({
      leader: 'pod-a:1:abcd',
      epoch: 7,
      watermark: new Date(NOW - 90_000).toISOString(),
      watermarkLagSeconds: 90,
      paused: true,
      pausedSince: new Date(NOW - 5_000).toISOString(),
    });
  });

  it('after an initial load of old reviews the lag is since the load, not since the newest review (issue 50)', () => {
    const YEARS = 3 * 365 * 86_400_000;
    const loaded = { ...EMPTY_CHECKPOINT, watermark: NOW - YEARS, initialDone: true, lastSweepAt: NOW - 2_000 };
    expect(accountStatus({ ...base, checkpoint: loaded }, NOW).watermarkLagSeconds).toBe(2);
    // Then every complete poll: since the last one, however old the data is.
    const polled = { ...loaded, lastIncrementalAt: NOW - 500 };
    expect(accountStatus({ ...base, checkpoint: polled }, NOW).watermarkLagSeconds).toBe(0.5);
    // A bridge that stops polling falls behind by the clock.
    expect(accountStatus({ ...base, checkpoint: polled }, NOW + 600_000).watermarkLagSeconds).toBe(600.5);
  });

  it("a running sweep's progress comes from the checkpoint, estimated against the snapshot", () => {
    const s = accountStatus(
      {
        ...base,
        snapshotReviews: 1_000,
        checkpoint: { ...EMPTY_CHECKPOINT, sweep: { kind: 'sweep', cursor: 'x', startedAt: NOW - 10_000, seen: 250 } },
      },
      NOW,
    );
    expect(s.progress).toEqual({
      kind: 'sweep',
      requestId: null,
      seen: 250,
      estimatedTotal: 1_000,
      percent: 25,
      reviewsPerSecond: 25,
      eta: new Date(NOW + 30_000).toISOString(),
    });
    expect(s.lastPass).toBeNull();
  });

  it("an initial load's progress has no estimate: the snapshot is what it builds", () => {
    const s = accountStatus(
      {
        ...base,
        snapshotReviews: 250,
        checkpoint: {
          ...EMPTY_CHECKPOINT,
          sweep: { kind: 'initial', cursor: 'x', startedAt: NOW - 10_000, seen: 250 },
        },
      },
      NOW,
    );
    expect(s.progress).toMatchObject({ kind: 'initial', seen: 250, estimatedTotal: null, percent: null, eta: null });
  });

  it("the leader's own record wins while it runs, and becomes lastPass when it has finished", () => {
    const pass = { kind: 'resync' as const, requestId: 'r1', seen: 40, estimatedTotal: 80, startedAt: NOW - 4_000 };
    const checkpoint = { ...EMPTY_CHECKPOINT, sweep: { kind: 'sweep' as const, cursor: null, startedAt: 0, seen: 1 } };
    const running = accountStatus({ ...base, checkpoint, pass: { ...pass, finishedAt: null } }, NOW);
    expect(running.progress).toMatchObject({ kind: 'resync', requestId: 'r1', percent: 50, seen: 40 });
    expect(running.lastPass).toBeNull();
    const finished = accountStatus({ ...base, pass: { ...pass, seen: 80, finishedAt: NOW - 1_000 } }, NOW);
    expect(finished.progress).toBeNull();
    expect(finished.lastPass).toEqual({
      kind: 'resync',
      requestId: 'r1',
      seen: 80,
      startedAt: new Date(NOW - 4_000).toISOString(),
      finishedAt: new Date(NOW - 1_000).toISOString(),
    });
    expect(AccountStatusSchema.parse(finished)).toEqual(finished);
  });
});

describe('accountsOverview', () => {
  it('groups the accounts by the live replica leading them, and lists the unled', () => {
    const rows = [
      accountSummary('a', EMPTY_CHECKPOINT, 'r1', null),
      accountSummary('b', EMPTY_CHECKPOINT, null, NOW),
      accountSummary('c', EMPTY_CHECKPOINT, 'gone', null),
    ];
    const o = accountsOverview(rows, ['r1', 'r2'], 15_000);
    expect(o.accounts).toBe(3);
    expect(o.unled).toEqual(['b']);
    expect(o.replicas).toEqual([
      { replica: 'r1', live: true, leads: ['a'] },
      { replica: 'r2', live: true, leads: [] },
      { replica: 'gone', live: false, leads: ['c'] },
    ]);
    expect(o.byAccount[1]).toMatchObject({ account: 'b', paused: true, leader: null });
  });
});
