import { createHash } from 'node:crypto';
import type { Message } from 'kafkajs';
import { CommitOutcomeUnknownError, ConfigError, FencedError } from '../../src/core/errors.js';
import { changelogPolicyFits } from '../../src/kafka/topic-admin.js';
import { CHANGELOG_TXN_HEADER } from '../../src/core/changelog.js';
import { DEPLOYMENT_HEADER } from '../../src/core/identity.js';
import type { FingerprintKeyCopy } from '../../src/core/fingerprint-key.js';
import type { ReviewDeletedEvent, ReviewEvent, ReviewHeartbeatEvent, ReviewState } from '../../src/core/events.js';
import type { PassesSink } from '../../src/bridge/passes/index.js';
import type { ChangelogBatch, ChangelogOffsets, DeadLetter } from '../../src/kafka/publisher.js';
import { MARKER_KEY, type Outgoing, type RecordEncoder } from '../../src/kafka/encoding.js';
import type { RestoreRecord } from '../../src/bridge/restore.js';
import type { Actor, World } from './world.js';

// The simulated Kafka: topics of one partition each, transactional ids with producer epochs (a new producer of an
// id fences the older ones and aborts their open transaction), transactions that commit or abort as a whole,
// read_committed visibility (a reader sees committed records only, and a changelog read waits for the transactions
// before its end marker to complete), a transaction timeout (the coordinator aborts a transaction open too long and
// bumps the producer's epoch, fencing it), compaction of the changelog (tombstones purged once older than
// delete.retention.ms). Faults: sends refused (whole, or after some of their records were appended), a commit whose
// answer is lost (it may or may not have committed), compaction at any time.
// A replica's leadership talks to it through SimSink, the PassesSink the real KafkaPublisher implements, with the
// real RecordEncoder choosing the records (so the topics hold what production writes).

/** How long a producer waits for a commit's answer that was lost (kafkajs' request timeout is 30 s). */
const LOST_ANSWER_TIMEOUT_MS = 5_000;
/** delete.retention.ms of a compacted topic (Kafka's default, one day): how long compaction keeps a tombstone. */
export const DELETE_RETENTION_MS = 86_400_000;

/** One record of a topic. */
export interface SimRecord {
  topic: string;
  offset: number;
  /** Position among all records of the cluster (the order a consumer of several topics reads them in). */
  seq: number;
  key: string | null;
  value: string | Buffer | null;
  headers: Record<string, string>;
  /** The transaction that wrote it; its state decides visibility. */
  txn: SimTxn;
  /** When it was appended (virtual ms): compaction purges tombstones older than delete.retention.ms. */
  at: number;
}

/** One transaction of a producer. */
export interface SimTxn {
  id: string;
  epoch: number;
  state: 'open' | 'committed' | 'aborted';
  openedAt: number;
  /** When it committed or aborted (virtual ms; the checker's progress bound reads it). */
  endedAt?: number;
}

/** The cluster: topics, transactional ids, and the faults armed on it. */
export class SimKafka {
  readonly topics = new Map<string, SimRecord[]>();
  private readonly ends = new Map<string, number>();
  private seq = 0;
  private readonly producers = new Map<string, { epoch: number; open: SimTxn | null }>();
  /** Topics' cleanup.policy as DescribeConfigs answers it (absent: compact, as the bridge creates its changelog). */
  readonly cleanupPolicy = new Map<string, string>();
  /** Sends fail while set (a broker refusing, a request timing out). */
  refuseSends: string | null = null;
  /** With refuseSends: a send fails after its first records were appended (to the transaction, which aborts). */
  partialSends = false;
  /** Transactions aborted by the coordinator's timeout (their producer fenced). */
  timedOut = 0;
  /**
   * The next transaction's commit request reaches the coordinator this late (ms; 0: at once): a slow broker while
   * the leader's lease keeper goes on renewing, so that the transaction timeout, not a takeover, aborts it.
   */
  delayNextCommitMs = 0;
  /**
   * Told when a delayed commit request is sent (`delayNextCommitMs` then): the disturbance runs from then, not from
   * the fault's moment (a commit held by an earlier delay may send the delayed one long after).
   */
  onDelayedCommit: ((delayMs: number) => void) | null = null;
  /**
   * Commits lose their answer while set (and the next one does when `once`): `landed` says whether such a commit
   * still lands or not.
   */
  loseCommits: { landed: boolean; once: boolean; sweepOnly: boolean } | null = null;

  constructor(
    private readonly clock: () => number,
    private readonly transactionTimeoutMs: number,
  ) {}

  private log(topic: string): SimRecord[] {
    let log = this.topics.get(topic);
    if (!log) this.topics.set(topic, (log = []));
    return log;
  }

  /** A digest of every record of every topic, byte for byte, with its transaction's outcome (the replay test). */
  digest(): string {
    const h = createHash('sha256');
    for (const topic of [...this.topics.keys()].sort()) {
      for (const r of this.topics.get(topic)!) {
        h.update(JSON.stringify([topic, r.offset, r.key, r.headers, r.txn.id, r.txn.epoch, r.txn.state]));
        h.update(r.value === null ? '\u0000null' : r.value);
      }
    }
    return h.digest('hex');
  }

  /**
   * Aborts transactions open past the transaction timeout (the coordinator's timer) and bumps their producer's
   * epoch, as Kafka's coordinator does to fence the zombie: the producer's next request is refused as fenced.
   */
  expire(): number {
    let aborted = 0;
    for (const p of this.producers.values()) {
      if (p.open && this.clock() - p.open.openedAt > this.transactionTimeoutMs) {
        p.open.state = 'aborted';
        p.open = null;
        p.epoch += 1;
        aborted += 1;
      }
    }
    this.timedOut += aborted;
    return aborted;
  }

  /** InitProducerId: a new epoch for the id, fencing the older producers and aborting their open transaction. */
  initProducer(id: string): number {
    const p = this.producers.get(id) ?? { epoch: 0, open: null };
    if (p.open) p.open.state = 'aborted';
    const next = { epoch: p.epoch + 1, open: null };
    this.producers.set(id, next);
    return next.epoch;
  }

  /** Whether `epoch` is still the id's current one. */
  current(id: string, epoch: number): boolean {
    return this.producers.get(id)?.epoch === epoch;
  }

  /** Appends records to the open transaction of the producer (opening one); resolves the transaction. */
  send(id: string, epoch: number, outgoing: readonly Outgoing[]): SimTxn {
    const p = this.producers.get(id)!;
    const txn = (p.open ??= { id, epoch, state: 'open', openedAt: this.clock() });
    for (const o of outgoing) this.append(o.topic, o.message, txn);
    return txn;
  }

  /** Appends a record outside any transaction (an idempotent producer's send: at once visible to every reader). */
  appendOutside(topic: string, key: string, value: string): void {
    const at = this.clock();
    this.append(topic, { key, value }, { id: '', epoch: 0, state: 'committed', openedAt: at, endedAt: at });
  }

  /** The value of the last record of `key` in `topic`, committed or not (a read_uncommitted reader's view). */
  lastValue(topic: string, key: string): string | null {
    const log = this.topics.get(topic) ?? [];
    for (let i = log.length - 1; i >= 0; i--) {
      const r = log[i]!;
      if (r.key === key && r.txn.state !== 'aborted') return r.value === null ? null : String(r.value);
    }
    return null;
  }

  /** Commits or aborts the producer's open transaction. */
  end(id: string, commit: boolean): void {
    const p = this.producers.get(id)!;
    if (p.open) Object.assign(p.open, { state: commit ? 'committed' : 'aborted', endedAt: this.clock() });
    p.open = null;
  }

  private append(topic: string, m: Message, txn: SimTxn): SimRecord {
    const log = this.log(topic);
    const offset = this.ends.get(topic) ?? 0;
    this.ends.set(topic, offset + 1);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(m.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    const key = m.key === null || m.key === undefined ? null : String(m.key);
    const record = { topic, offset, seq: this.seq++, key, value: m.value ?? null, headers, txn, at: this.clock() };
    log.push(record);
    return record;
  }

  /** What a read_committed reader of `topic` sees, in offset order (up to the first open transaction). */
  committed(topic: string): SimRecord[] {
    const out: SimRecord[] = [];
    for (const r of this.topics.get(topic) ?? []) {
      if (r.txn.state === 'open') break;
      if (r.txn.state === 'committed') out.push(r);
    }
    return out;
  }

  /** Whether a record of an open transaction sits below `offset` (a read_committed reader waits for it). */
  blockedBelow(topic: string, offset: number): boolean {
    this.expire();
    return (this.topics.get(topic) ?? []).some((r) => r.offset < offset && r.txn.state === 'open');
  }

  /**
   * Compaction of a compacted topic: aborted records go, of a key's committed records only the last stays, and a
   * tombstone (a null value) that is the last of its key goes too once older than `deleteRetentionMs` (the topic's
   * delete.retention.ms: a reader that was behind by more misses the deletion).
   */
  compact(topic: string, deleteRetentionMs = DELETE_RETENTION_MS): number {
    const log = this.topics.get(topic) ?? [];
    const lastOpenAt = log.findIndex((r) => r.txn.state === 'open');
    const upTo = lastOpenAt < 0 ? log.length : lastOpenAt;
    const last = new Map<string, number>();
    log.slice(0, upTo).forEach((r, i) => {
      if (r.txn.state === 'committed' && r.key !== null) last.set(r.key, i);
    });
    const purgeBefore = this.clock() - deleteRetentionMs;
    const kept = log.filter(
      (r, i) =>
        i >= upTo ||
        (r.txn.state === 'committed' &&
          (r.key === null || (last.get(r.key) === i && (r.value !== null || r.at >= purgeBefore)))),
    );
    this.topics.set(topic, kept);
    return log.length - kept.length;
  }
}

/** The Kafka side of one replica's leadership: a transactional producer of the account's id, and changelog reads. */
export class SimSink implements PassesSink {
  readonly maxMessageBytes = 1_000_000;
  /** The producer epoch of this leadership's session (null: none yet, or dropped after a failure). */
  private session: number | null = null;
  private fenced = false;
  private turn: Promise<unknown> = Promise.resolve();
  private nonce = 0;

  constructor(
    private readonly world: World,
    private readonly actor: Actor,
    private readonly kafka: SimKafka,
    private readonly encoder: RecordEncoder,
    private readonly options: {
      transactionalId: string;
      changelogTopic: string;
      keyPrefix: string;
      /**
       * Whether this replica's InitProducerId reaches the broker now; false: it times out. Without the
       * kafka-only-fence class, a replica that no longer holds the lease in Redis never takes the transactional id
       * from the one that does (which would leave that one fenced at the broker alone: issue 36 item 5).
       */
      mayInit: () => boolean;
    },
  ) {}

  async beginTransactions(): Promise<void> {
    this.fenced = false;
    this.session = await this.world.step(this.actor, 'kafka init', () => {
      if (!this.options.mayInit()) throw new Error('InitProducerId timed out');
      return this.kafka.initProducer(this.options.transactionalId);
    });
  }

  publish(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    states: readonly ReviewState[] = [],
    changelog?: ChangelogBatch,
  ): Promise<ChangelogOffsets> {
    return this.commit(this.encoder.commitRecords(events, deadLetters, states, changelog, this.maxMessageBytes));
  }

  publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets> {
    if (events.length === 0) return Promise.resolve({});
    return this.commit(this.encoder.deletionRecords(events, changelog));
  }

  async publishHeartbeat(_event: ReviewHeartbeatEvent): Promise<void> {
    await this.world.step(this.actor, 'kafka heartbeat', () => undefined);
  }

  /** The simulated cluster never held a changelog of the versions before identities. */
  formerChangelog(): string | null {
    return null;
  }

  async clusterId(): Promise<string> {
    return this.world.step(this.actor, 'kafka cluster id', () => 'sim-cluster');
  }

  /** One transaction at a time, as the real Transactions runs them. */
  private commit(outgoing: Outgoing[]): Promise<ChangelogOffsets> {
    if (outgoing.length === 0) return Promise.resolve({});
    const mine = this.turn.then(() => this.transaction(outgoing));
    this.turn = mine.catch(() => undefined);
    return mine;
  }

  private async transaction(outgoing: Outgoing[]): Promise<ChangelogOffsets> {
    const id = this.options.transactionalId;
    if (this.fenced) throw new FencedError('the Kafka transactional id was taken by another leader');
    if (this.session === null) await this.beginTransactions();
    const epoch = this.session!;
    const changelogAt = await this.world.step(this.actor, 'kafka send', () => {
      this.expire();
      if (!this.kafka.current(id, epoch)) return 'fenced' as const;
      if (this.kafka.refuseSends !== null) {
        // Some records may have reached their partitions before one failed: they go with the transaction, aborted;
        // the producer is dropped (a new session next time), as Transactions does.
        if (this.kafka.partialSends) this.kafka.send(id, epoch, outgoing.slice(0, Math.ceil(outgoing.length / 2)));
        this.kafka.end(id, false);
        return 'refused' as const;
      }
      const txn = this.kafka.send(id, epoch, outgoing);
      const log = this.kafka.topics.get(this.options.changelogTopic) ?? [];
      const first = log.find((r) => r.txn === txn);
      return (first ? { 0: first.offset } : {}) as ChangelogOffsets;
    });
    if (changelogAt === 'fenced') return this.fence();
    if (changelogAt === 'refused') {
      this.session = null;
      throw new Error(`Kafka refused the send: ${this.kafka.refuseSends ?? 'refused'}`);
    }
    const delay = this.kafka.delayNextCommitMs;
    if (delay > 0) {
      this.kafka.delayNextCommitMs = 0;
      this.world.note(`${this.actor.name}: a commit request reaches the coordinator ${delay} ms late`);
      this.kafka.onDelayedCommit?.(delay);
      await this.world.sleeper(this.actor)(delay);
    }
    const outcome = await this.world.step(this.actor, 'kafka commit', () => {
      this.expire();
      if (!this.kafka.current(id, epoch)) return 'fenced' as const;
      const lose = this.kafka.loseCommits;
      if (lose === null || (lose.sweepOnly && !sweepsCommit(outgoing, this.options.changelogTopic, this.kafka))) {
        this.kafka.end(id, true);
        if (process.env.SIM_LOG) this.world.note(`${this.actor.name} committed ${describeRecords(outgoing)}`);
        return 'committed' as const;
      }
      if (lose.once) this.kafka.loseCommits = null;
      const lost = lose.landed;
      // The answer is lost: the commit landed, or it stays open until the next session (or the timeout) aborts it.
      if (lost) this.kafka.end(id, true);
      this.world.note(
        `${this.actor.name}: a Kafka commit's answer was lost (${lost ? 'it landed' : 'it did not land'})` +
          (process.env.SIM_LOG ? `: ${describeRecords(outgoing)}` : ''),
      );
      return 'lost' as const;
    });
    if (outcome === 'fenced') return this.fence();
    if (outcome === 'lost') {
      // A lost answer is waited for until the request times out (the real client's request timeout, seconds).
      await this.world.sleeper(this.actor)(LOST_ANSWER_TIMEOUT_MS);
      this.session = null;
      throw new CommitOutcomeUnknownError('a Kafka transaction was asked to commit, and its outcome is unknown');
    }
    return changelogAt;
  }

  /** The coordinator's timeout check, noted in the trace when it aborts a transaction. */
  private expire(): void {
    const aborted = this.kafka.expire();
    if (aborted > 0) this.world.note(`${aborted} transaction(s) past the transaction timeout aborted, epoch bumped`);
  }

  private fence(): never {
    this.fenced = true;
    throw new FencedError('the Kafka transactional id was taken by another leader');
  }

  /**
   * As the real reader (src/kafka/changelog-reader.ts): writes an end marker through this producer, waits until
   * every transaction before it completed, and hands over the account's records between `from` and the marker.
   */
  async readChangelog(
    from: Record<number, number>,
    onRecords: (records: RestoreRecord[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<Record<number, number>> {
    const topic = this.options.changelogTopic;
    // Before every restore, as TopicAdmin.verifyChangelog: a changelog that is not compacted is not trusted.
    const policy = await this.world.step(
      this.actor,
      'kafka describe configs',
      () => this.kafka.cleanupPolicy.get(topic) ?? 'compact',
    );
    if (!changelogPolicyFits(policy)) {
      throw new ConfigError('KAFKA_TOPIC_CHANGELOG', `changelog topic ${topic} has cleanup.policy=${policy}`);
    }
    const nonce = `${this.actor.name}-${++this.nonce}`;
    const ends = await this.commit(this.encoder.markerRecords([0], nonce));
    const end = ends[0]!;
    const start = from[0] ?? 0;
    const sleep = this.world.sleeper(this.actor);
    for (let waited = 0; ; waited += 200) {
      const blocked = await this.world.step(this.actor, 'kafka fetch', () => this.kafka.blockedBelow(topic, end));
      if (!blocked) break;
      if (waited > 600_000) throw new Error('changelog read did not reach its end markers');
      await sleep(200, signal);
    }
    const records = await this.world.step(this.actor, 'kafka fetch', () =>
      this.kafka
        .committed(topic)
        .filter(
          (r) => r.offset >= start && r.offset < end && r.key !== null && r.key.startsWith(this.options.keyPrefix),
        )
        .map((r) => ({
          key: r.key!.slice(this.options.keyPrefix.length),
          value: r.value === null ? null : Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value),
          txn: Number(r.headers[CHANGELOG_TXN_HEADER] ?? '0'),
          deployment: r.headers[DEPLOYMENT_HEADER] ?? null,
        }))
        .filter((r) => r.key !== MARKER_KEY),
    );
    for (let i = 0; i < records.length; i += 50) {
      signal?.throwIfAborted();
      await onRecords(records.slice(i, i + 50));
    }
    return { 0: end };
  }
}

/**
 * The copy of a generated fingerprint key in the changelog topic, as src/kafka/fingerprint-key-copy.ts keeps it: a
 * record written outside transactions (refused while sends are), read as a read_uncommitted reader sees it.
 */
export class SimKeyCopy implements FingerprintKeyCopy {
  constructor(
    private readonly world: World,
    private readonly actor: Actor,
    private readonly kafka: SimKafka,
    private readonly topic: string,
    private readonly record: string,
    readonly name: string,
  ) {}

  read(): Promise<string | null> {
    return this.world.step(this.actor, 'kafka fetch key copy', () => this.kafka.lastValue(this.topic, this.record));
  }

  write(secret: string): Promise<void> {
    return this.world.step(this.actor, 'kafka send key copy', () => {
      if (this.kafka.refuseSends !== null) throw new Error(`Kafka refused the send: ${this.kafka.refuseSends}`);
      this.kafka.appendOutside(this.topic, this.record, secret);
    });
  }
}

// The events and changelog transaction of a commit, briefly (SIM_LOG traces).
function describeRecords(outgoing: readonly Outgoing[]): string {
  const parts: string[] = [];
  for (const o of outgoing) {
    const value = o.message.value;
    if (o.message.headers?.[CHANGELOG_TXN_HEADER] !== undefined && o.message.key === 'checkpoint') {
      parts.push(`txn ${String(o.message.headers[CHANGELOG_TXN_HEADER])}`);
    } else if (typeof value === 'string' && value.startsWith('{"specversion"')) {
      const e = JSON.parse(value) as { type: string; subject: string; sequence: number };
      parts.push(`${e.type.slice(7)}:${e.subject}#${e.sequence}`);
    }
  }
  return parts.join(' ');
}

// Whether a commit is a sweep's or an initial load's page: it moves the checkpoint's sweep cursor (a poll's commit
// during a sweep carries the cursor as the changelog last had it: its answer is not lost with the sweep's).
function sweepsCommit(outgoing: readonly Outgoing[], changelogTopic: string, kafka: SimKafka): boolean {
  for (const o of outgoing) {
    const key = String(o.message.key);
    if (o.topic !== changelogTopic || !key.endsWith('checkpoint')) continue;
    const sweep = (JSON.parse(String(o.message.value)) as { sweep: unknown }).sweep;
    const last = kafka.committed(changelogTopic).findLast((r) => r.key === key && r.value !== null);
    const before = last ? (JSON.parse(String(last.value)) as { sweep: unknown }).sweep : null;
    return JSON.stringify(sweep) !== JSON.stringify(before);
  }
  return false;
}
