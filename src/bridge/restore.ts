import type { Logger } from 'pino';
import {
  CHECKPOINT_RECORD_KEY,
  MARKER_RECORD_KEY,
  decodeChangelogRecord,
  type ChangelogCheckpoint,
} from '../core/changelog.js';
import type { SnapshotEntry } from '../core/snapshot-entry.js';
import { ConfigError } from '../core/errors.js';
import { foreignIdentity, type Identity } from '../core/identity.js';

// Redis is a cache of the Kafka changelog. Before a leader's first pass (and whenever Redis lost the account's
// keys, or an operator asks) it compares Redis with Kafka and restores what Redis lacks:
// - Redis holds no checkpoint, or one written against another Kafka cluster, or an operator forced it: a full
//   restore: every entry and the last checkpoint are read from the changelog's beginning;
// - otherwise only the changelog's tail since the offsets of Redis's last commit is read, and what was committed to
//   Kafka after it (a leader that died between its Kafka commit and its Redis commit) is applied, never derived
//   and published again.
// An account with no changelog yet (new, or a snapshot written before changelogs existed) keeps its Redis as is.
// A snapshot of the previous format (no markers) is sealed as it stands when its entries are as many as its entry
// count says, else restored in full. Either way Redis ends sealed: its checkpoint and bucket manifest carry markers, and the manifest lists every
// bucket, so a key lost later (evicted, deleted by hand) is detected by the read or commit that meets it, before any
// event is derived from it (src/redis/lua/commit.lua), and restored in full.
//
// Nothing is trusted for being there (docs/exactly-once.md, "What the contract rests on"):
// - Redis's checkpoint naming another deployment or upstream, or a changelog checkpoint of the account naming one,
//   stops the leadership with one line naming the settings (ConfigError): it is another installation's state;
// - records another deployment wrote are skipped;
// - records written before identities (an earlier version) are this deployment's only when Redis vouches for them
//   (it reflects a changelog transaction, and names no other deployment), a checkpoint of this deployment in the
//   topic adopted them before, or the operator says so (KAFKA_CHANGELOG_ADOPT_LEGACY);
// - a topic whose partitions end before the offsets Redis's last commit got (deleted and created again, or
//   truncated) is not the changelog Redis reflects; nor is one (in a topic other accounts keep writing, whose ends
//   pass Redis's offsets) with no record of the account at the offsets of Redis's last commit and no checkpoint of
//   the account at or after Redis's transaction (checked before anything is cleared: see verifySameTopic).

/** A changelog record of the account as the reader hands it over. */
export interface RestoreRecord {
  key: string;
  value: Buffer | null;
  txn: number;
  /** The deployment that wrote it (null or absent: before identities). */
  deployment?: string | null;
  /** Where it is in the topic (absent: unknown, e.g. a reader built by hand). */
  partition?: number;
  offset?: number;
}

/** What a restore reads and writes. */
export interface RestorePorts {
  /** Redis's view: its changelog transaction (null: none), offsets of its last commits, Kafka cluster, emptiness. */
  changelogState(): Promise<{
    txn: number | null;
    offsets: Record<number, number>;
    cluster: string | null;
    empty: boolean;
    /** The checkpoint and the bucket manifest carry their markers (else: the previous format, or keys lost). */
    sealed: boolean;
    /** The deployment and upstream Redis's checkpoint names (null: none, or written before identities). */
    identity?: Identity | null;
  }>;
  /** Names this deployment and upstream in Redis's checkpoint (once Redis is known to be theirs). */
  stampIdentity?(identity: Identity): Promise<void>;
  clearForRestore(): Promise<void>;
  /**
   * Entries to write; null: none (a deletion marker, with the sequence of its review.deleted). `verify`: a tail onto
   * the snapshot Redis holds; a bucket it lost fails the write (SnapshotLostError).
   */
  restoreEntries(
    epoch: number,
    entries: ReadonlyArray<readonly [id: number, entry: SnapshotEntry | null, deletedSequence?: number]>,
    verify?: boolean,
  ): Promise<void>;
  /** Seals the snapshot Redis holds as it stands (fenced by `epoch`): no changelog can restore it. */
  seal(epoch: number): Promise<void>;
  /** Seals an unsealed snapshot if its entries are as many as its count says; resolves whether it did. */
  sealIfComplete(epoch: number): Promise<boolean>;
  /**
   * Resolves false when the epoch is not above the changelog's epoch floor (a new lease is needed). `tail`: the
   * entries went onto the sealed snapshot, whose manifest must still be there.
   */
  restoreFinish(
    epoch: number,
    ckpt: ChangelogCheckpoint,
    offsets: Record<number, number>,
    cluster: string,
    tail?: boolean,
  ): Promise<boolean>;
  setKafkaCluster(cluster: string): Promise<void>;
  /** Reads the changelog from `from` to fresh end markers; resolves the markers' offsets. */
  readChangelog(
    from: Record<number, number>,
    onRecords: (records: RestoreRecord[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<Record<number, number>>;
  clusterId(): Promise<string>;
  /**
   * The default changelog topic of the versions before identities when it exists and this deployment now uses a
   * default of its own (null otherwise): Redis's history may have been written there.
   */
  formerChangelog?(): string | null;
}

/** The restore metrics. */
export interface RestoreMetrics {
  restoreFinished(kind: RestoreKind, entries: number, seconds: number): void;
}

/** A full restore (from the changelog's beginning) or a tail (from Redis's last commit). */
export type RestoreKind = 'full' | 'tail';

/** What a restore did: 'reacquire' when the leader must take a new lease (its epoch is not above history). */
export interface RestoreOutcome {
  kind: RestoreKind;
  /** Entries written to Redis (deletion markers included). */
  entries: number;
  /** The changelog transaction Redis reflects now. */
  txn: number;
  reacquire: boolean;
}

/** Brings Redis up to the Kafka changelog for a leader under `epoch`. */
export async function restoreFromChangelog(
  ports: RestorePorts,
  deps: {
    logger: Logger;
    metrics: RestoreMetrics;
    clock: () => number;
    signal?: AbortSignal;
    /** Reports entries written so far (for `status`); called at most every second, and once at the end. */
    progress?: (entries: number, startedAt: number, finished: boolean) => Promise<void>;
    /** Called for every batch of changelog records read (the loop's progress-based liveness). */
    alive?: () => void;
    /** Who this deployment is; absent (adapters built by hand): nothing is checked or stamped. */
    identity?: Identity;
    /** The changelog topic and the account, as refusals name them. */
    topic?: string;
    account?: string;
    /** Adopt records written before identities without Redis vouching (KAFKA_CHANGELOG_ADOPT_LEGACY). */
    adoptLegacy?: boolean;
  },
  epoch: number,
  force = false,
): Promise<RestoreOutcome> {
  const t0 = deps.clock();
  const [state, cluster] = await Promise.all([ports.changelogState(), ports.clusterId()]);
  const foreign = state.cluster !== null && state.cluster !== cluster;
  const mine = deps.identity;
  const refusals = new Refusals(deps.topic ?? 'the changelog topic', deps.account ?? 'the account');
  const former = checkRedisIdentity(state, cluster, ports, deps);
  if (mine && former && state.txn === null) {
    deps.logger.warn(
      { former, topic: deps.topic },
      'the former default changelog topic exists: this deployment starts its own; set KAFKA_TOPIC_CHANGELOG to the former one if this deployment wrote it',
    );
  }
  // An unsealed snapshot with a checkpoint (written by the previous version, or its manifest lost) cannot tell a lost
  // bucket from a new one: it is sealed as it stands if its entries are as many as its count says, else restored
  // in full.
  const sealed = state.sealed || (!force && !foreign && state.txn !== null && (await ports.sealIfComplete(epoch)));
  const kind: RestoreKind = force || state.txn === null || foreign || !sealed ? 'full' : 'tail';
  const after = kind === 'full' ? 0 : (state.txn ?? 0);
  let cleared = kind === 'tail';
  let latest: ChangelogCheckpoint | null = null;
  let entries = 0;
  let reportedAt = t0;
  // Records written before identities, and whether something vouches that they are this deployment's.
  let legacy = 0;
  let skipped = 0;
  let adopted = deps.adoptLegacy === true || (state.txn !== null && !foreign);
  // Redis's last commit: the topic must still hold what it wrote (a full restore checks before clearing anything).
  const same =
    mine && !foreign && state.txn !== null && state.txn > 0 ? new SameTopic(state.txn, state.offsets, mine) : null;
  if (same && kind === 'full') await verifySameTopic(same, ports, refusals, true, deps.signal);
  const onRecords = async (records: RestoreRecord[]): Promise<void> => {
    deps.alive?.();
    const batch: Array<readonly [number, SnapshotEntry | null, number?]> = [];
    for (const record of records) {
      const deployment = record.deployment ?? null;
      same?.see(record);
      if (mine && deployment !== null && deployment !== mine.deployment) {
        // Another deployment's record under this account's keys: its checkpoint stops the start (below).
        if (record.key === CHECKPOINT_RECORD_KEY) {
          const decoded = decodeChangelogRecord(record.key, record.value);
          if (decoded?.kind === 'checkpoint') refusals.checkChangelog(decoded.identity, mine);
        }
        skipped += 1;
        continue;
      }
      if (record.txn <= after) continue;
      const decoded = decodeChangelogRecord(record.key, record.value);
      if (!decoded) continue;
      if (mine && decoded.kind === 'checkpoint') {
        refusals.checkChangelog(decoded.identity, mine);
        if (decoded.identity) adopted = true;
      }
      if (mine && deployment === null) legacy += 1;
      // A full restore clears Redis only once the changelog proves it has something of this account.
      if (!cleared) {
        await ports.clearForRestore();
        cleared = true;
      }
      if (decoded.kind === 'checkpoint') {
        if (!latest || decoded.checkpoint.txn > latest.txn) latest = decoded.checkpoint;
      } else {
        // A deletion marker keeps the entry the review had: its review.deleted came next.
        batch.push(decoded.deleted ? [decoded.id, null, decoded.entry.sequence + 1] : [decoded.id, decoded.entry]);
      }
    }
    entries += batch.length;
    await ports.restoreEntries(epoch, batch, kind === 'tail');
    if (batch.length > 0 && deps.progress && deps.clock() - reportedAt >= 1_000) {
      reportedAt = deps.clock();
      await deps.progress(entries, t0, false);
    }
  };
  const from = kind === 'full' ? {} : state.offsets;
  const ends = await ports.readChangelog(from, onRecords, deps.signal);
  if (mine && !foreign) refusals.checkOffsets(state.offsets, ends);
  if (same && kind === 'tail') await verifySameTopic(same, ports, refusals, false, deps.signal);
  if (legacy > 0 && !adopted) refusals.legacy(legacy);
  if (skipped > 0) deps.logger.warn({ skipped }, "skipped other deployments' records in the changelog");
  if (mine && legacy > 0)
    deps.logger.warn({ legacy }, 'adopted changelog records written before deployment identities');
  const restored = latest as ChangelogCheckpoint | null;
  if (mine) await ports.stampIdentity?.(mine);
  if (!restored) {
    if (state.cluster !== cluster) await ports.setKafkaCluster(cluster);
    if (kind === 'full' && !state.empty && state.txn === null) {
      deps.logger.info('the changelog has nothing of this account yet; Redis is kept as it is');
    }
    if (force && state.sealed && !state.empty) {
      // Keys were lost and nothing can bring them back: the snapshot is sealed as it stands, or no pass would run.
      deps.logger.error(
        { redisTxn: state.txn },
        'the changelog has nothing of this account: the snapshot is kept as it stands, lost keys included',
      );
    }
    if (!sealed || force) await ports.seal(epoch);
    return { kind, entries, txn: state.txn ?? 0, reacquire: false };
  }
  const ok = await ports.restoreFinish(epoch, restored, ends, cluster, kind === 'tail');
  await deps.progress?.(entries, t0, true);
  const seconds = (deps.clock() - t0) / 1000;
  deps.metrics.restoreFinished(kind, entries, seconds);
  deps.logger.warn(
    { kind, entries, txn: restored.txn, redisTxn: state.txn, foreign, forced: force, seconds },
    kind === 'full' ? 'restored the snapshot from the Kafka changelog' : 'applied Kafka commits Redis had missed',
  );
  return { kind, entries, txn: restored.txn, reacquire: !ok };
}

/**
 * The refusals Redis's own records decide (its checkpoint names another deployment or upstream; it reflects the
 * former default changelog topic): read only, so that a leadership checks them before it acts on Kafka, and every
 * restore again. Resolves the former default changelog topic when it exists (see RestorePorts.formerChangelog).
 */
export function checkRedisIdentity(
  state: Awaited<ReturnType<RestorePorts['changelogState']>>,
  cluster: string,
  ports: Pick<RestorePorts, 'formerChangelog'>,
  deps: { identity?: Identity; topic?: string; account?: string },
): string | null {
  const mine = deps.identity;
  const refusals = new Refusals(deps.topic ?? 'the changelog topic', deps.account ?? 'the account');
  if (mine && state.identity) refusals.checkRedis(state.identity, mine);
  const former = ports.formerChangelog?.() ?? null;
  const foreign = state.cluster !== null && state.cluster !== cluster;
  // Redis reflects a changelog written by a version before identities, whose default topic was one for every
  // deployment and exists: that is where this deployment's history is, unless the operator says otherwise.
  if (mine && former && state.txn !== null && !state.identity && !foreign) refusals.former(former);
  return former;
}

/**
 * What says the topic is the one Redis's last commit (transaction `txn`, at `offsets`) went to: a record of the
 * account exactly at one of those offsets, written by that transaction or an end marker of an earlier read (a read
 * only sees markers written before it, and never at offsets before the topic's end). Failing that (compaction
 * removed it, or Redis's offsets are older), a checkpoint of the account at or after `txn` anywhere in the topic.
 */
class SameTopic {
  vouched = false;
  newest: number | null = null;

  constructor(
    readonly txn: number,
    readonly offsets: Record<number, number>,
    private readonly mine: Identity,
  ) {}

  /** Notes a record of the reads (another deployment's records vouch for nothing). */
  see(record: RestoreRecord): void {
    const deployment = record.deployment ?? null;
    if (deployment !== null && deployment !== this.mine.deployment) return;
    if (record.key === CHECKPOINT_RECORD_KEY && record.value !== null) {
      const decoded = decodeChangelogRecord(record.key, record.value);
      if (decoded?.kind === 'checkpoint') this.newest = Math.max(this.newest ?? 0, decoded.checkpoint.txn);
    }
    if (record.partition === undefined || record.offset === undefined) return;
    if (this.offsets[record.partition] !== record.offset) return;
    if (record.txn === this.txn || (record.key === MARKER_RECORD_KEY && record.txn === 0)) this.vouched = true;
  }

  /** Whether a checkpoint at or after Redis's transaction was seen. */
  get reached(): boolean {
    return this.vouched || (this.newest !== null && this.newest >= this.txn);
  }
}

/**
 * Refuses, before a restore clears or writes anything, a topic that holds nothing of Redis's last commit: read only
 * (but for the reads' end markers), first from Redis's offsets, then, with nothing found there, the whole topic for
 * the account's newest checkpoint.
 */
async function verifySameTopic(
  same: SameTopic,
  ports: RestorePorts,
  refusals: Refusals,
  /** Read from Redis's offsets first (false: the tail read just did). */
  atOffsets: boolean,
  signal?: AbortSignal,
): Promise<void> {
  const look = (records: RestoreRecord[]): Promise<void> => {
    for (const record of records) same.see(record);
    return Promise.resolve();
  };
  if (atOffsets && !same.reached && Object.keys(same.offsets).length > 0)
    await ports.readChangelog(same.offsets, look, signal);
  if (!same.reached) await ports.readChangelog({}, look, signal);
  if (!same.reached) refusals.recreated(same.txn, same.newest);
}

/** The refusals of a restore: each a ConfigError whose one line names what was found and the settings to change. */
class Refusals {
  constructor(
    private readonly topic: string,
    private readonly account: string,
  ) {}

  /** Redis's checkpoint was written by another deployment or upstream. */
  checkRedis(found: Identity, mine: Identity): void {
    const which = foreignIdentity(found, mine);
    if (!which) return;
    throw new ConfigError(
      which === 'deployment' ? 'BRIDGE_DEPLOYMENT_ID' : 'UPSTREAM_BASE_URL',
      `Redis holds the checkpoint of account ${this.account} written by ${describe(found, which)}, not by this ${describe(mine, which)}: ` +
        `give this deployment its own REDIS_KEY_PREFIX, set ${hint(found, which)}, or reset the paused account (reviews-bridge reset, or POST .../reset) to start over`,
    );
  }

  /** A changelog checkpoint of the account was written by another deployment or upstream. */
  checkChangelog(found: Identity | null, mine: Identity): void {
    const which = found ? foreignIdentity(found, mine) : null;
    if (!found || !which) return;
    throw new ConfigError(
      'KAFKA_TOPIC_CHANGELOG',
      `changelog topic ${this.topic} holds a checkpoint under the keys of account ${this.account} written by ${describe(found, which)}, not by this ${describe(mine, which)}: ` +
        `give this deployment its own KAFKA_TOPIC_CHANGELOG (or leave it unset), or set ${hint(found, which)}`,
    );
  }

  /** The topic ends before the offsets Redis's last commit got: it is not the changelog Redis reflects. */
  checkOffsets(redis: Record<number, number>, ends: Record<number, number>): void {
    for (const [partition, offset] of Object.entries(redis)) {
      const end = ends[Number(partition)];
      if (end !== undefined && end >= offset) continue;
      throw new ConfigError(
        'KAFKA_TOPIC_CHANGELOG',
        `changelog topic ${this.topic} ends before the records Redis's last commit of account ${this.account} wrote (partition ${partition}: ${end ?? 'missing'} < ${offset}): ` +
          'it was deleted and created again, or lost records; point KAFKA_TOPIC_CHANGELOG at the topic this deployment wrote, or reset the paused account (reviews-bridge reset, or POST .../reset) to start over (a new initial load)',
      );
    }
  }

  /** The topic holds nothing of Redis's last commit (transaction `txn`) and no later checkpoint of the account. */
  recreated(txn: number, newest: number | null): never {
    throw new ConfigError(
      'KAFKA_TOPIC_CHANGELOG',
      `changelog topic ${this.topic} holds nothing of the last commit Redis reflects for account ${this.account} (transaction ${txn}; the topic's newest checkpoint of the account: ${newest ?? 'none'}): ` +
        'it was deleted and created again, or lost records, and a restore from it would rebuild part of the snapshot; point KAFKA_TOPIC_CHANGELOG at the topic this deployment wrote, or reset the paused account (reviews-bridge reset, or POST .../reset) to start over (a new initial load)',
    );
  }

  /** Redis's history was written to the former default changelog topic, not to this deployment's own. */
  former(topic: string): never {
    throw new ConfigError(
      'KAFKA_TOPIC_CHANGELOG',
      `Redis holds account ${this.account}'s checkpoint written by a version before deployment identities, whose default changelog topic ${topic} exists: ` +
        `set KAFKA_TOPIC_CHANGELOG=${topic} to keep using it (an upgrade), or reset the paused account (reviews-bridge reset, or POST .../reset) to start ${this.topic} over (a new initial load)`,
    );
  }

  /** Records written before identities, with nothing to say they are this deployment's. */
  legacy(count: number): never {
    throw new ConfigError(
      'KAFKA_TOPIC_CHANGELOG',
      `changelog topic ${this.topic} holds ${count} record(s) of account ${this.account} written before deployment identities, and nothing says they are this deployment's ` +
        "(Redis holds no checkpoint of them): give this deployment its own KAFKA_TOPIC_CHANGELOG, or set KAFKA_CHANGELOG_ADOPT_LEGACY=true if they are this deployment's",
    );
  }
}

function describe(identity: Identity, which: 'deployment' | 'upstream'): string {
  return which === 'deployment' ? `deployment ${identity.deployment}` : `upstream ${identity.upstream}`;
}

function hint(found: Identity, which: 'deployment' | 'upstream'): string {
  return which === 'deployment'
    ? `BRIDGE_DEPLOYMENT_ID=${found.deployment} if this is that deployment`
    : 'UPSTREAM_BASE_URL and UPSTREAM_CLIENT_ID back to the upstream it mirrored';
}
