import type { SimulatorState } from './state.js';
import type { SimulatorControl } from './types.js';

// The in-process control facade; the HTTP control routes call the same object so both interfaces behave alike.

/** A SimulatorControl over the state of one simulator. */
export function createControl(state: SimulatorState): SimulatorControl {
  return {
    createReview: (fields) => state.store.create(fields),
    setStatus: (id, status) => state.store.setStatus(id, status),
    edit: (id, fields) => state.store.edit(id, fields),
    get: (id) => state.store.get(id),
    setFaults: (faults) => state.faults.set(faults),
    setRateLimit: (rateLimit) => state.setRateLimit(rateLimit),
    revokeTokens: () => state.tokens.revokeAll(),
    stats: () => state.stats.snapshot(),
    resetStats: () => state.stats.reset(),
    reviewCount: () => state.store.count(),
  };
}
