import type { Message, TopicMessages } from 'kafkajs';
import {
  CHANGELOG_TXN_HEADER,
  MARKER_RECORD_KEY,
  checkpointRecord,
  entryRecord,
  type ChangelogCheckpoint,
} from '../core/changelog.js';
import { ACCOUNT_HEADER, DEPLOYMENT_HEADER, type Identity } from '../core/identity.js';
import type { SnapshotEntry } from '../core/snapshot-entry.js';
import type { Logger } from 'pino';
import type { BridgeConfig, PrivacyConfig } from '../config/config.js';
import {
  STATE_RECORD_HEADER,
  dataschemaOf,
  stateOf,
  type EventType,
  type ReviewDeletedEvent,
  type ReviewEvent,
  type ReviewHeartbeatEvent,
  type ReviewState,
} from '../core/events.js';
import { binaryEventMessage, contractReserveBytes, frame, type RecordContracts } from '../core/wire-format.js';
import {
  deadLetterMessage,
  eventMessage,
  messageBytes,
  type DeadLetterInput,
  type OutgoingMessage,
} from '../core/event-size.js';
import { deadLetterRecord, protectEvent, type FieldPolicy } from '../core/field-policy.js';
import { fieldPolicyFromConfig } from '../config/privacy.js';

// Encoding and sizing of the Kafka adapter: which records a commit writes to which topic (events, state rows, dead
// letters, changelog entries, deletion tombstones, read markers), under the field policy and with the account's
// key prefix, and how they are cut into sends that each fit the message limit. Nothing here talks to Kafka.

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

/** A message on its way, with its topic and size. */
export interface Outgoing {
  topic: string;
  message: Message;
  bytes: number;
}

/** Key of the end markers a changelog read writes (see src/kafka/changelog-reader.ts); compaction keeps one. */
export const MARKER_KEY = MARKER_RECORD_KEY;

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

/** The records of one commit, as one account's publisher writes them. */
export class RecordEncoder {
  private readonly policy: FieldPolicy;
  private readonly topicOf: Record<EventType, string>;

  constructor(
    private readonly config: BridgeConfig['kafka'],
    private readonly account: string,
    private readonly privacy: PrivacyConfig,
    logger: Logger,
    /** The schemas registered for the topics (SCHEMA_REGISTRY_URL); absent: records as without a registry. */
    private readonly contracts?: RecordContracts | null,
  ) {
    this.policy = fieldPolicyFromConfig(privacy, logger);
    this.topicOf = {
      'review.created': config.topics.created,
      'review.status_changed': config.topics.statusChanged,
      'review.updated': config.topics.updated,
    };
  }

  /** A commit's events, state rows, dead letters (fitted to `messageLimit`) and changelog records, sized. */
  commitRecords(
    events: readonly ReviewEvent[],
    deadLetters: readonly DeadLetter[],
    states: readonly ReviewState[],
    changelog: ChangelogBatch | undefined,
    messageLimit: number,
  ): Outgoing[] {
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
    for (const event of published) add(this.topicOf[event.type], this.eventRecord(event));
    for (const row of stateMessages(published, rows)) add(this.config.topics.state, this.stateRecord(row));
    // Headers carry only the reject kind and detail (known field names and check codes), never record values.
    for (const dl of deadLetters)
      add(this.config.topics.deadLetter, deadLetterMessage(this.protectDeadLetter(dl), this.account, messageLimit));
    if (changelog) {
      for (const record of this.changelogMessages(changelog)) {
        outgoing.push({ topic: this.config.topics.changelog, message: record, bytes: messageBytes(record) });
      }
    }
    return outgoing;
  }

  /** review.deleted events, a state tombstone per deleted review and their changelog markers (not sized: small). */
  deletionRecords(events: readonly ReviewDeletedEvent[], changelog?: ChangelogBatch): Outgoing[] {
    const outgoing: Outgoing[] = [];
    const add = (topic: string, message: Message): void => void outgoing.push({ topic, message, bytes: 0 });
    for (const event of events) add(this.config.topics.deleted, this.keyed(this.eventRecord(event)));
    for (const event of events) {
      add(
        this.config.topics.state,
        this.keyed({ key: event.subject, value: null, headers: { [STATE_RECORD_HEADER]: 'review.state' } }),
      );
    }
    if (changelog) for (const record of this.changelogMessages(changelog)) add(this.config.topics.changelog, record);
    return outgoing;
  }

  /** The message of a heartbeat (keyed by the account, never prefixed). */
  heartbeatMessage(event: ReviewHeartbeatEvent): Message {
    return this.eventRecord(event);
  }

  /**
   * Bytes the registry's contracts may add to an event's message beyond what fitEvent measures (its registered
   * URL in place of the URN, and in the confluent wire format the frame and the ce_ headers): events are fitted to
   * the message limit less this.
   */
  get contractReserveBytes(): number {
    return contractReserveBytes(this.contracts, (type) => Buffer.byteLength(dataschemaOf(type)));
  }

  /**
   * A CloudEvent's message: structured JSON as built without a registry; with one, `dataschema` names the schema
   * registered for its topic, and the confluent wire format frames its data in binary content mode.
   */
  private eventRecord(event: ReviewEvent | ReviewDeletedEvent | ReviewHeartbeatEvent): ChangelogMessage {
    const contracts = this.contracts;
    if (!contracts) return eventMessage(event);
    const contract = contracts.byType[event.type];
    const named = { ...event, dataschema: contract.url };
    return contracts.wire === 'confluent' ? binaryEventMessage(named, contract.id) : eventMessage(named);
  }

  /** A state row's message: framed in the confluent wire format (a tombstone stays null). */
  private stateRecord(row: OutgoingMessage): ChangelogMessage {
    const contracts = this.contracts;
    if (contracts?.wire !== 'confluent') return row;
    return { ...row, value: frame(contracts.byType['review.state'].id, row.value) };
  }

  /** One end marker per changelog partition, carrying `nonce` (see src/kafka/changelog-reader.ts). */
  markerRecords(partitions: readonly number[], nonce: string): Outgoing[] {
    const topic = this.config.topics.changelog;
    return partitions.map((partition) => ({
      topic,
      message: { ...this.changelogKeyed({ key: MARKER_KEY, value: nonce, headers: {} }), partition },
      bytes: 0,
    }));
  }

  /**
   * The changelog records of a commit, keyed with the account's changelog prefix, each headed with its transaction
   * number, and with the deployment and account that wrote it when the configuration names them.
   */
  private changelogMessages(batch: ChangelogBatch): ChangelogMessage[] {
    const identity = this.config.identity;
    const headers: Record<string, string> = { [CHANGELOG_TXN_HEADER]: String(batch.checkpoint.txn) };
    if (identity) Object.assign(headers, { [DEPLOYMENT_HEADER]: identity.deployment, [ACCOUNT_HEADER]: this.account });
    return changelogRecords(batch, identity).map((r) => this.changelogKeyed({ key: r.key, value: r.value, headers }));
  }

  /** A changelog message with the account's changelog key prefix (accounts sharing the topic), else as it is. */
  private changelogKeyed<M extends { key: string }>(message: M): M {
    const prefix = this.config.changelogKeyPrefix ?? this.config.keyPrefix;
    return prefix ? { ...message, key: `${prefix}${message.key}` } : message;
  }

  /** A review-keyed message with the account's key prefix (accounts sharing a topic), else as it is. */
  private keyed<M extends { key: string | null }>(message: M): M {
    const prefix = this.config.keyPrefix;
    return prefix && message.key !== null ? { ...message, key: `${prefix}${message.key}` } : message;
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
}

/**
 * The sends of one commit. The broker checks max.message.bytes per record batch, and one send puts all its
 * messages for a partition in one batch: sends are cut so that no send, hence no batch, exceeds the limit; they
 * run one after the other, so a review's events keep their order. A message over the limit on its own fails
 * whatever the cut; then everything goes in one send, so that the failure leaves no part of the page published
 * (the pipeline isolates the review that Kafka refuses).
 */
export function sendsOf(outgoing: readonly Outgoing[], messageLimit: number): TopicMessages[][] {
  const oversized = outgoing.some((o) => o.bytes > messageLimit);
  return (oversized ? [[...outgoing]] : chunkBySize(outgoing, messageLimit)).map(byTopic);
}

/** One send's messages grouped by topic, in order. */
export function byTopic(chunk: readonly Outgoing[]): TopicMessages[] {
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

/** The changelog records of a commit (keys without the account prefix): entries, deletion markers, checkpoint. */
function changelogRecords(batch: ChangelogBatch, identity?: Identity): Array<{ key: string; value: string | Buffer }> {
  return [
    ...batch.entries.map(([id, entry]) => entryRecord(id, entry)),
    ...(batch.deleted ?? []).map(([id, entry]) => entryRecord(id, entry, true)),
    checkpointRecord(batch.checkpoint, identity),
  ];
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
