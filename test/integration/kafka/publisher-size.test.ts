import { afterEach, describe, expect, it } from 'vitest';
import type { KafkaPublisher } from '../../../src/kafka/publisher.js';
import { fitEvent } from '../../../src/core/event-size.js';
import type { ReviewEvent } from '../../../src/core/events.js';
import type { Review } from '../../../src/core/review.js';
import { firstDiff } from '../../helpers/first-diff.js';
import { readAll, testKafka } from '../../helpers/kafka.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';

// The publisher against a broker whose topics allow only 20 kB messages: it must learn that limit at connect, cut
// its sends so that no record batch exceeds it, and send dead letters whose records do not fit as references.

const LIMIT = 20_000;
const NOW = Date.UTC(2026, 10, 23, 12);
const publishers: KafkaPublisher[] = [];
afterEach(async () => {
  await Promise.all(publishers.splice(0).map((p) => p.disconnect()));
});

function event(id: number, comments: string): ReviewEvent {
  const review = {
    id,
    updated_date: NOW,
    client_publication_status: 'APPROVED',
    pwr_publication_status: 'APPROVED',
    comments,
  } as Review;
  return firstDiff(review, NOW).events[0]!;
}

async function smallTopics(): Promise<ReturnType<typeof uniqueTopics>> {
  const topics = uniqueTopics('it-size');
  const admin = testKafka().admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: Object.values(topics).map((topic) => ({
        topic,
        numPartitions: 1,
        replicationFactor: 1,
        configEntries: [{ name: 'max.message.bytes', value: String(LIMIT) }],
      })),
    });
  } finally {
    await admin.disconnect();
  }
  return topics;
}

describe('KafkaPublisher and the message size limit', () => {
  it('reads the topics limit, cuts sends to fit it, and dead-letters an oversized record by reference', async () => {
    const topics = await smallTopics();
    // Without cutting, the broker refuses a batch over the topic's limit: the case the publisher must avoid.
    const producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const tooBig = Array.from({ length: 10 }, (_, i) => ({ key: String(i), value: 'x'.repeat(3000) }));
    await expect(producer.send({ topic: topics.created, acks: -1, messages: tooBig })).rejects.toThrow();
    await producer.disconnect();

    // Configured for 1 MiB (the default); the topics allow less.
    const publisher = await connectedPublisher(topics, { createTopics: false });
    publishers.push(publisher);
    expect(publisher.maxMessageBytes).toBe(LIMIT);

    const events = Array.from({ length: 30 }, (_, i) => event(i + 1, 'c'.repeat(3000)));
    const huge = fitEvent(event(99, 'h'.repeat(200_000)), publisher.maxMessageBytes);
    expect(huge.verdict).toBe('truncated');
    if (huge.verdict !== 'truncated') return;
    events.push(huge.event);
    const deadLetters = [
      {
        reject: {
          id: '77',
          reason: 'string_too_long' as const,
          detail: 'comments:string_too_long',
          raw: { id: 77, comments: 'y'.repeat(100_000) },
        },
        pass: 'incremental',
        detectedAt: NOW,
      },
    ];
    await publisher.publish(events, deadLetters);

    const read = await readAll([topics.created, topics.deadLetter], { untilCount: 32, timeoutMs: 30_000 });
    const created = read.filter((m) => m.topic === topics.created).map((m) => JSON.parse(m.value) as ReviewEvent);
    expect(created.map((e) => e.data.review.id)).toEqual([...Array.from({ length: 30 }, (_, i) => i + 1), 99]);
    expect(created[30]!.data.truncated_fields).toEqual(['comments']);
    const dead = read.filter((m) => m.topic === topics.deadLetter);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.headers['dlq-reason']).toBe('string_too_long');
    expect(JSON.parse(dead[0]!.value)).toMatchObject({
      reason: 'string_too_long',
      record: null,
      record_omitted: { reason: 'too_large', limit_bytes: LIMIT },
    });
  });
});
