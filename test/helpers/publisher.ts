import { pino } from 'pino';
import type { BridgeConfig } from '../../src/config/config.js';
import { KafkaPublisher } from '../../src/kafka/publisher.js';
import type { ChangelogIndex } from '../../src/kafka/changelog-index.js';
import { kafkaBrokers, uniqueName } from './services.js';

/** Unique topic names of every kind, for one test file on the shared broker. */
export function uniqueTopics(prefix: string): BridgeConfig['kafka']['topics'] {
  const base = uniqueName(prefix);
  return {
    created: `${base}.created`,
    statusChanged: `${base}.status_changed`,
    updated: `${base}.updated`,
    deadLetter: `${base}.dead_letter`,
    state: `${base}.state`,
    deleted: `${base}.deleted`,
    heartbeat: `${base}.heartbeat`,
    changelog: `${base}.changelog`,
  };
}

/** Options of connectedPublisher. */
export interface PublisherOptions {
  createTopics?: boolean;
  exactlyOnce?: boolean;
  transactionalId?: string;
  /** The account's key prefix on shared topics (`<account>:`); absent: none. */
  keyPrefix?: string;
  changelogIndex?: ChangelogIndex;
}

/**
 * A connected KafkaPublisher on the shared broker that creates its topics (2 partitions) unless the test made them
 * itself (`createTopics: false`); disconnect it after.
 */
export async function connectedPublisher(
  topics: BridgeConfig['kafka']['topics'],
  {
    createTopics = true,
    exactlyOnce = false,
    transactionalId = uniqueName('it-tx'),
    keyPrefix,
    changelogIndex,
  }: PublisherOptions = {},
): Promise<KafkaPublisher> {
  const publisher = new KafkaPublisher(
    {
      brokers: kafkaBrokers(),
      clientId: uniqueName('it-publisher'),
      ssl: false,
      sasl: null,
      topics,
      createTopics,
      partitions: 2,
      replicationFactor: 1,
      exactlyOnce,
      transactionalId,
      transactionTimeoutMs: 60_000,
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    },
    'it',
    pino({ level: 'silent' }),
    undefined,
    changelogIndex,
  );
  await publisher.connect();
  return publisher;
}
