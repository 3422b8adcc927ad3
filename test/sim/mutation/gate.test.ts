import { describe, expect, it } from 'vitest';
import { PRODUCT_MUTANTS } from './product-mutants.js';
import { baseCopy, runMutant, verifyMutants } from './gate.js';
import { rmSync } from 'node:fs';

// The mutation gate's CI subset: every mutant's original text is still in the product, and the mutants issue 48
// names are killed by the simulation within their budget (seed 48, as `npm run simulate:mutants` runs them; a seed
// replays exactly, so this is the gate's own verdict). The whole gate stays `npm run simulate:mutants`.

const SCHEDULES = Number(process.env.SIM_MUTANT_SCHEDULES ?? 300);
const SEED = Number(process.env.SIM_MUTANT_SEED ?? 48);

describe('the mutation gate', () => {
  it('finds the original text of every mutant exactly once in the product', () => {
    expect(() => verifyMutants()).not.toThrow();
  });

  it('stops when a mutant no longer applies', () => {
    const stale = {
      ...PRODUCT_MUTANTS[0]!,
      edits: [{ file: 'src/bridge/pipeline/commit.ts', from: 'no such text', to: '' }],
    };
    expect(() => verifyMutants([stale])).toThrow(/holds the original text 0 times/);
  });

  // The named mutants the simulation kills (guard-noop falls to its unit test, commit-lua-no-fence to its real-Redis
  // test, the simulation being unable to see it: docs/testing.md, the mutation gate).
  for (const m of PRODUCT_MUTANTS.filter((x) => ['catch-up-no-flush', 'reused-txn'].includes(x.name))) {
    it(`kills ${m.name} (${m.description}) within ${SCHEDULES} schedules`, async () => {
      const base = baseCopy();
      try {
        const verdict = await runMutant(m, { schedules: SCHEDULES, seed: SEED, integration: false }, base);
        expect(verdict.by).toMatch(/^simulation: /);
        expect(verdict.killed).toBe(true);
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    });
  }
});
