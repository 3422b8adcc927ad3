import { describe, expect, it } from 'vitest';
import { processFreshness } from '../../../src/app/health.js';
import type { AccountBridge } from '../../../src/app/account.js';
import { freshnessReport, type FreshnessReport } from '../../../src/core/freshness-report.js';

// What /readyz carries of the bound that holds for late changes: the only account's report (null on a standby), or
// several accounts' by account, the ones led by this replica only.

const report = freshnessReport({ boundMs: 30_000, tiers: [], allotment: null });

function accounts(led: Record<string, FreshnessReport | null>): ReadonlyMap<string, AccountBridge> {
  return new Map(
    Object.entries(led).map(([account, r]) => [account, { account, freshness: () => r } as unknown as AccountBridge]),
  );
}

describe('processFreshness', () => {
  it('one account: its report, or null while it stands by', () => {
    expect(processFreshness({ accounts: accounts({ a: report }), only: true })).toEqual(report);
    expect(processFreshness({ accounts: accounts({ a: null }), only: true })).toBeNull();
  });

  it('several accounts: by account, the ones led here', () => {
    expect(processFreshness({ accounts: accounts({ a: report, b: null, c: report }), only: false })).toEqual({
      a: report,
      c: report,
    });
  });
});
