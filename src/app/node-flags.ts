import { totalmem } from 'node:os';

// Node 24 sizes its heap for throughput, not for a small service: the young generation grows to 64 MiB per
// semi-space, and with a 4 GiB old-space limit V8 lets garbage pile up long before a full collection. Measured with
// one account of a million reviews (docs/benchmarks.md#memory): 315 MiB of RSS at peak for the compiled build and
// 356 MiB under tsx with only the semi-space capped, 184 MiB with both caps. So `run` applies both caps itself
// (src/cli.ts, before the bridge's modules load) when neither the command line nor NODE_OPTIONS sets them.
// The old space grows with the number of accounts, by more than an account's own state (under 3 MiB): V8 lets a
// heap grow the less between full collections the lower its limit, and ten initial loads at once under a cap of
// 256 + 4 MiB per account spent a fifth more CPU than under 832 MiB or more, at the same RSS
// (docs/benchmarks.md#cpu-per-review). It never exceeds three quarters of the memory the process may use (its
// container's limit, else the machine's), so that V8 collects before the kernel kills. The same cause at one
// account: under a 256 MiB limit V8 grows the heap by 1.1-1.3 times between full collections, and an initial load
// spent 81-87 ms of CPU per 1,000 new reviews instead of 54-59 with the heap doubling (--heap-growing-percent=100),
// so `run` sets that for limits below 2 GiB. From 2 GiB V8 allows up to 4 times by itself, and the flag (which
// replaces V8's choice) would only hold it back: 1,000 accounts on two replicas (18 GiB caps here) used less
// memory with it, at a worse steady-state p99 (2.3 s against 1.3).
// And `run` turns off V8's allocation-site pretenuring. A page's objects (its 100 reviews, their events) are alive
// for a page or two, and V8 samples survival at a scavenge: when it finds a page's worth of them all alive (a page
// in flight), it decides that their allocation sites make long-lived objects and allocates every later page's
// straight into the old space, for good. In about half of the processes measured it did, and an initial load there
// ran 4-5 full collections per 20,000 reviews instead of 1, with the scavenges twice as long: a median of 61.7 ms of
// CPU per 1,000 new reviews in such a process against 52.1 with the flag, same code (docs/benchmarks.md). What it
// costs is committed heap in a replica leading many accounts (about 0.3 MiB more per led account at 500; the heap in
// use the same). An operator's own flags always win.

/** The young generation's cap when none is given, MiB per semi-space (Node 20's default). */
export const DEFAULT_SEMI_SPACE_MIB = 16;
/** The old space's cap for one account when none is given, MiB. */
export const BASE_OLD_SPACE_MIB = 256;
/** What each further configured account adds to the old space's cap, MiB: room for the pages its passes hold. */
export const OLD_SPACE_MIB_PER_ACCOUNT = 64;
/** The largest share of the memory the process may use that the old space's cap takes. */
export const OLD_SPACE_SHARE_OF_MEMORY = 0.75;
/** How much the heap may grow between full collections when none is given, percent (V8's own: 10-30 at 256 MiB). */
export const HEAP_GROWING_PERCENT = 100;
/** The old-space cap from which V8's own growth (up to 4 times) is left alone, MiB. */
export const HEAP_GROWING_BELOW_MIB = 2048;
/** V8's pretenuring off: it takes the page path's short-lived objects for long-lived ones (see above). */
export const NO_PRETENURING = '--no-allocation-site-pretenuring';

const SEMI_SPACE = /--max[-_]semi[-_]space[-_]size(=|\s|$)/;
const OLD_SPACE = /--max[-_]old[-_]space[-_]size(=|\s|$)/;
const HEAP_GROWING = /--heap[-_]growing[-_]percent(=|\s|$)/;
const PRETENURING = /--(no[-_])?allocation[-_]site[-_]pretenuring(=|\s|$)/;
const OLD_SPACE_VALUE = /--max[-_]old[-_]space[-_]size[=\s](\d+)/;

/** The old space's cap for `accounts` accounts in a process that may use `memoryBytes`, MiB. */
export function oldSpaceCapMib(accounts: number, memoryBytes: number): number {
  const wanted = BASE_OLD_SPACE_MIB + OLD_SPACE_MIB_PER_ACCOUNT * Math.max(0, accounts - 1);
  const room = Math.floor((memoryBytes / 2 ** 20) * OLD_SPACE_SHARE_OF_MEMORY);
  return Math.max(BASE_OLD_SPACE_MIB, Math.min(wanted, room));
}

/** Bytes this process may use: its cgroup's limit when it has one below the machine's memory, else the machine's. */
export function availableMemory(): number {
  const total = totalmem();
  // Without a limit Node reports 0 or a value far above the machine's memory (2^64 on Linux).
  const constrained = process.constrainedMemory();
  return constrained > 0 && constrained < total ? constrained : total;
}

/** The heap flags `run` adds for `accounts` accounts: none of those the operator already set (argv or NODE_OPTIONS). */
export function missingHeapFlags(
  execArgv: readonly string[],
  nodeOptions: string,
  accounts: number,
  memoryBytes: number = availableMemory(),
): string[] {
  const given = [...execArgv, nodeOptions].join(' ');
  const flags: string[] = [];
  if (!SEMI_SPACE.test(given)) flags.push(`--max-semi-space-size=${DEFAULT_SEMI_SPACE_MIB}`);
  const cap = oldSpaceCapMib(accounts, memoryBytes);
  if (!OLD_SPACE.test(given)) flags.push(`--max-old-space-size=${cap}`);
  const limit = Number(OLD_SPACE_VALUE.exec(given)?.[1] ?? cap);
  if (!HEAP_GROWING.test(given) && limit < HEAP_GROWING_BELOW_MIB) {
    flags.push(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  }
  if (!PRETENURING.test(given)) flags.push(NO_PRETENURING);
  return flags;
}

/**
 * Replaces this process by itself with the missing heap flags (same pid, so signals and supervisors see no
 * difference); returns the flags it could not apply (none when it did not need to).
 */
export function applyHeapFlags(accounts: number): string[] {
  const flags = missingHeapFlags(process.execArgv, process.env.NODE_OPTIONS ?? '', accounts);
  // process.execve exists on Unix since Node 22.15; elsewhere the process keeps Node's defaults.
  if (flags.length === 0 || typeof process.execve !== 'function') return flags;
  const [, ...args] = process.argv;
  return process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...args], process.env);
}
