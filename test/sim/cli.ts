import { parseArgs } from 'node:util';
import { FAULT_CLASSES, DEFAULT_FAULTS, type FaultClass } from './plan.js';
import {
  faultsOf,
  runSeed,
  scheduleSeed,
  shrinkSeed,
  type ScheduleResult,
  type SimulationOptions,
} from './simulate.js';
import { MUTANTS } from './mutants.js';

// npm run simulate:faults -- --schedules N --seed S [--mutant NAME] [--faults a,b|+a,-b] [--verbose]
// Runs N schedules (schedule i has seed S+i), prints each failing one (its plan, trace, first violated property and
// the command that replays it) and ends with "N schedules, V violations"; exits 1 when V > 0.

function usage(): never {
  console.error(
    'usage: npm run simulate:faults -- --schedules N --seed S [--mutant NAME] [--faults LIST] [--stop-at-first]\n' +
      '  [--shrink SECONDS]: shrink each failing schedule with fast-check for at most that long\n' +
      '  [--focus LIST]: every schedule has at least one fault of these classes\n' +
      `  --faults: a comma-separated list of fault classes, or +class/-class changes to the default\n` +
      `  fault classes: ${FAULT_CLASSES.join(', ')}\n  default: ${DEFAULT_FAULTS.join(', ')}\n` +
      `  mutants: ${Object.keys(MUTANTS).join(', ')}`,
  );
  process.exit(2);
}

function faultList(spec: string | undefined): FaultClass[] | undefined {
  if (spec === undefined) return undefined;
  const items = spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const known = (name: string): FaultClass => {
    if (!(FAULT_CLASSES as readonly string[]).includes(name)) {
      console.error(`unknown fault class ${name}`);
      usage();
    }
    return name as FaultClass;
  };
  if (items.every((i) => i.startsWith('+') || i.startsWith('-'))) {
    const set = new Set<FaultClass>(DEFAULT_FAULTS);
    for (const i of items) {
      if (i.startsWith('+')) set.add(known(i.slice(1)));
      else set.delete(known(i.slice(1)));
    }
    return [...set];
  }
  return items.map(known);
}

/** The report of a failing schedule: plan, the end of its trace, the violation and the replay command. */
export function report(result: ScheduleResult, options: SimulationOptions): string {
  const v = result.violation!;
  const faults = [...faultsOf(options)].join(',');
  const lines = [
    `schedule seed ${result.seed}: VIOLATION of "${v.property}" (${v.deployment}): ${v.detail}`,
    `  plan: ${JSON.stringify(result.plan)}`,
    `  trace (virtual ms since the start):`,
    ...result.trace.slice(-60).map((t) => `    ${String(t.at).padStart(7)} ${t.what}`),
    `  replay: npm run simulate:faults -- --schedules 1 --seed ${result.seed} --faults ${faults}${options.mutant ? ` --mutant ${options.mutant}` : ''}${options.focus?.length ? ` --focus ${options.focus.join(',')}` : ''}`,
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      schedules: { type: 'string', default: '100' },
      seed: { type: 'string' },
      mutant: { type: 'string' },
      faults: { type: 'string' },
      focus: { type: 'string' },
      'stop-at-first': { type: 'boolean', default: false },
      shrink: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) usage();
  const schedules = Number(values.schedules);
  const seed = values.seed === undefined ? (Date.now() ^ (process.pid << 8)) | 0 : Number(values.seed);
  if (!Number.isInteger(schedules) || schedules < 1 || !Number.isInteger(seed)) usage();
  if (values.mutant !== undefined && !MUTANTS[values.mutant]) usage();
  const focus = values.focus === undefined ? undefined : faultList(values.focus);
  const options: SimulationOptions = { faults: faultList(values.faults), mutant: values.mutant, focus };
  console.log(
    `simulating ${schedules} schedules from seed ${seed}; faults ${[...faultsOf(options)].join(',')}${options.mutant ? `; mutant ${options.mutant}` : ''}`,
  );
  const t0 = performance.now();
  let violations = 0;
  let events = 0;
  let steps = 0;
  let run = 0;
  for (let i = 0; i < schedules; i++) {
    const result = await runSeed(scheduleSeed(seed, i), options);
    run += 1;
    events += result.stats.events;
    steps += result.steps;
    if (result.violation) {
      violations += 1;
      console.log(report(result, options));
      if (values.shrink !== undefined) {
        const small = await shrinkSeed(result.seed, options, Number(values.shrink) || 60);
        if (small) {
          const lines = report({ ...small, seed: result.seed }, options)
            .split('\n')
            .slice(0, 2);
          console.log(
            `shrunk for at most ${values.shrink} s (to read: a shrunk schedule is not replayed by its seed):`,
          );
          console.log(lines.map((l) => l.replace('schedule seed', 'from schedule seed')).join('\n'));
        }
      }
      if (values['stop-at-first']) break;
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `${(run / seconds) * 60 >= 10 ? Math.round((run / seconds) * 60) : ((run / seconds) * 60).toFixed(1)} schedules/min (${seconds.toFixed(1)} s; ${steps} steps, ${events} events read)`,
  );
  console.log(`${run} schedules, ${violations} violations`);
  process.exitCode = violations > 0 ? 1 : 0;
}

await main();
