import { POISON_KINDS, parseFaults } from './options.js';
import type { SimulatorState } from './state.js';
import type { PoisonRecord, SimulatorControl } from './types.js';

// The in-process control facade; the HTTP control routes call the same object so both interfaces behave alike.

/** A SimulatorControl over the state of one simulator. */
export function createControl(state: SimulatorState): SimulatorControl {
  return {
    createReview: (fields) => state.store.create(fields),
    setStatus: (id, status) => state.store.setStatus(id, status),
    setStatusLate: (id, status, lateByMs) => state.store.setStatus(id, status, lateByMs),
    edit: (id, fields) => state.store.edit(id, fields),
    get: (id) => state.store.get(id),
    setFaults: (faults) => state.faults.set(faults),
    setRateLimit: (rateLimit) => state.setRateLimit(rateLimit),
    revokeTokens: () => state.tokens.revokeAll(),
    stats: () => state.stats.snapshot(),
    resetStats: () => state.stats.reset(),
    reviewCount: () => state.store.count(),
    addPoisonReviews: (kinds = [...POISON_KINDS]) => {
      const current = state.faults.current();
      // Validated before anything is created, so a bad kind leaves the store as it was.
      parseFaults({ ...current, poison: kinds.map((kind) => ({ id: 1, kind })) });
      const added: PoisonRecord[] = kinds.map((kind) => ({ id: state.store.create().id as number, kind }));
      state.faults.set({ poison: [...current.poison, ...added] });
      return added;
    },
    removeReview: (id) => state.store.remove(id),
    restoreReview: (id) => state.store.restore(id),
  };
}
