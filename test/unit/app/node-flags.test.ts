import { describe, expect, it } from 'vitest';
import { BASE_OLD_SPACE_MIB, missingHeapFlags, OLD_SPACE_MIB_PER_ACCOUNT } from '../../../src/app/node-flags.js';

describe('missingHeapFlags', () => {
  it('caps both spaces when nothing is given, the old space by the number of accounts', () => {
    expect(missingHeapFlags([], '', 1)).toEqual(['--max-semi-space-size=16', '--max-old-space-size=256']);
    expect(missingHeapFlags([], '', 1_000)).toEqual([
      '--max-semi-space-size=16',
      `--max-old-space-size=${BASE_OLD_SPACE_MIB + OLD_SPACE_MIB_PER_ACCOUNT * 999}`,
    ]);
    expect(missingHeapFlags([], '', 0)).toEqual(['--max-semi-space-size=16', '--max-old-space-size=256']);
  });

  it("leaves the operator's flags alone, from the command line or NODE_OPTIONS, in either spelling", () => {
    expect(missingHeapFlags(['--max-old-space-size=1024'], '', 5)).toEqual(['--max-semi-space-size=16']);
    expect(missingHeapFlags([], '--max_semi_space_size=8', 1)).toEqual(['--max-old-space-size=256']);
    expect(missingHeapFlags(['--import', 'tsx'], '--max-old-space-size=512 --max-semi-space-size=32', 3)).toEqual([]);
    // A re-executed process finds its own flags and does not re-execute again.
    const first = missingHeapFlags(['--import', 'tsx'], '', 2);
    expect(missingHeapFlags([...first, '--import', 'tsx'], '', 2)).toEqual([]);
  });

  it('does not mistake a longer flag of the same prefix for the cap', () => {
    expect(missingHeapFlags(['--max-old-space-size-extra=1'], '', 1)).toContain('--max-old-space-size=256');
  });
});
