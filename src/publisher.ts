import { Kafka, logLevel, Partitioners, type KafkaConfig, type LogEntry, type Producer, type Message } from 'kafkajs';
import type { Logger } from 'pino';
import type { BridgeConfig } from './config.js';
import { readSecret } from './config.js';
import { CLOUDEVENTS_CONTENT_TYPE, type EventType, type ReviewEvent } from './events.js';
import type { Reject } from './upstream/types.js';

// The Kafka adapter. One idempotent producer (no duplicates from its own retries), acks from all in-sync
// replicas, the review id as key so that a review's events stay in one partition in order.

/** A record that failed validation, on its way to the dead-letter topic. */
export interface DeadLetter {
  reject: Reject;
  pass: string;
  detectedAt: number;
}

/** Sends the bridge's events and dead letters to Kafka. */
export interface EventSink {
  /** Publishes and resolves once every record is acknowledged by all in-sync replicas. */
  publish(events: readonly ReviewEvent[], deadLetters: readonly DeadLetter[]): Promise<void>;
}

function kafkaLogger(logger: Logger) {
  return () =>
    ({ level, log }: LogEntry) => {
      const { message, ...extra } = log;
      // Retries are bounded on purpose (a Kafka outage must fail the pass, not hang it); duplicates that this
      // could cause after a timeout carry the same event id, so the warning kafkajs gives about it is noise here.
      if (message.startsWith('Limiting retries for the idempotent producer')) return;
      const child = { component: 'kafkajs', broker: extra.broker, error: extra.error };
      if (level === logLevel.ERROR) logger.error(child, message);
      else if (level === logLevel.WARN) logger.warn(child, message);
      else logger.debug(child, message);
    };
}

/** Builds kafkajs client options from the configuration (SASL secrets read at connect time). */
export function kafkaOptions(config: BridgeConfig['kafka'], logger: Logger): KafkaConfig {
  const options: KafkaConfig = {
    clientId: config.clientId,
    brokers: config.brokers,
    ssl: config.ssl,
    logLevel: logLevel.WARN,
    logCreator: kafkaLogger(logger),
    connectionTimeout: 5_000,
    retry: { retries: 6, initialRetryTime: 300, maxRetryTime: 5_000 },
  };
  if (config.sasl) {
    const { mechanism, username, password } = config.sasl;
    const secret = readSecret(password);
    // kafkajs types each mechanism separately, so the union has to be narrowed case by case.
    if (mechanism === 'plain') options.sasl = { mechanism, username, password: secret };
    else if (mechanism === 'scram-sha-256') options.sasl = { mechanism, username, password: secret };
    else options.sasl = { mechanism, username, password: secret };
  }
  return options;
}

/** The Kafka publisher of one bridge process. */
export class KafkaPublisher implements EventSink {
  private readonly kafka: Kafka;
  private readonly producer: Producer;
  private readonly topicOf: Record<EventType, string>;

  constructor(
    private readonly config: BridgeConfig['kafka'],
    private readonly account: string,
    private readonly logger: Logger,
  ) {
    this.kafka = new Kafka(kafkaOptions(config, logger));
    this.producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
      retry: { retries: 6, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
    this.topicOf = {
      'review.created': config.topics.created,
      'review.status_changed': config.topics.statusChanged,
      'review.updated': config.topics.updated,
    };
  }

  /** Creates the topics when allowed (idempotent) and connects the producer. */
  async connect(): Promise<void> {
    if (this.config.createTopics) {
      const admin = this.kafka.admin();
      await admin.connect();
      try {
        const existing = new Set(await admin.listTopics());
        const wanted = Object.values(this.config.topics).filter((t) => !existing.has(t));
        if (wanted.length > 0) {
          await admin.createTopics({
            waitForLeaders: true,
            topics: wanted.map((topic) => ({
              topic,
              numPartitions: this.config.partitions,
              replicationFactor: this.config.replicationFactor,
            })),
          });
          this.logger.info({ topics: wanted }, 'created topics');
        }
      } finally {
        await admin.disconnect();
      }
    }
    await this.producer.connect();
  }

  async publish(events: readonly ReviewEvent[], deadLetters: readonly DeadLetter[]): Promise<void> {
    if (events.length === 0 && deadLetters.length === 0) return;
    const byTopic = new Map<string, Message[]>();
    const add = (topic: string, message: Message) => {
      let list = byTopic.get(topic);
      if (!list) byTopic.set(topic, (list = []));
      list.push(message);
    };
    for (const event of events) {
      add(this.topicOf[event.type], {
        key: event.subject,
        value: JSON.stringify(event),
        headers: { 'content-type': CLOUDEVENTS_CONTENT_TYPE },
      });
    }
    for (const dl of deadLetters) {
      add(this.config.topics.deadLetter, {
        key: dl.reject.id,
        value: JSON.stringify({
          account: this.account,
          reason: dl.reject.reason,
          pass: dl.pass,
          detected_at: new Date(dl.detectedAt).toISOString(),
          record: dl.reject.raw,
        }),
        // Headers carry only the reason (zod paths and codes), never record values.
        headers: { 'content-type': 'application/json', 'dlq-reason': dl.reject.reason },
      });
    }
    await this.producer.sendBatch({
      acks: -1,
      topicMessages: [...byTopic.entries()].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  /** Cheap broker round trip for the readiness probe. */
  async ping(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await admin.describeCluster();
    } finally {
      await admin.disconnect();
    }
  }

  /** Flushes nothing (sends are awaited) and closes the producer's connections. */
  async disconnect(): Promise<void> {
    await this.producer.disconnect();
  }
}
