import { CommitOutcomeUnknownError, SnapshotLostError } from '../../src/core/errors.js';
import type { PassesSink, PassesSnapshot } from '../../src/bridge/passes/index.js';
import type { FaultClass } from './plan.js';
import type { PortWrappers, SinkContext } from './deployment.js';
import { CHANGELOG_TXN_HEADER } from '../../src/core/changelog.js';
import type { RestoreRecord } from '../../src/bridge/restore.js';

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
    wrappers: {
      sink: (sink, _world, where) => acceptForeignRecords(sink, where),
    },
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

// A restore that cannot tell whose records it reads: every changelog topic of the cluster is read as this
// deployment's (another deployment's default changelog, as if KAFKA_TOPIC_CHANGELOG named it), its identity headers
// and its checkpoints' deployment and upstream forged to this deployment's, so the identity checks pass.
function acceptForeignRecords(sink: PassesSink, where: SinkContext): PassesSink {
  const forge = (topic: string): RestoreRecord[] =>
    where.kafka.committed(topic).flatMap((r) => {
      if (r.key === null || !r.key.startsWith(where.keyPrefix) || r.value === null) return [];
      const key = r.key.slice(where.keyPrefix.length);
      let value = Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value);
      if (key === 'checkpoint') {
        const ckpt = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
        value = Buffer.from(JSON.stringify({ ...ckpt, ...where.identity }));
      }
      const txn = Number(r.headers[CHANGELOG_TXN_HEADER] ?? '0');
      return [{ key, value, txn, deployment: where.identity.deployment }];
    });
  return new Proxy(sink, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'readChangelog') {
        return async (
          from: Record<number, number>,
          onRecords: (records: RestoreRecord[]) => Promise<void>,
          signal?: AbortSignal,
        ) => {
          if (Object.keys(from).length === 0) {
            for (const topic of [...where.kafka.topics.keys()].sort()) {
              if (topic !== where.changelogTopic && topic.includes('changelog')) await onRecords(forge(topic));
            }
          }
          return target.readChangelog(from, onRecords, signal);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
