import { CommitOutcomeUnknownError, SnapshotLostError } from '../../src/core/errors.js';
import type { PassesSink, PassesSnapshot } from '../../src/bridge/passes/index.js';
import type { FaultClass } from './plan.js';
import type { PortWrappers } from './deployment.js';

// Deliberately broken variants of the bridge, built here and injected through its ports (nothing in the product
// knows of them), to prove that the simulation finds what it is meant to find. Each names the fault classes it
// needs: a mutant is only visible where its fault strikes.

/** A mutant: its wrappers and the fault classes it needs on top of the run's. */
export interface Mutant {
  description: string;
  faults: FaultClass[];
  wrappers: PortWrappers;
}

/** The mutants by name. */
export const MUTANTS: Record<string, Mutant> = {
  'unresolved-commit': {
    description:
      'the committer forgets a commit whose outcome is unknown (treats it as failed, derives the page again)',
    faults: ['kafka-commit-lost'],
    wrappers: {
      sink: (sink) => forgetUnknownCommits(sink),
    },
  },
  'partial-loss-undetected': {
    description: 'the snapshot store answers a lost bucket as empty',
    faults: ['redis-partial-loss'],
    wrappers: {
      snapshot: (store) => lostBucketsAsEmpty(store),
    },
  },
  'foreign-changelog': {
    description: "a restore accepts another deployment's changelog records",
    faults: ['foreign-deployment'],
    wrappers: {},
  },
};

// A commit of unknown outcome reported as an ordinary failure: the loop backs off and derives the page again.
function forgetUnknownCommits(sink: PassesSink): PassesSink {
  const forget = (err: unknown): never => {
    if (err instanceof CommitOutcomeUnknownError) throw new Error('the Kafka commit failed');
    throw err;
  };
  return new Proxy(sink, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'publish' || prop === 'publishDeletions') {
        return (...args: unknown[]) =>
          (value as (...a: unknown[]) => Promise<unknown>).apply(target, args).catch(forget);
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

// Reads that a partial-loss check refuses (SnapshotLostError while the account's epoch is intact) are answered
// from what is left instead, without the check: the lost entries read as absent, as on a store without detection.
function lostBucketsAsEmpty(store: PassesSnapshot): PassesSnapshot {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'read') {
        return async (ids: readonly number[], epoch?: number, minTxn?: number) => {
          try {
            return await target.read(ids, epoch, minTxn);
          } catch (err) {
            if (!(err instanceof SnapshotLostError) || /account keys are gone|changelog transaction/.test(err.message))
              throw err;
            return target.read(ids);
          }
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
