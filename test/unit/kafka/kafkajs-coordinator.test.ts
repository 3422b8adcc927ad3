import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

// When the patched kafkajs forgets its transaction coordinator (patches/kafkajs+2.2.4.patch, eosManager): after an
// answer saying the broker is not the coordinator, or no answer at all; not after answers only a coordinator gives.
// Run against a cluster object that counts lookups (test/integration/kafka/kafkajs-coordinator.test.ts counts them
// on the real broker).

const require = createRequire(import.meta.url);
type EosManager = {
  initProducerId(): Promise<void>;
  beginTransaction(): void;
  addPartitionsToTransaction(topics: { topic: string; partitions: { partition: number }[] }[]): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
};
const createEosManager = require('kafkajs/src/producer/eosManager') as (options: object) => EosManager;
const { createErrorFromCode } = require('kafkajs/src/protocol/error') as { createErrorFromCode(code: number): Error };
const { KafkaJSConnectionError } = require('kafkajs/src/errors') as {
  KafkaJSConnectionError: new (m: string) => Error;
};

const NOT_COORDINATOR = 16;
const INVALID_PRODUCER_EPOCH = 47;

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * An eosManager over a one-broker cluster whose AddPartitionsToTxn fails with the errors queued in `failures` (a
 * failed EndTxn leaves kafkajs' state machine in COMMITTING, where only a new producer goes on).
 */
function managed() {
  const failures: Error[] = [];
  const counts = { lookups: 0, endTxn: 0 };
  const broker = {
    nodeId: 1,
    initProducerId: async () => ({ producerId: 7, producerEpoch: 0 }),
    addPartitionsToTxn: async () => {
      const failure = failures.shift();
      if (failure) throw failure;
      return {};
    },
    endTxn: async () => {
      counts.endTxn++;
      return {};
    },
  };
  const cluster = {
    retry: { retries: 0 },
    refreshMetadataIfNecessary: async () => undefined,
    findGroupCoordinator: async () => {
      counts.lookups++;
      return broker;
    },
    findBroker: async () => broker,
  };
  const eos = createEosManager({ logger: silent, cluster, transactional: true, transactionalId: 'tx' });
  const transaction = async () => {
    eos.beginTransaction();
    try {
      await eos.addPartitionsToTransaction([{ topic: 't', partitions: [{ partition: 0 }] }]);
    } catch (err) {
      await eos.abort();
      throw err;
    }
    await eos.commit();
  };
  return { eos, failures, counts, transaction };
}

describe('patched kafkajs: the kept transaction coordinator', () => {
  it('serves every transaction after the first lookup', async () => {
    const { eos, counts, transaction } = managed();
    await eos.initProducerId();
    for (let i = 0; i < 4; i++) await transaction();
    expect(counts.endTxn).toBe(4);
    expect(counts.lookups).toBe(1);
  });

  it('is looked up again after NOT_COORDINATOR or a lost connection, not after a fenced epoch', async () => {
    const { eos, failures, counts, transaction } = managed();
    await eos.initProducerId();

    failures.push(createErrorFromCode(INVALID_PRODUCER_EPOCH));
    await expect(transaction()).rejects.toThrow();
    await transaction();
    expect(counts.lookups).toBe(1);

    failures.push(createErrorFromCode(NOT_COORDINATOR));
    await expect(transaction()).rejects.toThrow();
    await transaction();
    expect(counts.lookups).toBe(2);

    failures.push(new KafkaJSConnectionError('Connection error: socket closed'));
    await expect(transaction()).rejects.toThrow();
    await transaction();
    expect(counts.lookups).toBe(3);

    await transaction();
    expect(counts.lookups).toBe(3);
  });
});
