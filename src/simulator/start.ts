import { createControl } from './control.js';
import { listen } from './listen.js';
import { resolveOptions } from './options.js';
import { createSimulatorServer } from './server.js';
import { SimulatorState } from './state.js';
import type { Simulator, SimulatorOptions } from './types.js';

// Starting one simulator: its own module so that the command line and the package entry both import it (the
// entry re-exports the command line, which must not import the entry back).

/** Starts a simulator and resolves once it listens; throws SimulatorConfigError on a bad option. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const options = resolveOptions(opts);
  const state = new SimulatorState(options);
  const control = createControl(state);
  const server = createSimulatorServer(state, control);
  const { url, close } = await listen(server, options.host, options.port, () => state.closing.abort());
  return { url, control, close };
}
