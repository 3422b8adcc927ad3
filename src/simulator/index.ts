import type { AddressInfo } from 'node:net';
import { createControl } from './control.js';
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

/** Starts a simulator and resolves once it listens; throws SimulatorConfigError on a bad option. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const options = resolveOptions(opts);
  const state = new SimulatorState(options);
  const control = createControl(state);
  const server = createSimulatorServer(state, control);
  // Clients keep connections alive; outlive undici's default keep-alive so the server is not the one to drop them.
  server.keepAliveTimeout = 10_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;

  let closed: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    control,
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        state.closing.abort();
        server.close((error) => (error === undefined ? resolve() : reject(error)));
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
