// Entry point of the upstream simulator: a real HTTP server faithful to the upstream API (docs/upstream.md), with
// its open points as settings and faults switchable at runtime.

export type {
  Faults,
  PoisonKind,
  PoisonRecord,
  RateLimitOptions,
  Simulator,
  SimulatorControl,
  SimulatorOptions,
  SimulatorStats,
  StatusFault,
} from './types.js';
export { POISON_KINDS, SimulatorConfigError } from './options.js';
export { SimulatorControlError, SimulatorHttpControl } from './control-client.js';
export { runSimulatorCli } from './cli.js';
export { startMultiSimulator } from './multi.js';
export type { MultiSimulator, SimulatorAccount, SimulatorAccountSpec, MultiSimulatorShared } from './multi.js';
export { startSimulator } from './start.js';
