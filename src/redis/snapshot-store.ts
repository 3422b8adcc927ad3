import type { RandomSource } from '../core/random.js';
import type { AccountKeys, BridgeRedis } from './connection.js';
import { CheckpointStore } from './checkpoint-store.js';
import { ControlFlags } from './control-flags.js';
import { DeadLetterMemory } from './dead-letter-memory.js';
import { SnapshotEntries } from './snapshot-entries.js';
import { SnapshotRestore } from './snapshot-restore.js';

export type { Checkpoint, CheckpointUpdate } from '../core/checkpoint.js';
export { PassProgressSchema, type PassProgress } from './checkpoint-store.js';
export { FencedError, SnapshotLostError } from '../core/errors.js';

// One account's state in Redis, in parts that share the connection and the key names: the snapshot entries
// (snapshot-entries.ts) and their restore from the changelog (snapshot-restore.ts), the checkpoint and pass progress (checkpoint-store.ts), the operator's control flags
// (control-flags.ts) and the dead-letter memory (dead-letter-memory.ts). Callers that need one part can take it
// (`store.entries`, ...); the methods below are the parts' own, so the store still serves every port at once.

/** Reads and commits snapshot entries and the checkpoint of one account, and keeps its flags and memories. */
export class SnapshotStore {
  readonly entries: SnapshotEntries;
  readonly restore: SnapshotRestore;
  readonly checkpoints: CheckpointStore;
  readonly control: ControlFlags;
  readonly deadLetters: DeadLetterMemory;

  /** `random`: where restore tokens come from (default node:crypto; the simulation passes its seeded one). */
  constructor(redis: BridgeRedis, keys: AccountKeys, random?: RandomSource) {
    this.entries = new SnapshotEntries(redis, keys);
    this.control = new ControlFlags(redis, keys);
    const control = this.control;
    this.restore = new SnapshotRestore(
      redis,
      keys,
      {
        value: () => control.pauseValue(),
        mark: (value) => control.markPauseState(value),
      },
      random,
    );
    this.checkpoints = new CheckpointStore(redis, keys);
    this.deadLetters = new DeadLetterMemory(redis, keys);
  }

  // The snapshot entries.
  read: SnapshotEntries['read'] = (...a) => this.entries.read(...a);
  goneSequences: SnapshotEntries['goneSequences'] = (...a) => this.entries.goneSequences(...a);
  commit: SnapshotEntries['commit'] = (...a) => this.entries.commit(...a);
  size: SnapshotEntries['size'] = () => this.entries.size();
  scanEntries: SnapshotEntries['scanEntries'] = (...a) => this.entries.scanEntries(...a);
  removeEntries: SnapshotEntries['removeEntries'] = (...a) => this.entries.removeEntries(...a);

  // A restore from the Kafka changelog.
  clearForRestore: SnapshotRestore['clearForRestore'] = () => this.restore.clearForRestore();
  restoreEntries: SnapshotRestore['restoreEntries'] = (...a) => this.restore.restoreEntries(...a);
  restoreFinish: SnapshotRestore['restoreFinish'] = (...a) => this.restore.restoreFinish(...a);
  seal: SnapshotRestore['seal'] = (...a) => this.restore.seal(...a);
  sealIfComplete: SnapshotRestore['sealIfComplete'] = (...a) => this.restore.sealIfComplete(...a);
  verifyHeld: SnapshotRestore['verifyHeld'] = () => this.restore.verifyHeld();

  // The checkpoint and the progress of long passes.
  checkpoint: CheckpointStore['checkpoint'] = (...a) => this.checkpoints.checkpoint(...a);
  changelogTxn: CheckpointStore['changelogTxn'] = () => this.checkpoints.changelogTxn();
  changelogState: CheckpointStore['changelogState'] = () => this.checkpoints.changelogState();
  setKafkaCluster: CheckpointStore['setKafkaCluster'] = (...a) => this.checkpoints.setKafkaCluster(...a);
  stampIdentity: CheckpointStore['stampIdentity'] = (...a) => this.checkpoints.stampIdentity(...a);
  setPassProgress: CheckpointStore['setPassProgress'] = (...a) => this.checkpoints.setPassProgress(...a);
  passProgress: CheckpointStore['passProgress'] = () => this.checkpoints.passProgress();

  // The operator's control flags.
  pause: ControlFlags['pause'] = (...a) => this.control.pause(...a);
  resume: ControlFlags['resume'] = () => this.control.resume();
  pausedSince: ControlFlags['pausedSince'] = () => this.control.pausedSince();
  adoptPauseState: ControlFlags['adoptPauseState'] = () => this.control.adoptPauseState();
  requestSweep: ControlFlags['requestSweep'] = (...a) => this.control.requestSweep(...a);
  requestCheckpointChange: ControlFlags['requestCheckpointChange'] = (...a) =>
    this.control.requestCheckpointChange(...a);
  pendingCheckpointChange: ControlFlags['pendingCheckpointChange'] = () => this.control.pendingCheckpointChange();
  nextCheckpointChange: ControlFlags['nextCheckpointChange'] = () => this.control.nextCheckpointChange();
  checkpointChangeApplied: ControlFlags['checkpointChangeApplied'] = (...a) =>
    this.control.checkpointChangeApplied(...a);
  sweepRequested: ControlFlags['sweepRequested'] = () => this.control.sweepRequested();
  takeSweepRequest: ControlFlags['takeSweepRequest'] = () => this.control.takeSweepRequest();
  requestRestore: ControlFlags['requestRestore'] = (...a) => this.control.requestRestore(...a);

  /**
   * An operator's reset (the account must be paused): forgets the account's Redis state (snapshot and checkpoint;
   * the lease, the epoch counter, the pause and the last pass's progress stay) and asks for a restore, so that the leader rebuilds
   * it from this deployment's changelog, or starts over when the changelog holds nothing of it (a new initial
   * load). Resolves false, doing nothing, when the account is not paused.
   */
  async reset(now = Date.now()): Promise<boolean> {
    if ((await this.control.pausedSince()) === null) return false;
    await this.restore.clearForRestore();
    await this.control.requestRestore(now);
    return true;
  }
  restoreRequested: ControlFlags['restoreRequested'] = () => this.control.restoreRequested();
  takeRestoreRequest: ControlFlags['takeRestoreRequest'] = () => this.control.takeRestoreRequest();
  requestResync: ControlFlags['requestResync'] = (...a) => this.control.requestResync(...a);
  takeResyncRequest: ControlFlags['takeResyncRequest'] = () => this.control.takeResyncRequest();
  finishResync: ControlFlags['finishResync'] = (...a) => this.control.finishResync(...a);
  requeueResync: ControlFlags['requeueResync'] = (...a) => this.control.requeueResync(...a);
  pendingResync: ControlFlags['pendingResync'] = () => this.control.pendingResync();

  // The dead-letter memory.
  unseenDeadLetters: DeadLetterMemory['unseenDeadLetters'] = (...a) => this.deadLetters.unseenDeadLetters(...a);
  rememberDeadLetters: DeadLetterMemory['rememberDeadLetters'] = (...a) => this.deadLetters.rememberDeadLetters(...a);
}
