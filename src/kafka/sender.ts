import {
  Partitioners,
  type Kafka,
  type Producer,
  type ProducerRecord,
  type RecordMetadata,
  type TopicMessages,
} from 'kafkajs';
import type { BridgeConfig } from '../config/config.js';
import type { ChangelogOffsets } from './encoding.js';
import { Transactions } from './transactions.js';

// Sending of the Kafka adapter: one idempotent producer (no duplicates from its own retries), acks from all in-sync
// replicas, renewed after any failure; with exactly-once on, everything (commits and heartbeats) goes through the
// leadership's transactional producer instead (transactions.ts) and the idempotent producer is never created: a
// replica leading hundreds of accounts then holds one producer per account, not two, and half the connections.

/** The producers of one account's publisher. */
export class KafkaSender {
  /** The idempotent producer (exactly-once off); created on first use. */
  private producer: Producer | null = null;
  /** The producer's connection; a send waits for it (a renewed producer connects in the background). */
  private ready: Promise<void> | null = null;
  /** The transactional producer of this leadership (exactly-once). */
  readonly transactions: Transactions;

  constructor(
    private readonly kafka: Kafka,
    private readonly config: BridgeConfig['kafka'],
  ) {
    this.transactions = new Transactions(kafka, config);
  }

  /** Connects the idempotent producer (exactly-once off; with it on, the transactional one connects at begin()). */
  async connect(): Promise<void> {
    if (this.config.exactlyOnce) return;
    this.producer ??= this.newProducer();
    this.ready = this.producer.connect();
    await this.ready;
  }

  /**
   * Sends one commit's sends (see encoding.ts, `sendsOf`): in one Kafka transaction when exactly-once is on
   * (read_committed consumers see all of it or nothing), else in acknowledged sends, one after the other.
   */
  async commit(sends: TopicMessages[][]): Promise<ChangelogOffsets> {
    if (this.config.exactlyOnce) return this.offsetsOf(await this.transactions.run(sends));
    const metadata: RecordMetadata[] = [];
    for (const topicMessages of sends) {
      metadata.push(...(await this.send((producer) => producer.sendBatch({ acks: -1, topicMessages }))));
    }
    return this.offsetsOf(metadata);
  }

  /**
   * Sends one record (heartbeats) and resolves once it is acknowledged: in a transaction of its own when
   * exactly-once is on (so a fenced former leader cannot send one either), else through the idempotent producer.
   */
  async sendRecord(record: ProducerRecord): Promise<void> {
    if (this.config.exactlyOnce) {
      await this.transactions.run([[{ topic: record.topic, messages: record.messages }]]);
      return;
    }
    await this.send((producer) => producer.send(record));
  }

  /** Closes both producers. */
  async disconnect(): Promise<void> {
    await Promise.allSettled([this.producer?.disconnect(), this.transactions.end()]);
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
    if (!producer) throw new Error('the Kafka publisher is not connected');
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

  private offsetsOf(metadata: readonly RecordMetadata[]): ChangelogOffsets {
    const offsets: ChangelogOffsets = {};
    for (const m of metadata) {
      if (m.topicName !== this.config.topics.changelog || m.baseOffset === undefined) continue;
      const offset = Number(m.baseOffset);
      offsets[m.partition] = Math.min(offsets[m.partition] ?? offset, offset);
    }
    return offsets;
  }
}
