import { ConfigResourceTypes } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deletedEvent, heartbeatEvent, RECORD_SCHEMAS, type ReviewEvent } from '../../../src/core/events.js';
import { diffReview } from '../../../src/core/diff.js';
import type { KafkaPublisher } from '../../../src/kafka/publisher.js';
import type { Review } from '../../../src/core/review.js';
import { readAll, testKafka } from '../../helpers/kafka.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';
import { schemaErrors } from '../../helpers/schemas.js';

// The publisher against the real broker: the state topic is created compacted, every publish writes one state row
// per review touched (its last event wins), deletions write review.deleted plus a tombstone, heartbeats go to
// their own topic, and everything validates against the checked-in JSON Schemas.

const SOURCE = 'urn:reviews-bridge:it';
const topics = uniqueTopics('it-pub');
let publisher: KafkaPublisher;

beforeAll(async () => {
  publisher = await connectedPublisher(topics);
});
afterAll(async () => {
  await publisher.disconnect();
});

function review(id: number, client: string, headline = 'h'): Review {
  return {
    id,
    updated_date: 1_700_000_000_000 + id,
    client_publication_status: client,
    pwr_publication_status: 'APPROVED',
    headline,
  };
}

describe('KafkaPublisher and the state topic', () => {
  it('creates the state topic with cleanup.policy=compact', async () => {
    const admin = testKafka().admin();
    await admin.connect();
    try {
      const described = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topics.state, configNames: ['cleanup.policy'] }],
      });
      expect(described.resources[0]?.configEntries[0]?.configValue).toBe('compact');
      const other = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topics.created, configNames: ['cleanup.policy'] }],
      });
      expect(other.resources[0]?.configEntries[0]?.configValue).toBe('delete');
    } finally {
      await admin.disconnect();
    }
  });

  it('writes one state row per review from its last event, then tombstones deletions, and heartbeats', async () => {
    const created1 = diffReview({
      previous: null,
      review: review(1, 'PENDING'),
      detection: 'initial',
      source: SOURCE,
      fetchedAt: 1,
      suppressCreated: false,
    });
    const created2 = diffReview({
      previous: null,
      review: review(2, 'PENDING'),
      detection: 'initial',
      source: SOURCE,
      fetchedAt: 1,
      suppressCreated: false,
    });
    // Review 1 changes status and text in one step: two events, the state row must come from the second.
    const changed = { ...review(1, 'REJECTED', 'other'), updated_date: 1_700_000_000_500 };
    const change1 = diffReview({
      previous: created1.next,
      review: changed,
      detection: 'incremental',
      source: SOURCE,
      fetchedAt: 2,
      suppressCreated: false,
    });
    expect(change1.events.map((e) => e.type)).toEqual(['review.status_changed', 'review.updated']);
    const batch: ReviewEvent[] = [...created1.events, ...created2.events, ...change1.events];
    await publisher.publish(batch, []);

    const entry2 = created2.next!;
    const deleted = deletedEvent(
      SOURCE,
      {
        id: 2,
        previous: {
          client_publication_status: entry2.client,
          pwr_publication_status: entry2.pwr,
          updated_date: entry2.updatedDate,
          sequence: entry2.sequence,
        },
        stateDigest: 'd',
      },
      1_700_000_100_000,
    );
    await publisher.publishDeletions([deleted]);
    const beat = heartbeatEvent({
      source: SOURCE,
      account: 'it',
      watermark: 5,
      lastCompletePoll: 6,
      leaseEpoch: 3,
      paused: false,
      now: 7,
    });
    await publisher.publishHeartbeat(beat);

    const state = await readAll([topics.state], { timeoutMs: 30_000 });
    const byKey = new Map<string, string[]>();
    for (const m of state) byKey.set(m.key ?? '', [...(byKey.get(m.key ?? '') ?? []), m.value]);
    expect(byKey.get('1')).toHaveLength(1);
    const row1 = JSON.parse(byKey.get('1')![0]!);
    expect(RECORD_SCHEMAS['review.state'].safeParse(row1).success).toBe(true);
    expect(schemaErrors(row1, 'review.state')).toEqual([]);
    expect(row1).toMatchObject({
      review_id: 1,
      sequence: 3,
      client_publication_status: 'REJECTED',
      event_type: 'review.updated',
      event_id: change1.events[1]!.id,
    });
    expect(row1.review.headline).toBe('other');
    // Review 2: its created row, then the tombstone (compaction will keep only the tombstone, then drop it).
    expect(byKey.get('2')).toHaveLength(2);
    expect(byKey.get('2')![1]).toBe('');
    expect(state.every((m) => m.headers['reviews-bridge-record'] === 'review.state')).toBe(true);

    const [del] = await readAll([topics.deleted], { timeoutMs: 30_000 });
    const delValue = JSON.parse(del!.value);
    expect(del!.key).toBe('2');
    expect(delValue).toEqual(deleted);
    expect(schemaErrors(delValue)).toEqual([]);
    expect(delValue.sequence).toBe(2);

    const [hb] = await readAll([topics.heartbeat], { timeoutMs: 30_000 });
    expect(JSON.parse(hb!.value)).toEqual(beat);
    expect(schemaErrors(JSON.parse(hb!.value))).toEqual([]);
  });
});
