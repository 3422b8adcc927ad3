import { CheckpointChangeSchema, type CheckpointChange } from '../core/checkpoint-change.js';
import { ResyncRequestSchema, type ResyncRequest } from '../core/resync-request.js';
import type { AccountKeys, BridgeRedis } from './connection.js';
import { num, safeJson } from './store-common.js';

// The control flags of one account: what operators ask of its leader (pause, a sweep, a restore, a resync). They
// are requests, not state: none is fenced, and the leader takes each between passes.

/** The operator's requests to one account's leader, as Redis keys. */
export class ControlFlags {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /** Pauses the bridge (operator command): the leader makes no upstream request while the flag is set. */
  async pause(now = Date.now()): Promise<void> {
    // NX keeps the time of the first pause, so the "paused for too long" alert measures from it.
    await this.redis.set(this.keys.paused, String(now), 'NX');
  }

  /** Lifts a pause; returns whether the bridge was paused. */
  async resume(): Promise<boolean> {
    return (await this.redis.del(this.keys.paused)) === 1;
  }

  /** When the bridge was paused (ms), or null when it is not: the leader checks it every tick. */
  async pausedSince(): Promise<number | null> {
    return num((await this.redis.get(this.keys.paused)) ?? undefined);
  }

  /** Asks the leader for a sweep now (from the CLI or an operator); not fenced, it is only a request. */
  async requestSweep(now = Date.now()): Promise<void> {
    await this.redis.set(this.keys.sweepRequest, String(now));
  }

  /** Whether a sweep request is pending (not yet taken by the leader). */
  async sweepRequested(): Promise<boolean> {
    return (await this.redis.exists(this.keys.sweepRequest)) === 1;
  }

  /** Takes a pending sweep request, if any. */
  async takeSweepRequest(): Promise<boolean> {
    return (await this.redis.getdel(this.keys.sweepRequest)) !== null;
  }

  /** Asks the leader for a full restore from the Kafka changelog (the `restore` command); only a request. */
  async requestRestore(now = Date.now()): Promise<void> {
    await this.redis.set(this.keys.restoreRequest, String(now));
  }

  /** Whether a restore request is pending (not yet taken by the leader). */
  async restoreRequested(): Promise<boolean> {
    return (await this.redis.exists(this.keys.restoreRequest)) === 1;
  }

  /** Takes a pending restore request, if any. */
  async takeRestoreRequest(): Promise<boolean> {
    return (await this.redis.getdel(this.keys.restoreRequest)) !== null;
  }

  /** Records an operator's checkpoint change for the leader (replaces a pending one); only a request. */
  async requestCheckpointChange(change: CheckpointChange): Promise<void> {
    await this.redis.set(this.keys.checkpointRequest, JSON.stringify(change));
  }

  /** The pending checkpoint change without taking it (GET .../checkpoint), or null. */
  async pendingCheckpointChange(): Promise<CheckpointChange | null> {
    const raw = await this.redis.get(this.keys.checkpointRequest);
    const parsed = raw === null ? null : CheckpointChangeSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : null;
  }

  /**
   * The pending checkpoint change to apply, left in place until `checkpointChangeApplied`: taken before its commit,
   * a change whose commit failed was lost (the leader never applied it). 'invalid': an unreadable one, dropped.
   */
  async nextCheckpointChange(): Promise<{ change: CheckpointChange; stored: string } | 'invalid' | null> {
    const raw = await this.redis.get(this.keys.checkpointRequest);
    if (raw === null) return null;
    const parsed = CheckpointChangeSchema.safeParse(safeJson(raw));
    if (parsed.success) return { change: parsed.data, stored: raw };
    await this.redis.bridgeResyncDone(this.keys.checkpointRequest, raw);
    return 'invalid';
  }

  /** Clears a change once committed, unless an operator recorded another meanwhile (that one is applied next). */
  async checkpointChangeApplied(stored: string): Promise<void> {
    await this.redis.bridgeResyncDone(this.keys.checkpointRequest, stored);
  }

  /** Records a resync request for the leader (replaces a pending one); not fenced, it is only a request. */
  async requestResync(request: ResyncRequest): Promise<void> {
    await this.redis.set(this.keys.resyncRequest, JSON.stringify(request));
  }

  /**
   * Takes the resync to run: one a former leader left unfinished first, else the pending request (moved to the
   * active key until finishResync). An unreadable one is dropped and reported as 'invalid'.
   */
  async takeResyncRequest(): Promise<ResyncRequest | 'invalid' | null> {
    const raw = await this.redis.bridgeResyncTake(this.keys.resyncRequest, this.keys.resyncActive);
    if (raw === null) return null;
    const parsed = ResyncRequestSchema.safeParse(safeJson(raw));
    if (parsed.success) return parsed.data;
    await this.redis.bridgeResyncDone(this.keys.resyncActive, raw);
    return 'invalid';
  }

  /** Clears a resync once it has completed (a later request is left alone). */
  async finishResync(request: ResyncRequest): Promise<void> {
    const active = await this.redis.get(this.keys.resyncActive);
    const parsed = active === null ? null : ResyncRequestSchema.safeParse(safeJson(active));
    if (active !== null && parsed?.success && parsed.data.id === request.id) {
      await this.redis.bridgeResyncDone(this.keys.resyncActive, active);
    }
  }

  /** Puts a resync this replica took but did not complete back (a clean hand-over); the active copy stays. */
  async requeueResync(request: ResyncRequest): Promise<void> {
    // The active key already holds it for the next leader: writing it as pending too would run it twice.
    void request;
  }

  /** The pending resync request without taking it (for `status`). */
  async pendingResync(): Promise<ResyncRequest | null> {
    const raw = (await this.redis.get(this.keys.resyncRequest)) ?? (await this.redis.get(this.keys.resyncActive));
    const parsed = raw === null ? null : ResyncRequestSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : null;
  }
}
