import { afterAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { createTopics, testKafka } from '../../helpers/kafka.js';
import { uniqueName } from '../../helpers/services.js';

// The patched kafkajs keeps its transaction coordinator (patches/kafkajs+2.2.4.patch, eosManager): one FindCoordinator
// when the producer starts instead of two per transaction. Counted from kafkajs' own request instrumentation against
// the real broker (when it is looked up again: test/unit/kafka/kafkajs-coordinator.test.ts).

const open: Producer[] = [];
afterAll(async () => {
  await Promise.allSettled(open.map((p) => p.disconnect()));
});

/** A transactional producer and the names of the requests it sends, in order. */
async function countedProducer(transactionalId: string) {
  const producer = testKafka().producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  open.push(producer);
  const requests: string[] = [];
  producer.on(producer.events.REQUEST, (e: { payload: { apiName: string } }) => requests.push(e.payload.apiName));
  await producer.connect();
  return { producer, requests };
}

async function oneTransaction(producer: Producer, topic: string, value: string): Promise<void> {
  const txn = await producer.transaction();
  try {
    await txn.send({ topic, messages: [{ key: value, value }] });
    await txn.commit();
  } catch (err) {
    await txn.abort().catch(() => undefined);
    throw err;
  }
}

const count = (requests: string[], name: string) => requests.filter((r) => r === name).length;

describe('patched kafkajs: the transaction coordinator', () => {
  it('is looked up once for many transactions', async () => {
    const topic = uniqueName('coord');
    await createTopics([topic]);
    const { producer, requests } = await countedProducer(uniqueName('coord-id'));
    await oneTransaction(producer, topic, 'first');
    const lookups = count(requests, 'GroupCoordinator');
    // Its InitProducerId looked it up (kafkajs names FindCoordinator after its first version).
    expect(lookups).toBe(1);
    for (let i = 0; i < 5; i++) await oneTransaction(producer, topic, `v${i}`);
    expect(count(requests, 'EndTxn')).toBe(6);
    expect(count(requests, 'GroupCoordinator')).toBe(lookups);
  });
});
