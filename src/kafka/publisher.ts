import {
  Kafka,
  logLevel,
  Partitioners,
  type Admin,
  type ConfigResourceTypes,
  type KafkaConfig,
  type LogEntry,
  type Producer,
  type Message,
  type RecordMetadata,
  type TopicMessages,
} from 'kafkajs';
import { CHANGELOG_TXN_HEADER, checkpointRecord, entryRecord, type ChangelogCheckpoint } from '../core/changelog.js';
import { FencedError } from '../core/errors.js';
import { randomUUID } from 'node:crypto';
import { readChangelog, type ChangelogRawRecord } from './changelog-reader.js';
import type { SnapshotEntry } from '../core/snapshot-entry.js';
import type { Logger } from 'pino';
import type { BridgeConfig, PrivacyConfig } from '../config/config.js';
import {
  STATE_RECORD_HEADER,
  stateOf,
  type EventType,
  type ReviewDeletedEvent,
  type ReviewEvent,
  type ReviewHeartbeatEvent,
  type ReviewState,
} from '../core/events.js';
import {
  deadLetterMessage,
  eventMessage,
  messageBytes,
  type DeadLetterInput,
  type OutgoingMessage,
} from '../core/event-size.js';
import { deadLetterRecord, protectEvent, type FieldPolicy } from '../core/field-policy.js';
import { kafkaSecurity } from './security.js';
import { DEFAULT_PRIVACY, fieldPolicyFromConfig } from '../config/privacy.js';

// The Kafka adapter. One idempotent producer (no duplicates from its own retries), acks from all in-sync
// replicas, the review id as key so that a review's events stay in one partition in order.

// The Kafka protocol's resource type of a topic. kafkajs is CommonJS and Node's ESM loader cannot see its
// ConfigResourceTypes export by name (vitest's transform hides this), so the enum is used as a type only.
const TOPIC_RESOURCE = 2 as ConfigResourceTypes.TOPIC;

/** Kafka's own default message size limit (message.max.bytes), used when the configuration names none. */
const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** A record that failed validation, on its way to the dead-letter topic. */
export type DeadLetter = DeadLetterInput;

/** The changelog records of one commit: the entries it writes (or marks deleted) and the checkpoint after it. */
export interface ChangelogBatch {
  entries: ReadonlyArray<readonly [number, SnapshotEntry]>;
  /** Entries of reviews found deleted: written as deletion markers that keep the last sequence. */
  deleted?: ReadonlyArray<readonly [number, SnapshotEntry]>;
  /** The whole checkpoint after this commit, numbered by `txn`. */
  checkpoint: ChangelogCheckpoint;
}

/** Where a commit's changelog records landed: the first offset per changelog partition (a restore starts there). */
export type ChangelogOffsets = Record<number, number>;

/** Sends the bridge's events and dead letters to Kafka. */
export interface EventSink {
  /**
   * Publishes the events, one state-topic row per review they touch (the last event of a review wins; `states`
   * are rows of unchanged reviews a resync refreshed) and the dead letters in one send, and resolves once every
   * record is acknowledged by all in-sync replicas.
   */
  publish(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    states?: readonly ReviewState[],
    changelog?: ChangelogBatch,
  ): Promise<ChangelogOffsets>;
  /** The largest record the topics accept (bytes): events are fitted to it before they are published. */
  readonly maxMessageBytes?: number;
}

/** Kafka records of the state topic: one row per review, from its last event in the batch or a refreshed row. */
export function stateMessages(events: readonly ReviewEvent[], states: readonly ReviewState[] = []): OutgoingMessage[] {
  const last = new Map<number, ReviewState>();
  for (const state of states) last.set(state.review_id, state);
  for (const event of events) last.set(event.data.review.id, stateOf(event));
  return [...last.values()].map((state) => ({
    key: String(state.review_id),
    value: JSON.stringify(state),
    headers: { 'content-type': 'application/json', [STATE_RECORD_HEADER]: 'review.state' },
  }));
}

function kafkaLogger(logger: Logger) {
  return () =>
    ({ level, log }: LogEntry) => {
      const { message, ...extra } = log;
      // Retries are bounded on purpose (a Kafka outage must fail the pass, not hang it); duplicates that this
      // could cause after a timeout carry the same event id, so the warning kafkajs gives about it is noise here.
      if (message.startsWith('Limiting retries for the idempotent producer')) return;
      // A transaction's AddPartitionsToTxn meeting the previous one still replicating is retried (patches/):
      // expected on every cluster of more than one broker, not an error worth a log line each time.
      const error = typeof extra.error === 'string' ? extra.error : '';
      if (error.includes('another concurrent operation on the same transaction')) return;
      // A fresh broker (or a moved coordinator) is loading its transaction or group state: kafkajs retries.
      const child = { component: 'kafkajs', broker: extra.broker, error: extra.error };
      if (/coordinator is (loading|not available)/.test(error)) return void logger.debug(child, message);
      if (level === logLevel.ERROR) logger.error(child, message);
      else if (level === logLevel.WARN) logger.warn(child, message);
      else logger.debug(child, message);
    };
}

/** Builds kafkajs client options from the configuration (the SASL password is read at every connection). */
export function kafkaOptions(config: BridgeConfig['kafka'], logger: Logger): KafkaConfig {
  const options: KafkaConfig = {
    clientId: config.clientId,
    brokers: config.brokers,
    ...kafkaSecurity(config),
    logLevel: logLevel.WARN,
    logCreator: kafkaLogger(logger),
    connectionTimeout: 5_000,
    retry: { retries: 6, initialRetryTime: 300, maxRetryTime: 5_000 },
  };
  return options;
}

/**
 * Replication of the topics the bridge creates on a cluster of `brokers`: the configured factor (or min(3, brokers))
 * and min.insync.replicas 2 from a factor of 3, so acks=all survives one broker down and never rests on one copy.
 */
export function topicReplication(
  configured: number | null,
  brokers: number,
): { replicationFactor: number; minInsyncReplicas: number } {
  const replicationFactor = configured ?? Math.max(1, Math.min(3, brokers));
  if (replicationFactor > brokers) {
    throw new Error(
      `KAFKA_REPLICATION_FACTOR=${replicationFactor} is larger than the ${brokers} broker(s) the cluster has now; lower it or wait for the brokers`,
    );
  }
  return { replicationFactor, minInsyncReplicas: replicationFactor >= 3 ? 2 : 1 };
}

/** The Kafka publisher of one bridge process. */
export class KafkaPublisher implements EventSink {
  private readonly kafka: Kafka;
  private producer: Producer;
  /** The producer's connection; a publish waits for it (a renewed producer connects in the background). */
  private ready: Promise<void> | null = null;
  private readonly topicOf: Record<EventType, string>;
  private readonly policy: FieldPolicy;
  private probe: Promise<Admin> | null = null;
  private messageLimit: number;
  /** The transactional producer of this leadership (exactly-once), and whether the broker fenced it. */
  private tx: { producer: Producer; fenced: boolean } | null = null;

  constructor(
    private readonly config: BridgeConfig['kafka'],
    private readonly account: string,
    private readonly logger: Logger,
    private readonly privacy: PrivacyConfig = DEFAULT_PRIVACY,
  ) {
    this.policy = fieldPolicyFromConfig(privacy, logger);
    this.kafka = new Kafka(kafkaOptions(config, logger));
    this.producer = this.newProducer();
    this.messageLimit = config.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.topicOf = {
      'review.created': config.topics.created,
      'review.status_changed': config.topics.statusChanged,
      'review.updated': config.topics.updated,
    };
  }

  /**
   * Creates the topics when allowed (idempotent), reads their max.message.bytes (the smallest of those and
   * KAFKA_MAX_MESSAGE_BYTES is the limit every message is held to) and connects the producer.
   */
  async connect(): Promise<void> {
    const admin = await this.admin();
    if (this.config.createTopics) await this.createTopics(admin);
    await this.readTopicLimits(admin);
    this.ready = this.producer.connect();
    await this.ready;
  }

  /** The largest message this publisher sends (bytes, overheads included): what fitEvent must be given. */
  get maxMessageBytes(): number {
    return this.messageLimit;
  }

  private async createTopics(admin: Admin): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const wanted = Object.values(this.config.topics).filter((t) => !existing.has(t));
    if (wanted.length > 0) {
      const { brokers } = await admin.describeCluster();
      const { replicationFactor, minInsyncReplicas } = topicReplication(this.config.replicationFactor, brokers.length);
      const insync = { name: 'min.insync.replicas', value: String(minInsyncReplicas) };
      // The state topic is a table and the changelog a store's log: compaction keeps the last row of every key.
      const compacted = new Set([this.config.topics.state, this.config.topics.changelog]);
      await admin.createTopics({
        // kafkajs's own wait fails on a broker that has not heard of a new topic yet (UNKNOWN_TOPIC_OR_PARTITION,
        // common on a fresh multi-broker cluster); awaitLeaders below treats that as "not yet".
        waitForLeaders: false,
        topics: wanted.map((topic) => ({
          topic,
          numPartitions: this.config.partitions,
          replicationFactor,
          configEntries: compacted.has(topic) ? [insync, { name: 'cleanup.policy', value: 'compact' }] : [insync],
        })),
      });
      await awaitLeaders(admin, wanted);
      this.logger.info({ topics: wanted, replicationFactor, minInsyncReplicas }, 'created topics');
    }
  }

  // A topic may allow less than the configured limit; a message over it would fail its page on every retry. Not
  // being allowed to describe configs (ACLs) is no reason to stop: the configured limit then stands.
  private async readTopicLimits(admin: Admin): Promise<void> {
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: Object.values(this.config.topics).map((name) => ({
          type: TOPIC_RESOURCE,
          name,
          configNames: ['max.message.bytes'],
        })),
      });
      const limits = resources.flatMap((r) =>
        r.configEntries.filter((e) => e.configName === 'max.message.bytes').map((e) => Number(e.configValue)),
      );
      const configured = this.config.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
      const smallest = Math.min(configured, ...limits.filter((n) => Number.isInteger(n) && n > 0));
      if (smallest < this.messageLimit) {
        this.logger.info(
          { configured, topics: smallest },
          'a topic allows smaller messages than KAFKA_MAX_MESSAGE_BYTES: using its max.message.bytes',
        );
      }
      this.messageLimit = smallest;
    } catch (err) {
      this.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "could not read the topics' max.message.bytes; using KAFKA_MAX_MESSAGE_BYTES",
      );
    }
  }

  private newProducer(): Producer {
    return this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
      retry: { retries: 6, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
  }

  /**
   * Sends through the producer; after any failure the producer is replaced by a new one (a new idempotent
   * session). kafkajs advances a partition's sequence number even for a batch the broker refused (a record too
   * large), so the old session would answer every later send with OUT_OF_ORDER_SEQUENCE_NUMBER, for ever.
   */
  private async send<T>(send: (producer: Producer) => Promise<T>): Promise<T> {
    const producer = this.producer;
    try {
      await (this.ready ?? Promise.reject(new Error('the Kafka publisher is not connected')));
      return await send(producer);
    } catch (err) {
      if (this.producer === producer) {
        this.producer = this.newProducer();
        this.ready = this.producer.connect();
        this.ready.catch(() => undefined);
        void producer.disconnect().catch(() => undefined);
      }
      throw err;
    }
  }

  async publish(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    states: readonly ReviewState[] = [],
    changelog?: ChangelogBatch,
  ): Promise<ChangelogOffsets> {
    const outgoing: Outgoing[] = [];
    const add = (topic: string, unkeyed: ChangelogMessage): void => {
      const message = this.keyed(unkeyed);
      outgoing.push({ topic, message, bytes: messageBytes(message) });
    };
    // The field policy applies to everything that carries a review: the events, the state rows, the dead letters.
    const published = events.map((event) => protectEvent(event, this.policy));
    const rows = states.map((row) => ({
      ...row,
      review: this.policy.applyToRecord(row.review) as ReviewState['review'],
    }));
    for (const event of published) add(this.topicOf[event.type], eventMessage(event));
    for (const row of stateMessages(published, rows)) add(this.config.topics.state, row);
    // Headers carry only the reject kind and detail (known field names and check codes), never record values.
    for (const dl of deadLetters)
      add(
        this.config.topics.deadLetter,
        deadLetterMessage(this.protectDeadLetter(dl), this.account, this.messageLimit),
      );
    if (changelog) for (const record of changelogMessages(changelog)) add(this.config.topics.changelog, record);
    return this.deliver(outgoing);
  }

  /**
   * Sends one commit's records: in one Kafka transaction when exactly-once is on (read_committed consumers see all
   * of it or nothing), else in acknowledged sends. The broker checks max.message.bytes per record batch, and one
   * send puts all its messages for a partition in one batch: sends are cut so that no send, hence no batch,
   * exceeds the limit; they run one after the other, so a review's events keep their order. A message over the
   * limit on its own fails whatever the cut; then everything goes in one send, so that the failure leaves no
   * part of the page published (the pipeline isolates the review that Kafka refuses).
   */
  private async deliver(outgoing: Outgoing[]): Promise<ChangelogOffsets> {
    if (outgoing.length === 0) return {};
    const oversized = outgoing.some((o) => o.bytes > this.messageLimit);
    const sends = (oversized ? [outgoing] : chunkBySize(outgoing, this.messageLimit)).map(byTopic);
    if (this.config.exactlyOnce) return this.offsetsOf(await this.transact(sends));
    const metadata: RecordMetadata[] = [];
    for (const topicMessages of sends) {
      metadata.push(...(await this.send((producer) => producer.sendBatch({ acks: -1, topicMessages }))));
    }
    return this.offsetsOf(metadata);
  }

  private offsetsOf(metadata: readonly RecordMetadata[]): ChangelogOffsets {
    const offsets: ChangelogOffsets = {};
    for (const m of metadata) {
      if (m.topicName !== this.config.topics.changelog || m.baseOffset === undefined) continue;
      const offset = Number(m.baseOffset);
      offsets[m.partition] = Math.min(offsets[m.partition] ?? offset, offset);
    }
    return offsets;
  }

  /**
   * Takes the account's transactional id at the broker for this replica's leadership: the new producer epoch fences
   * every older producer of the id (a former leader, frozen or not) and aborts its open transaction at once, so
   * read_committed readers are not held back until it times out. Call it after winning the lease, before any page.
   */
  async beginTransactions(): Promise<void> {
    if (!this.config.exactlyOnce) return;
    await this.endTransactions();
    const producer = this.kafka.producer({
      transactionalId: this.config.transactionalId,
      transactionTimeout: this.config.transactionTimeoutMs,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
      // InitProducerId answers CONCURRENT_TRANSACTIONS while the broker aborts a crashed leader's transaction;
      // kafkajs retries it with this policy, which must outlast that abort (seconds), not give up in a few ms.
      retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
    const tx = { producer, fenced: false };
    this.tx = tx;
    const limitMs = this.config.transactionTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const start = async () => {
      await producer.connect();
      // kafkajs sends the transactional InitProducerId only with the first transaction: open one and abort it
      // now, so that the former leader is fenced (and its open transaction aborted) before this leader's first page.
      const transaction = await producer.transaction();
      await transaction.abort();
    };
    try {
      await Promise.race([
        start(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`taking the transactional id took over ${limitMs} ms`)), limitMs);
        }),
      ]);
    } catch (err) {
      this.dropTransactions(tx);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Reads this account's changelog records from `from` (offsets per partition; absent: the beginning) up to end
   * markers it writes first through its own producer (see src/kafka/changelog-reader.ts); resolves the markers'
   * offsets, where the next read can start.
   */
  async readChangelog(
    from: Record<number, number>,
    onRecords: (records: ChangelogRawRecord[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<Record<number, number>> {
    const topic = this.config.topics.changelog;
    const mark = async (partitions: number[]): Promise<Record<number, number>> => {
      const nonce = randomUUID();
      const outgoing = partitions.map((partition) => ({
        topic,
        message: { ...this.keyed({ key: MARKER_KEY, value: nonce, headers: {} }), partition },
        bytes: 0,
      }));
      return this.deliver(outgoing);
    };
    const options = { topic, keyPrefix: this.config.keyPrefix ?? '', from, mark, onRecords, signal };
    return readChangelog(this.kafka, this.config.clientId, options, this.logger);
  }

  /** The id of the Kafka cluster (a Redis written against another cluster must be restored, not trusted). */
  async clusterId(): Promise<string> {
    const admin = await this.admin();
    return (await admin.describeCluster()).clusterId;
  }

  /** Gives the transactional id up (leadership ends): closes the transactional producer. */
  async endTransactions(): Promise<void> {
    const tx = this.tx;
    this.tx = null;
    await tx?.producer.disconnect().catch(() => undefined);
  }

  // One transaction: every send, then commit; any failure aborts it. A fenced producer means another replica took
  // the account at the broker: it is never re-initialised here (that would fence the winner back), only by
  // beginTransactions after this replica wins the lease again.
  private async transact(sends: TopicMessages[][]): Promise<RecordMetadata[]> {
    if (!this.tx) await this.beginTransactions();
    const tx = this.tx!;
    if (tx.fenced) throw new FencedError('the Kafka transactional id was taken by another leader');
    // A bound on the whole transaction: kafkajs can wait for ever on a broker that died mid-request (seen with a
    // killed partition leader or coordinator). Past it the producer is dropped; the next commit starts a new
    // session, whose InitProducerId aborts whatever this one left open.
    const limitMs = Math.max(5_000, Math.floor(this.config.transactionTimeoutMs / 2));
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`a Kafka transaction took longer than ${limitMs} ms`)), limitMs);
    });
    const transaction = await Promise.race([tx.producer.transaction(), watchdog]).catch((err: unknown) => {
      clearTimeout(timer);
      this.dropTransactions(tx);
      throw err;
    });
    try {
      const metadata: RecordMetadata[] = [];
      const run = async () => {
        for (const topicMessages of sends) metadata.push(...(await transaction.sendBatch({ acks: -1, topicMessages })));
        await transaction.commit();
      };
      await Promise.race([run(), watchdog]);
      clearTimeout(timer);
      return metadata;
    } catch (err) {
      clearTimeout(timer);
      const aborted = transaction.abort().catch(() => undefined);
      await Promise.race([aborted, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      if (isFencedError(err)) {
        tx.fenced = true;
        throw new FencedError('the Kafka transactional id was taken by another leader');
      }
      // After any other failure the producer's state is unknown: the next commit starts a new producer session.
      this.dropTransactions(tx);
      throw err;
    }
  }

  private dropTransactions(tx: { producer: Producer }): void {
    if (this.tx === tx) this.tx = null;
    void tx.producer.disconnect().catch(() => undefined);
  }

  /**
   * A dead letter as DEAD_LETTER_PAYLOAD allows: the record as received (raw), under the field policy (masked), or
   * its size only (reference). A record the policy cannot walk (nested past the stack) is reduced to its reference.
   */
  private protectDeadLetter(dl: DeadLetter): DeadLetter {
    const mode = this.privacy.deadLetterPayload;
    if (mode === 'raw') return dl;
    let record: unknown;
    try {
      const kept = deadLetterRecord(dl.reject.raw, this.policy, mode);
      record = 'record' in kept ? kept.record : { reference: true, ...kept };
    } catch {
      record = { reference: true };
    }
    return { ...dl, reject: { ...dl.reject, raw: record } };
  }

  /**
   * Publishes review.deleted events, a tombstone per deleted review in the state topic and their changelog markers
   * in one commit. Call it before removing the snapshot entries (SnapshotStore.removeEntries).
   */
  async publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets> {
    if (events.length === 0) return {};
    const outgoing: Outgoing[] = [];
    const add = (topic: string, message: Message): void => void outgoing.push({ topic, message, bytes: 0 });
    for (const event of events) add(this.config.topics.deleted, this.keyed(eventMessage(event)));
    for (const event of events) {
      add(
        this.config.topics.state,
        this.keyed({ key: event.subject, value: null, headers: { [STATE_RECORD_HEADER]: 'review.state' } }),
      );
    }
    if (changelog)
      for (const record of changelogMessages(changelog)) add(this.config.topics.changelog, this.keyed(record));
    // Deletions are small and few (the guard caps them): one send, as before.
    if (this.config.exactlyOnce) return this.offsetsOf(await this.transact([byTopic(outgoing)]));
    return this.offsetsOf(
      await this.send((producer) => producer.sendBatch({ acks: -1, topicMessages: byTopic(outgoing) })),
    );
  }

  /** A review-keyed message with the account's key prefix (accounts sharing a topic), else as it is. */
  private keyed<M extends { key: string | null }>(message: M): M {
    const prefix = this.config.keyPrefix;
    return prefix && message.key !== null ? { ...message, key: `${prefix}${message.key}` } : message;
  }

  /** Publishes one heartbeat (keyed by the account) and resolves once it is acknowledged. */
  async publishHeartbeat(event: ReviewHeartbeatEvent): Promise<void> {
    const message = { topic: this.config.topics.heartbeat, acks: -1, messages: [eventMessage(event)] };
    await this.send((producer) => producer.send(message));
  }

  /**
   * Cheap broker round trip for the readiness probe, over one admin client kept for the purpose: connecting a new
   * one per probe would open (and tear down) broker connections at every probe interval.
   */
  async ping(): Promise<void> {
    const admin = await this.admin();
    await admin.describeCluster();
  }

  /** The one admin connection of this publisher (topic creation and limits at connect, then the probes). */
  private admin(): Promise<Admin> {
    if (!this.probe) {
      const admin = this.kafka.admin();
      this.probe = admin.connect().then(() => admin);
      // A failed connection is retried by the next call, not cached as a rejected promise.
      this.probe.catch(() => (this.probe = null));
    }
    return this.probe;
  }

  /**
   * Closes the admin connection that connect() opened (a later ping() opens one again): with many accounts in a
   * process only one of them needs it for the readiness probe.
   */
  async closeProbe(): Promise<void> {
    const probe = this.probe;
    this.probe = null;
    await probe?.then((admin) => admin.disconnect()).catch(() => undefined);
  }

  /** Flushes nothing (sends are awaited) and closes the producer's and the probe's connections. */
  async disconnect(): Promise<void> {
    const probe = this.probe;
    this.probe = null;
    await Promise.allSettled([
      this.producer.disconnect(),
      this.endTransactions(),
      probe?.then((admin) => admin.disconnect()),
    ]);
  }
}

/** How long new topics may take to get a leader for every partition before connect() fails (and is retried). */
const TOPIC_LEADERS_TIMEOUT_MS = 30_000;

/** Waits until every partition of the topics has a leader, as the metadata of any broker asked tells. */
async function awaitLeaders(admin: Admin, topics: readonly string[]): Promise<void> {
  const deadline = Date.now() + TOPIC_LEADERS_TIMEOUT_MS;
  for (;;) {
    const ready = await admin
      .fetchTopicMetadata({ topics: [...topics] })
      .then((m) => m.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)))
      .catch(() => false);
    if (ready) return;
    if (Date.now() > deadline) throw new Error(`new topics without a leader after ${TOPIC_LEADERS_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Key of the end markers a changelog read writes (see src/kafka/changelog-reader.ts); compaction keeps one. */
const MARKER_KEY = 'restore-marker';

/** A message on its way, with its topic and size. */
interface Outgoing {
  topic: string;
  message: Message;
  bytes: number;
}

/** One send's messages grouped by topic, in order. */
function byTopic(chunk: readonly Outgoing[]): TopicMessages[] {
  const topics = new Map<string, Message[]>();
  for (const { topic, message } of chunk) {
    let list = topics.get(topic);
    if (!list) topics.set(topic, (list = []));
    list.push(message);
  }
  return [...topics.entries()].map(([topic, messages]) => ({ topic, messages }));
}

/** A message whose value may be binary (changelog entries). */
type ChangelogMessage = Omit<OutgoingMessage, 'value'> & { value: string | Buffer };

/** The changelog records of a commit, each headed with its transaction number. */
function changelogMessages(batch: ChangelogBatch): ChangelogMessage[] {
  const headers = { [CHANGELOG_TXN_HEADER]: String(batch.checkpoint.txn) };
  const records = [
    ...batch.entries.map(([id, entry]) => entryRecord(id, entry)),
    ...(batch.deleted ?? []).map(([id, entry]) => entryRecord(id, entry, true)),
    checkpointRecord(batch.checkpoint),
  ];
  return records.map((r) => ({ key: r.key, value: r.value, headers }));
}

// Kafka's answers to a producer whose epoch is no longer the transactional id's (another producer initialised it).
const FENCED_TYPES = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING']);

/** Whether a kafkajs error (or one it wraps) says the producer was fenced. */
function isFencedError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && FENCED_TYPES.has(type)) return true;
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Consecutive runs of messages whose sizes add up to at most `limit` (a message alone over it is a run of one). */
export function chunkBySize<T extends { bytes: number }>(items: readonly T[], limit: number): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const item of items) {
    if (current.length > 0 && size + item.bytes > limit) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += item.bytes;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
