import { describe, expect, it } from 'vitest';
import { MUTANTS } from './mutants.js';
import { runSeed, scheduleSeed } from './simulate.js';

// The simulation in CI: schedules of the default fault classes must keep the contract, each mutant must be caught
// within 300 schedules, and a seed must replay exactly. The seed of each run is drawn anew (printed on failure with
// the command that replays it), so every CI run explores schedules no earlier run did.

const SCHEDULES = Number(process.env.SIM_SCHEDULES ?? 300);
const SEED = process.env.SIM_SEED === undefined ? (Date.now() % 2 ** 31) | 0 : Number(process.env.SIM_SEED);

describe('the simulated world', () => {
  it(`keeps the contract in ${SCHEDULES} schedules of the default fault classes (seed ${SEED})`, async () => {
    const failures: string[] = [];
    for (let i = 0; i < SCHEDULES && failures.length === 0; i++) {
      const result = await runSeed(scheduleSeed(SEED, i));
      if (result.violation) {
        const v = result.violation;
        failures.push(
          `${v.property} (${v.deployment}): ${v.detail}\n` +
            `trace: ${result.trace.map((t) => `${t.at} ${t.what}`).join('; ')}\n` +
            `replay: npm run simulate:faults -- --schedules 1 --seed ${result.seed}`,
        );
      }
    }
    expect(failures).toEqual([]);
  });

  for (const [name, mutant] of Object.entries(MUTANTS)) {
    it(`finds the mutant ${name} (${mutant.description}) within 300 schedules`, async () => {
      let found = -1;
      for (let i = 0; i < 300 && found < 0; i++) {
        if ((await runSeed(scheduleSeed(SEED, i), { mutant: name })).violation) found = i;
      }
      expect(found).toBeGreaterThanOrEqual(0);
    });
  }

  it('replays a seed exactly: the same steps, trace and feed', async () => {
    const seed = scheduleSeed(SEED, 1);
    const [a, b] = [await runSeed(seed), await runSeed(seed)];
    expect(b.steps).toBe(a.steps);
    expect(b.trace).toEqual(a.trace);
    expect(b.stats).toEqual(a.stats);
    expect(b.steps).toBeGreaterThan(500);
    expect(b.stats.events).toBeGreaterThan(0);
  });
});
