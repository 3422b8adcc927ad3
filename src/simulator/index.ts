import { createControl } from './control.js';
import { listen } from './listen.js';
import { resolveOptions } from './options.js';
import { createSimulatorServer } from './server.js';
import { SimulatorState } from './state.js';
import type { Simulator, SimulatorOptions } from './types.js';

// Entry point of the upstream simulator: a real HTTP server faithful to reviews-api.md, with the open points of
// the spec as settings and faults switchable at runtime.

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

/** Starts a simulator and resolves once it listens; throws SimulatorConfigError on a bad option. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const options = resolveOptions(opts);
  const state = new SimulatorState(options);
  const control = createControl(state);
  const server = createSimulatorServer(state, control);
  const { url, close } = await listen(server, options.host, options.port, () => state.closing.abort());
  return { url, control, close };
}
