import { describe, expect, it } from 'vitest';
import {
  availableMemory,
  BASE_OLD_SPACE_MIB,
  missingHeapFlags,
  NO_PRETENURING,
  OLD_SPACE_MIB_PER_ACCOUNT,
  oldSpaceCapMib,
} from '../../../src/app/node-flags.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

describe('missingHeapFlags', () => {
  it('caps both spaces when nothing is given, the old space by the number of accounts', () => {
    const growing = '--heap-growing-percent=100';
    expect(missingHeapFlags([], '', 1, 24 * GiB)).toEqual([
      '--max-semi-space-size=16',
      '--max-old-space-size=256',
      growing,
      NO_PRETENURING,
    ]);
    expect(missingHeapFlags([], '', 10, 24 * GiB)).toEqual([
      '--max-semi-space-size=16',
      `--max-old-space-size=${BASE_OLD_SPACE_MIB + OLD_SPACE_MIB_PER_ACCOUNT * 9}`,
      growing,
      NO_PRETENURING,
    ]);
    expect(missingHeapFlags([], '', 0, 24 * GiB)).toEqual([
      '--max-semi-space-size=16',
      '--max-old-space-size=256',
      growing,
      NO_PRETENURING,
    ]);
  });

  it("leaves the operator's flags alone, from the command line or NODE_OPTIONS, in either spelling", () => {
    expect(missingHeapFlags(['--max-old-space-size=1024'], '', 5)).toEqual([
      '--max-semi-space-size=16',
      '--heap-growing-percent=100',
      NO_PRETENURING,
    ]);
    expect(missingHeapFlags([], '--max_semi_space_size=8 --heap_growing_percent=50', 1)).toEqual([
      '--max-old-space-size=256',
      NO_PRETENURING,
    ]);
    expect(
      missingHeapFlags(
        ['--import', 'tsx', '--heap-growing-percent=20', '--allocation-site-pretenuring'],
        '--max-old-space-size=512 --max-semi-space-size=32',
        3,
      ),
    ).toEqual([]);
    expect(missingHeapFlags([], '--no_allocation_site_pretenuring', 1)).not.toContain(NO_PRETENURING);
    // A re-executed process finds its own flags and does not re-execute again.
    const first = missingHeapFlags(['--import', 'tsx'], '', 2);
    expect(missingHeapFlags([...first, '--import', 'tsx'], '', 2)).toEqual([]);
  });

  it("doubles the heap's growth only below a 2 GiB limit, the operator's or its own", () => {
    expect(missingHeapFlags([], '', 1000, 24 * GiB)).toEqual([
      '--max-semi-space-size=16',
      `--max-old-space-size=${oldSpaceCapMib(1000, 24 * GiB)}`,
      NO_PRETENURING,
    ]);
    expect(missingHeapFlags([], '', 1000, 2 * GiB)).toContain('--heap-growing-percent=100');
    expect(missingHeapFlags([], '--max-old-space-size=4096', 1)).toEqual(['--max-semi-space-size=16', NO_PRETENURING]);
    expect(missingHeapFlags(['--max_old_space_size', '1024'], '', 100, 24 * GiB)).toContain(
      '--heap-growing-percent=100',
    );
  });

  it('does not mistake a longer flag of the same prefix for the cap', () => {
    expect(missingHeapFlags(['--max-old-space-size-extra=1'], '', 1)).toContain('--max-old-space-size=256');
  });
});

describe('oldSpaceCapMib', () => {
  it('grows with the accounts up to three quarters of the memory the process may use, never below one account', () => {
    expect(oldSpaceCapMib(1, 24 * GiB)).toBe(256);
    expect(oldSpaceCapMib(10, 24 * GiB)).toBe(256 + 9 * OLD_SPACE_MIB_PER_ACCOUNT);
    expect(oldSpaceCapMib(1_000, 24 * GiB)).toBe(Math.floor(24 * 1024 * 0.75));
    // A container limited to 384 MiB: ten accounts get 288 MiB, not 832; one account keeps 256 even in 256 MiB.
    expect(oldSpaceCapMib(10, 384 * MiB)).toBe(288);
    expect(oldSpaceCapMib(1, 256 * MiB)).toBe(256);
  });

  it('is monotonic in the accounts and in the memory', () => {
    for (const memory of [256 * MiB, 1 * GiB, 8 * GiB]) {
      let last = 0;
      for (let accounts = 1; accounts <= 200; accounts++) {
        const cap = oldSpaceCapMib(accounts, memory);
        expect(cap).toBeGreaterThanOrEqual(last);
        expect(cap).toBeGreaterThanOrEqual(BASE_OLD_SPACE_MIB);
        last = cap;
      }
    }
  });
});

describe('availableMemory', () => {
  it('is positive and never more than the machine has', async () => {
    const { totalmem } = await import('node:os');
    const bytes = availableMemory();
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThanOrEqual(totalmem());
  });
});
