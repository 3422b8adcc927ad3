import { parseArgs } from 'node:util';
import { PRODUCT_MUTANTS } from './product-mutants.js';
import { runGate, table } from './gate.js';

// npm run simulate:mutants -- [--schedules N] [--seed S] [--jobs J] [--only a,b]
// Applies each product mutant (product-mutants.ts) to a scratch copy of the repository, runs the simulation against
// it (at most N schedules from seed S, stopping at the first violation; then the fast tests that apply), and prints
// the table of verdicts, ending with "M mutants, K killed". Exits 1 when fewer than 90 % are killed, when a survivor
// is not documented, or when an original text of a mutant is no longer found in the product (before running anything).

const { values } = parseArgs({
  options: {
    schedules: { type: 'string', default: '300' },
    seed: { type: 'string', default: '48' },
    jobs: { type: 'string', default: '2' },
    only: { type: 'string' },
  },
});
const only = values.only?.split(',').map((s) => s.trim());
const mutants = only ? PRODUCT_MUTANTS.filter((m) => only.includes(m.name)) : PRODUCT_MUTANTS;
if (only && mutants.length !== only.length) {
  console.error(`unknown mutant in --only; known: ${PRODUCT_MUTANTS.map((m) => m.name).join(', ')}`);
  process.exit(2);
}
const options = {
  schedules: Number(values.schedules),
  seed: Number(values.seed),
  integration: process.env.REDIS_URL !== undefined,
  log: (line: string) => console.log(line),
};
console.log(
  `mutation gate: ${mutants.length} mutants, at most ${options.schedules} schedules each from seed ${options.seed}, ${values.jobs} at a time` +
    (options.integration ? '' : ' (no REDIS_URL: the integration tests of script-only mutants are skipped)'),
);
const t0 = performance.now();
const verdicts = await runGate(mutants, options, Number(values.jobs));
console.log(`\n${((performance.now() - t0) / 60_000).toFixed(1)} min`);
console.log(table(verdicts));
const killed = verdicts.filter((v) => v.killed).length;
const undocumented = verdicts.filter((v) => !v.killed && !mutants.find((m) => m.name === v.name)?.survivor);
for (const v of undocumented) console.log(`survivor ${v.name} is not documented (product-mutants.ts: survivor)`);
for (const v of verdicts.filter((x) => x.killed && mutants.find((m) => m.name === x.name)?.survivor))
  console.log(`${v.name} was killed: its survivor note is out of date`);
process.exitCode = killed / verdicts.length >= 0.9 && undocumented.length === 0 ? 0 : 1;
