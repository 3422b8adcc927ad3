import { z } from 'zod';
import type { Identity } from '../core/identity.js';
import type { Checkpoint, CheckpointUpdate } from '../core/checkpoint.js';
import { SnapshotLostError } from '../core/errors.js';
import { durably, type AccountKeys, type BridgeRedis } from './connection.js';
import { MARKER, num, safeJson } from './store-common.js';

// The checkpoint of one account (how far its passes got, and which changelog transaction Redis reflects) and the
// progress of its running pass. The checkpoint is written together with entries by the snapshot's commit script
// (snapshot-entries.ts); this part reads it, and encodes an update as the script's field pairs.

/** Progress of the running (or last) sweep, initial load or resync, as the leader publishes it for `status`. */
export const PassProgressSchema = z.object({
  kind: z.enum(['initial', 'sweep', 'resync', 'restore']),
  /** The resync request this pass serves (resync only), so `resync --wait` follows the right one. */
  requestId: z.string().nullable(),
  seen: z.number().int().nonnegative(),
  estimatedTotal: z.number().int().nonnegative().nullable(),
  startedAt: z.number().int(),
  finishedAt: z.number().int().nullable(),
});

/** Progress of a long pass as stored in Redis. */
export type PassProgress = z.infer<typeof PassProgressSchema>;

/** What a restore compares (see CheckpointStore.changelogState). */
export interface ChangelogState {
  txn: number | null;
  offsets: Record<number, number>;
  cluster: string | null;
  empty: boolean;
  /** The checkpoint and the bucket manifest carry their markers (a snapshot of the previous format does not). */
  sealed: boolean;
  /** The deployment and upstream that wrote the checkpoint (null: none named, or written before identities). */
  identity: Identity | null;
}

/** Reads the checkpoint of one account and keeps the progress of its long passes. */
export class CheckpointStore {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /**
   * The current checkpoint, confirmed by the replicas: a pass resumes only from a state a failover cannot undo
   * (after a commit whose acknowledgement timed out, this read waits for it again or fails).
   */
  async checkpoint(live = false, sealed = false): Promise<Checkpoint> {
    const [h, epoch, listed] = (await durably(this.redis, (p) => {
      p.hgetall(this.keys.checkpoint);
      if (live) p.exists(this.keys.epoch).hexists(this.keys.manifest, 'v');
    })) as [Record<string, string>, number?, number?];
    // A leader's read: an emptied Redis must not read as an account that never ran (a second initial load), nor
    // a checkpoint gone alone (evicted, deleted by hand) beside a sealed snapshot.
    if (live && epoch === 0) throw new SnapshotLostError('LOST: the account keys are gone');
    if (live && (h[MARKER] !== undefined) !== (listed === 1)) {
      const gone = listed === 1 ? 'the checkpoint' : 'the bucket manifest';
      throw new SnapshotLostError(`LOST-PART: ${gone} of the account vanished from Redis`, true);
    }
    // Both gone with the epoch kept (a superseded leader's restore cleared them, whose clear no fence stops) read
    // as an account never run: a leadership that sealed the account knows better.
    if (live && sealed && h[MARKER] === undefined) {
      throw new SnapshotLostError(
        'LOST-PART: the checkpoint and the bucket manifest of the account vanished from Redis',
        true,
      );
    }
    const sweepKind = h.sweep_kind === 'initial' || h.sweep_kind === 'sweep' ? h.sweep_kind : null;
    return {
      watermark: num(h.watermark),
      initialDone: h.initial_done === '1',
      sweep: sweepKind
        ? {
            kind: sweepKind,
            cursor: h.sweep_cursor ? h.sweep_cursor : null,
            startedAt: num(h.sweep_started_at) ?? 0,
            seen: num(h.sweep_seen) ?? 0,
          }
        : null,
      lastSweepAt: num(h.last_sweep_at),
      lastIncrementalAt: num(h.last_incremental_at),
      unreadable: decodeUnreadable(h.unreadable),
      unreadableCandidates: decodeCandidates(h.unreadable_candidates),
      deferredSweeps: num(h.deferred_sweeps) ?? 0,
      deferredReason: h.deferred_reason ? h.deferred_reason : null,
    };
  }

  /** The number of the last changelog transaction Redis reflects (0: none, or a snapshot older than changelogs). */
  async changelogTxn(): Promise<number> {
    return num((await this.redis.hget(this.keys.checkpoint, 'txn')) ?? undefined) ?? 0;
  }

  /**
   * What a restore compares: Redis's changelog transaction (null when Redis holds no checkpoint at all), the
   * changelog offsets its last commits got, the Kafka cluster it was restored from or written to, the epoch counter,
   * and whether the account is sealed (its lost buckets can be told from new ones).
   */
  async changelogState(): Promise<ChangelogState> {
    const [h, listed] = (await durably(this.redis, (p) => {
      p.hgetall(this.keys.checkpoint).hexists(this.keys.manifest, 'v');
    })) as [Record<string, string>, number];
    const offsets: Record<number, number> = {};
    for (const [field, value] of Object.entries(h)) {
      if (field.startsWith('clo:')) offsets[Number(field.slice(4))] = Number(value);
    }
    const empty = Object.keys(h).length === 0;
    const sealed = h[MARKER] !== undefined && listed === 1;
    const identity = h.deployment && h.upstream ? { deployment: h.deployment, upstream: h.upstream } : null;
    return { txn: num(h.txn), offsets, cluster: h.kafka_cluster ?? null, empty, sealed, identity };
  }

  /** Names the deployment and upstream Redis's checkpoint belongs to (checked by the next restore). */
  async stampIdentity(identity: Identity): Promise<void> {
    await this.redis.hset(this.keys.checkpoint, 'deployment', identity.deployment, 'upstream', identity.upstream);
  }

  /** Records the Kafka cluster the changelog is written to (a Redis later pointed at another cluster is restored). */
  async setKafkaCluster(cluster: string): Promise<void> {
    await this.redis.hset(this.keys.checkpoint, 'kafka_cluster', cluster);
  }

  /** Publishes the progress of the running pass (the leader, every page or so; one SET). */
  async setPassProgress(progress: PassProgress): Promise<void> {
    await this.redis.set(this.keys.progress, JSON.stringify(progress));
  }

  /** The progress of the running (or last) long pass, or null when none was recorded. */
  async passProgress(): Promise<PassProgress | null> {
    const raw = await this.redis.get(this.keys.progress);
    const parsed = raw === null ? null : PassProgressSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : null;
  }
}

// The digests of a checkpoint's unreadable records, as checkpointPairs writes them (anything else: unknown).
function decodeUnreadable(text: string | undefined): string[] | null {
  if (text === undefined || !text.startsWith('v1:')) return null;
  return text.length === 3 ? [] : text.slice(3).split(',');
}

// The candidates of the remembered records, as checkpointPairs writes them (anything else: unknown).
function decodeCandidates(text: string | undefined): Record<string, number[]> | null {
  if (text === undefined || !text.startsWith('v1:')) return null;
  const candidates: Record<string, number[]> = {};
  for (const part of text.length === 3 ? [] : text.slice(3).split(';')) {
    const [digest, ids] = part.split('=');
    if (!digest || !/^[0-9a-f]{1,64}$/.test(digest) || ids === undefined) return null;
    const list = ids === '' ? [] : ids.split('.').map(Number);
    if (!list.every((id) => Number.isSafeInteger(id) && id > 0)) return null;
    candidates[digest] = list;
  }
  return candidates;
}

/** A checkpoint update as the field/value pairs of the commit script (an absent field is left as it is). */
export function checkpointPairs(u: CheckpointUpdate): string[] {
  const pairs: string[] = [];
  if (u.watermark !== undefined) pairs.push('watermark', String(u.watermark));
  // Written as it is by the commit script (the plain watermark only grows there).
  if (u.rewindWatermark !== undefined) pairs.push('watermark_rewind', String(u.rewindWatermark));
  if (u.initialDone !== undefined) pairs.push('initial_done', u.initialDone ? '1' : '');
  if (u.lastSweepAt !== undefined) pairs.push('last_sweep_at', String(u.lastSweepAt));
  if (u.lastIncrementalAt !== undefined) pairs.push('last_incremental_at', String(u.lastIncrementalAt));
  // An empty value deletes a field: the versioned form keeps an empty list apart from an unknown one (no field).
  if (u.unreadable !== undefined) pairs.push('unreadable', u.unreadable === null ? '' : `v1:${u.unreadable.join(',')}`);
  if (u.unreadableCandidates !== undefined) {
    const c = u.unreadableCandidates;
    const text =
      c === null
        ? ''
        : `v1:${Object.entries(c)
            .map(([d, ids]) => `${d}=${ids.join('.')}`)
            .join(';')}`;
    pairs.push('unreadable_candidates', text);
  }
  if (u.deferredSweeps !== undefined) pairs.push('deferred_sweeps', String(u.deferredSweeps));
  if (u.deferredReason !== undefined) pairs.push('deferred_reason', u.deferredReason ?? '');
  if (u.sweep !== undefined) {
    const s = u.sweep;
    pairs.push(
      'sweep_kind',
      s ? s.kind : '',
      'sweep_cursor',
      s?.cursor ?? '',
      'sweep_started_at',
      s ? String(s.startedAt) : '',
      'sweep_seen',
      s ? String(s.seen) : '',
    );
  }
  return pairs;
}
