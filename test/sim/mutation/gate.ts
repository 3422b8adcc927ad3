import { spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PRODUCT_MUTANTS, type ProductMutant } from './product-mutants.js';

// The mutation gate's machinery: a scratch copy of the repository per mutant (src/ and test/ copied, node_modules
// linked; the working tree is never touched), the mutant's edits applied there, its fast tests and then the
// simulation run in it, and the verdict. cli: test/sim/mutation/run.ts (npm run simulate:mutants); CI subset:
// test/sim/mutation/gate.test.ts.

/** The repository the gate copies (this file is test/sim/mutation/gate.ts). */
export const ROOT = resolve(import.meta.dirname, '../../..');

/** What happened to one mutant. */
export interface MutantVerdict {
  name: string;
  faults: string;
  killed: boolean;
  /** What killed it: a unit test file, the simulation's property, or a crash of the run. */
  by: string;
  /** Schedules the simulation ran (0: killed before it by a fast test). */
  schedules: number;
  seconds: number;
}

/** Settings of a gate run. */
export interface GateOptions {
  schedules: number;
  seed: number;
  /** Run the integration files of script-only mutants (needs REDIS_URL). */
  integration: boolean;
  /** Where to print each mutant's progress (none by default). */
  log?: (line: string) => void;
}

/** Checks every mutant's edits against the working tree: each original text must be found exactly once. */
export function verifyMutants(mutants: readonly ProductMutant[] = PRODUCT_MUTANTS, root = ROOT): void {
  const problems: string[] = [];
  const names = new Set<string>();
  for (const m of mutants) {
    if (names.has(m.name)) problems.push(`${m.name}: the name is used twice`);
    names.add(m.name);
    // Edits of one file apply in order, each to the text the previous ones left.
    const texts = new Map<string, string>();
    for (const e of m.edits) {
      const path = join(root, e.file);
      if (!texts.has(e.file)) texts.set(e.file, existsSync(path) ? readFileSync(path, 'utf8') : '');
      const text = texts.get(e.file)!;
      const count = text.split(e.from).length - 1;
      if (count !== 1) {
        problems.push(
          `${m.name}: ${e.file} holds the original text ${count} times (exactly once expected): ${JSON.stringify(e.from.slice(0, 80))}`,
        );
        continue;
      }
      texts.set(
        e.file,
        text.replace(e.from, () => e.to),
      );
    }
  }
  if (problems.length > 0) {
    throw new Error(
      `the mutation gate cannot apply ${problems.length} edit(s); update test/sim/mutation/product-mutants.ts:\n  ${problems.join('\n  ')}`,
    );
  }
}

const COPIED = ['src', 'test', 'schemas', 'patches', 'package.json', 'tsconfig.json', 'vitest.config.ts'];

/**
 * A copy of what the gate needs of the repository (src/, test/, the configs; node_modules linked), taken once per
 * run, so that every mutant is applied to the same tree however the working tree changes meanwhile.
 */
export function baseCopy(root = ROOT): string {
  const dir = mkdtempSync(join(tmpdir(), 'mutation-base-'));
  for (const entry of COPIED) {
    if (existsSync(join(root, entry))) cpSync(join(root, entry), join(dir, entry), { recursive: true });
  }
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** A scratch copy of the base with the mutant's edits applied; resolves its directory. */
export function scratchCopy(m: ProductMutant, base: string): string {
  const dir = mkdtempSync(join(tmpdir(), `mutant-${m.name}-`));
  for (const entry of COPIED) {
    if (existsSync(join(base, entry))) cpSync(join(base, entry), join(dir, entry), { recursive: true });
  }
  symlinkSync(realpathSync(join(base, 'node_modules')), join(dir, 'node_modules'));
  for (const e of m.edits) {
    const path = join(dir, e.file);
    const text = readFileSync(path, 'utf8');
    if (text.split(e.from).length !== 2) throw new Error(`${m.name}: ${e.file} no longer holds its original text`);
    writeFileSync(
      path,
      text.replace(e.from, () => e.to),
    );
  }
  return dir;
}

interface Run {
  code: number | null;
  output: string;
}

function run(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, {
      cwd,
      env: { ...process.env, SIM_LOG: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, output }));
  });
}

const VITEST = ['node_modules/vitest/vitest.mjs', 'run'];
const TSX = ['--import', 'tsx'];

/** The fault classes of a mutant's run, as the table shows them. */
export function faultsLabel(m: ProductMutant): string {
  const focus = m.focus.length > 0 ? `+${m.focus.join(',')}` : '';
  return m.faults ? `${m.faults.join(',')}${m.focus.length ? ` (focus ${m.focus.join(',')})` : ''}` : `all${focus}`;
}

/** Applies a mutant in a scratch copy, runs its fast tests and the simulation there, and removes the copy. */
export async function runMutant(m: ProductMutant, options: GateOptions, base: string): Promise<MutantVerdict> {
  const t0 = performance.now();
  const dir = scratchCopy(m, base);
  const verdict = (killed: boolean, by: string, schedules: number): MutantVerdict => ({
    name: m.name,
    faults: faultsLabel(m),
    killed,
    by,
    schedules,
    seconds: (performance.now() - t0) / 1000,
  });
  try {
    const args = [
      ...TSX,
      'test/sim/cli.ts',
      '--schedules',
      String(options.schedules),
      '--seed',
      String(options.seed),
      '--stop-at-first',
    ];
    if (m.faults) args.push('--faults', m.faults.join(','));
    if (m.focus.length > 0) args.push('--focus', m.focus.join(','));
    const r = await run(dir, args);
    const last = /(\d+) schedules, (\d+) violations\s*$/.exec(r.output);
    if (!last) {
      const error = r.output.trim().split('\n').slice(-3).join(' | ').slice(0, 160);
      return verdict(true, `simulation crashed: ${error}`, 0);
    }
    const schedules = Number(last[1]);
    if (Number(last[2]) > 0) {
      const property = /VIOLATION of "([^"]+)"/.exec(r.output)?.[1] ?? 'a property';
      // A kill counts only where the product itself passes: the same schedule, replayed on the unmutated copy.
      const replay = /replay: npm run simulate:faults -- (.*)$/m.exec(r.output)?.[1]?.trim().split(/\s+/) ?? [];
      const baseline = await run(base, [...TSX, 'test/sim/cli.ts', ...replay]);
      if (replay.length === 0 || !/1 schedules, 0 violations\s*$/.test(baseline.output)) {
        return verdict(false, `no verdict: the unmutated product fails the same schedule (${property})`, schedules);
      }
      return verdict(true, `simulation: ${property}`, schedules);
    }
    // The simulation missed it: the fast tests that apply get their turn.
    for (const file of m.unit ?? []) {
      const r = await run(dir, [...VITEST, '--project', 'unit', file]);
      if (r.code !== 0) return verdict(true, `unit ${file}`, schedules);
    }
    if (options.integration) {
      for (const file of m.integration ?? []) {
        const r = await run(dir, [...VITEST, '--project', 'integration', file]);
        if (r.code !== 0) return verdict(true, `integration ${file}`, schedules);
      }
    }
    return verdict(false, '', schedules);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs mutants `jobs` at a time; resolves their verdicts in the order given. */
export async function runGate(
  mutants: readonly ProductMutant[],
  options: GateOptions,
  jobs: number,
): Promise<MutantVerdict[]> {
  verifyMutants(mutants);
  const base = baseCopy();
  const verdicts: MutantVerdict[] = new Array(mutants.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < mutants.length) {
      const i = next++;
      const v = await runMutant(mutants[i]!, options, base);
      verdicts[i] = v;
      options.log?.(
        `${v.name}: ${v.killed ? `killed by ${v.by}` : 'SURVIVED'} after ${v.schedules} schedules (${v.seconds.toFixed(0)} s)`,
      );
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  return verdicts;
}

/** The gate's table, ending with the line `M mutants, K killed`. */
export function table(verdicts: readonly MutantVerdict[]): string {
  const rows = verdicts.map((v) => [
    v.name,
    v.faults,
    v.killed
      ? 'killed'
      : PRODUCT_MUTANTS.find((m) => m.name === v.name)?.survivor
        ? 'survived (documented)'
        : 'survived',
    String(v.schedules),
    v.by,
    `${v.seconds.toFixed(0)} s`,
  ]);
  const head = ['mutant', 'fault classes', 'result', 'schedules', 'killed by', 'time'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  const killed = verdicts.filter((v) => v.killed).length;
  return [
    line(head),
    `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.map(line),
    '',
    `${verdicts.length} mutants, ${killed} killed`,
  ].join('\n');
}
