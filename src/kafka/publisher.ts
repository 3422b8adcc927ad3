import { Kafka, logLevel, type ISocketFactory, type KafkaConfig, type LogEntry } from 'kafkajs';
import { randomUUID } from 'node:crypto';
import { readChangelog, type ChangelogRawRecord } from './changelog-reader.js';
import { changelogName, type ChangelogIndex } from './changelog-index.js';
import type { Logger } from 'pino';
import type { BridgeConfig, PrivacyConfig } from '../config/config.js';
import type { RecordContracts } from '../core/wire-format.js';
import type { ReviewDeletedEvent, ReviewEvent, ReviewHeartbeatEvent, ReviewState } from '../core/events.js';
import { kafkaSecurity } from './security.js';
import { DEFAULT_PRIVACY } from '../config/privacy.js';
import {
  RecordEncoder,
  byTopic,
  sendsOf,
  type ChangelogBatch,
  type ChangelogOffsets,
  type DeadLetter,
  type Outgoing,
} from './encoding.js';
import { KafkaSender } from './sender.js';
import { DEFAULT_MAX_MESSAGE_BYTES, TopicAdmin } from './topic-admin.js';
import { recentClaims } from './heartbeat-claims.js';
import { CLAIM_HEADERS, claimRefusal, foreignClaim, stateClaim } from '../core/claims.js';

export { chunkBySize, stateMessages, type ChangelogBatch, type ChangelogOffsets, type DeadLetter } from './encoding.js';
export { durabilityShortfall, topicDurability } from './topic-admin.js';

// The Kafka adapter, composed of three parts: topic administration (topic-admin.ts), encoding and sizing of the
// records (encoding.ts), and sending, with or without transactions (sender.ts, transactions.ts). The review id is the key, so that
// a review's events stay in one partition in order.

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

/**
 * kafkajs's own log lines, at debug level whatever their level there: kafkajs logs every reconnect attempt and
 * retry (with stack traces) as an error, while the failure that matters is said once, naming the settings to check,
 * by the process's dependency monitor (src/app/dependencies.ts) and by the pass that fails. LOG_LEVEL=debug keeps
 * them, with kafkajs's level.
 */
function kafkaLogger(logger: Logger) {
  return () =>
    ({ level, log }: LogEntry) => {
      const { message, ...extra } = log;
      logger.debug(
        { component: 'kafkajs', kafkajsLevel: logLevel[level], broker: extra.broker, error: extra.error },
        message,
      );
    };
}

/**
 * Builds kafkajs client options from the configuration (the SASL password is read at every connection);
 * `socketFactory` replaces kafkajs' own sockets (tests that lose a broker's answer on the wire).
 */
export function kafkaOptions(
  config: BridgeConfig['kafka'],
  logger: Logger,
  socketFactory?: ISocketFactory,
): KafkaConfig {
  const options: KafkaConfig = {
    clientId: config.clientId,
    brokers: config.brokers,
    ...kafkaSecurity(config),
    logLevel: logLevel.WARN,
    logCreator: kafkaLogger(logger),
    connectionTimeout: 5_000,
    retry: { retries: 6, initialRetryTime: 300, maxRetryTime: 5_000 },
    ...(socketFactory ? { socketFactory } : {}),
  };
  return options;
}

/** The Kafka publisher of one bridge process. */
export class KafkaPublisher implements EventSink {
  private readonly kafka: Kafka;
  private readonly topics: TopicAdmin;
  private readonly encoder: RecordEncoder;
  private readonly sender: KafkaSender;
  private messageLimit: number;
  /** The Redis instance the leadership keeps its state in, once verifyBeforeActing passed (its heartbeats say it). */
  private redisInstance: string | null = null;

  constructor(
    private readonly config: BridgeConfig['kafka'],
    private readonly account: string,
    private readonly logger: Logger,
    privacy: PrivacyConfig = DEFAULT_PRIVACY,
    /** The process's changelog index (src/kafka/changelog-index.ts); absent: every full restore reads it all. */
    private readonly changelogIndex?: ChangelogIndex,
    /** Sockets to the brokers (tests of network faults); absent: kafkajs' own. */
    socketFactory?: ISocketFactory,
    /** The schemas registered for the topics (src/kafka/schema-registry.ts); absent: no registry. */
    contracts?: RecordContracts | null,
  ) {
    this.encoder = new RecordEncoder(config, account, privacy, logger, contracts);
    this.kafka = new Kafka(kafkaOptions(config, logger, socketFactory));
    this.sender = new KafkaSender(this.kafka, config);
    this.topics = new TopicAdmin(this.kafka, config, logger);
    this.messageLimit = config.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /**
   * Creates the topics when allowed (idempotent), reads their max.message.bytes (the smallest of those and
   * KAFKA_MAX_MESSAGE_BYTES is the limit every message is held to) and connects the producer.
   */
  async connect(): Promise<void> {
    this.messageLimit = await this.topics.prepare(this.messageLimit);
    await this.sender.connect();
  }

  /** The largest message this publisher sends less what a registry contract may add: what fitEvent is given. */
  get maxMessageBytes(): number {
    return this.messageLimit - this.encoder.contractReserveBytes;
  }

  async publish(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    states: readonly ReviewState[] = [],
    changelog?: ChangelogBatch,
  ): Promise<ChangelogOffsets> {
    return this.deliver(this.encoder.commitRecords(events, deadLetters, states, changelog, this.messageLimit));
  }

  /** Sends one commit's records, cut to the message limit; nothing to send is no commit (no empty transaction). */
  private async deliver(outgoing: Outgoing[]): Promise<ChangelogOffsets> {
    if (outgoing.length === 0) return {};
    return this.sender.commit(sendsOf(outgoing, this.messageLimit));
  }

  /**
   * Checks, reading only, what must hold before this leadership acts on Kafka (fences the transactional id, writes
   * a record, copies a key): the changelog topic is compacted, and no other installation published heartbeats into
   * this account's topics in the last `windowMs` (src/core/claims.ts). `redis`: the Redis instance this leadership
   * keeps its state in; `knownRedis`: whether an instance is one this process kept its state in. Throws the
   * refusal (a ConfigError naming the settings).
   */
  async verifyBeforeActing(
    redis: { instance: string; known: (instance: string) => boolean },
    windowMs: number,
    now: number,
  ): Promise<void> {
    await this.topics.verifyChangelog();
    const identity = this.config.identity;
    this.redisInstance = identity && redis.instance !== '' ? redis.instance : null;
    if (!identity || windowMs <= 0) return;
    const mine = {
      account: this.account,
      deployment: identity.deployment,
      state: stateClaim(this.config.topics.state, this.config.keyPrefix),
      knownRedis: (id: string) => id === redis.instance || redis.known(id),
    };
    const where = {
      brokers: this.config.brokers,
      topic: this.config.topics.heartbeat,
      groupPrefix: this.config.clientId,
    };
    const seen = await recentClaims(this.kafka, where, now - windowMs, this.logger);
    const claim = foreignClaim(seen, mine);
    if (claim) throw claimRefusal(claim, mine, this.config.topics.heartbeat);
  }

  /**
   * Takes the account's transactional id at the broker for this replica's leadership (fencing any former leader).
   * Call it after winning the lease, before any page.
   */
  async beginTransactions(): Promise<void> {
    if (this.config.exactlyOnce) await this.sender.transactions.begin();
  }

  /**
   * Reads this account's changelog records from `from` (offsets per partition; absent: the beginning) up to end
   * markers it writes first through its own producer (see src/kafka/changelog-reader.ts); resolves the markers'
   * offsets, where the next read can start. With a changelog index and a key prefix, a full read (`from` empty)
   * starts where the index says the account has nothing before, and every read teaches the index.
   */
  async readChangelog(
    from: Record<number, number>,
    onRecords: (records: ChangelogRawRecord[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<Record<number, number>> {
    const topic = this.config.topics.changelog;
    // Before every restore: a topic that is not compacted (or no longer) must not be trusted.
    await this.topics.verifyChangelog();
    const mark = (partitions: number[]): Promise<Record<number, number>> =>
      this.deliver(this.encoder.markerRecords(partitions, randomUUID()));
    const keyPrefix = this.config.changelogKeyPrefix ?? this.config.keyPrefix ?? '';
    const index = keyPrefix === '' ? undefined : this.changelogIndex;
    const changelog = changelogName(this.config.brokers, topic);
    // A full restore of an account the index knows has nothing before its offsets starts there.
    const start = index && Object.keys(from).length === 0 ? (index.startFor(changelog, keyPrefix) ?? from) : from;
    const seenPrefixes = index ? new Set<string>() : undefined;
    const options = { topic, keyPrefix, from: start, mark, onRecords, signal, seenPrefixes };
    const ends = await readChangelog(this.kafka, this.config.clientId, options, this.logger);
    if (index && seenPrefixes) index.learn(changelog, start, ends, seenPrefixes);
    return ends;
  }

  /** The former default changelog topic when it exists and this deployment uses its own default (see TopicAdmin). */
  formerChangelog(): string | null {
    return this.topics.formerChangelog();
  }

  /** The id of the Kafka cluster (a Redis written against another cluster must be restored, not trusted). */
  async clusterId(): Promise<string> {
    return this.topics.clusterId();
  }

  /** Gives the transactional id up (leadership ends): closes the transactional producer. */
  async endTransactions(): Promise<void> {
    await this.sender.transactions.end();
  }

  /**
   * Publishes review.deleted events, a tombstone per deleted review in the state topic and their changelog markers
   * in one commit. Call it before removing the snapshot entries (SnapshotStore.removeEntries).
   */
  async publishDeletions(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Promise<ChangelogOffsets> {
    if (events.length === 0) return {};
    // Deletions are small and few (the guard caps them): one send, as before.
    return this.sender.commit([byTopic(this.encoder.deletionRecords(events, changelog))]);
  }

  /** Publishes one heartbeat (keyed by the account) and resolves once it is acknowledged. */
  async publishHeartbeat(event: ReviewHeartbeatEvent): Promise<void> {
    const message = this.encoder.heartbeatMessage(event);
    const identity = this.config.identity;
    if (identity && this.redisInstance !== null) {
      // Who is publishing into these topics (read back by the next leaderships: src/core/claims.ts).
      message.headers = {
        ...message.headers,
        [CLAIM_HEADERS.deployment]: identity.deployment,
        [CLAIM_HEADERS.redis]: this.redisInstance,
        [CLAIM_HEADERS.state]: stateClaim(this.config.topics.state, this.config.keyPrefix),
      };
    }
    await this.sender.sendRecord({ topic: this.config.topics.heartbeat, acks: -1, messages: [message] });
  }

  /**
   * Cheap broker round trip for the readiness probe, over one admin client kept for the purpose: connecting a new
   * one per probe would open (and tear down) broker connections at every probe interval.
   */
  async ping(): Promise<void> {
    await this.topics.ping();
  }

  /** Existing topics weaker than the configuration asks (read at connect), with why, by topic. */
  durabilityShortfalls(): ReadonlyMap<string, string> {
    return this.topics.durabilityShortfalls();
  }

  /**
   * Closes the admin connection that connect() opened (a later ping() opens one again): with many accounts in a
   * process only one of them needs it for the readiness probe.
   */
  async closeProbe(): Promise<void> {
    await this.topics.close();
  }

  /** Flushes nothing (sends are awaited) and closes the producer's and the probe's connections. */
  async disconnect(): Promise<void> {
    await Promise.allSettled([this.sender.disconnect(), this.topics.close()]);
  }
}
