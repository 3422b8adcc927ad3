import { afterAll, describe, expect, it } from 'vitest';
import { diffReview } from '../../../src/core/diff.js';
import { FencedError } from '../../../src/core/errors.js';
import { EMPTY_CHANGELOG_CHECKPOINT, decodeChangelogRecord } from '../../../src/core/changelog.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import type { KafkaPublisher } from '../../../src/kafka/publisher.js';
import type { ChangelogRawRecord } from '../../../src/kafka/changelog-reader.js';
import { readAll } from '../../helpers/kafka.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';
import { uniqueName } from '../../helpers/services.js';
import { review } from '../../helpers/fakes.js';

// Kafka transactions on the real broker: each commit (events, state rows, changelog) is all or nothing for a
// read_committed reader; a second producer of the same transactional id (a new leader) fences the first (a zombie)
// at the broker; the changelog reads back up to fresh end markers.

const key = new FingerprintKey(Buffer.alloc(32, 9));
const open: KafkaPublisher[] = [];
afterAll(async () => {
  await Promise.allSettled(open.map((p) => p.disconnect()));
});

function change(id: number, txn: number) {
  const result = diffReview({
    previous: null,
    review: review(id),
    detection: 'incremental',
    source: 'urn:tx',
    fetchedAt: 1,
    suppressCreated: false,
    key,
  });
  const entries: Array<[number, NonNullable<typeof result.next>]> = [[id, result.next!]];
  return {
    events: result.events,
    changelog: { entries, checkpoint: { ...EMPTY_CHANGELOG_CHECKPOINT, txn, epoch: 1 } },
  };
}

describe('Kafka transactions (exactly-once publishing)', () => {
  it('a new leader fences the old producer; read_committed readers see only committed transactions', async () => {
    const topics = uniqueTopics('tx');
    const transactionalId = uniqueName('tx-id');
    const zombie = await connectedPublisher(topics, { exactlyOnce: true, transactionalId });
    open.push(zombie);
    await zombie.beginTransactions();
    const first = change(1, 1);
    await zombie.publish(first.events, [], [], first.changelog);

    const leader = await connectedPublisher(topics, { exactlyOnce: true, transactionalId, createTopics: false });
    open.push(leader);
    await leader.beginTransactions();
    const stale = change(2, 2);
    await expect(zombie.publish(stale.events, [], [], stale.changelog)).rejects.toBeInstanceOf(FencedError);
    // Fenced for good: no retry re-initialises the id behind the new leader's back.
    await expect(zombie.publish(stale.events, [], [], stale.changelog)).rejects.toBeInstanceOf(FencedError);
    const next = change(3, 2);
    await leader.publish(next.events, [], [], next.changelog);

    const messages = await readAll([topics.created, topics.state, topics.changelog], { timeoutMs: 30_000 });
    const created = messages.filter((m) => m.topic === topics.created).map((m) => m.key);
    expect(created.sort()).toEqual(['1', '3']);
    expect(
      messages
        .filter((m) => m.topic === topics.state)
        .map((m) => m.key)
        .sort(),
    ).toEqual(['1', '3']);
  });

  it('reads the changelog back from given offsets up to fresh end markers, with transaction numbers', async () => {
    const topics = uniqueTopics('txread');
    const publisher = await connectedPublisher(topics, { exactlyOnce: true });
    open.push(publisher);
    await publisher.beginTransactions();
    const marks: Record<number, number>[] = [];
    for (let txn = 1; txn <= 4; txn++) {
      const c = change(10 + txn, txn);
      marks.push(await publisher.publish(c.events, [], [], c.changelog));
    }
    const all: ChangelogRawRecord[] = [];
    const ends = await publisher.readChangelog({}, async (records) => void all.push(...records));
    const decoded = all.map((r) => ({ txn: r.txn, record: decodeChangelogRecord(r.key, r.value) }));
    expect(
      decoded
        .filter((d) => d.record?.kind === 'entry')
        .map((d) => d.txn)
        .sort(),
    ).toEqual([1, 2, 3, 4]);
    expect(
      decoded
        .filter((d) => d.record?.kind === 'checkpoint')
        .map((d) => d.txn)
        .sort(),
    ).toEqual([1, 2, 3, 4]);
    // From the offsets of the third commit on: its partitions give only the third and fourth transactions.
    const tail: ChangelogRawRecord[] = [];
    await publisher.readChangelog(marks[2]!, async (records) => void tail.push(...records));
    const data = tail.filter((r) => decodeChangelogRecord(r.key, r.value) !== null);
    expect(data.filter((r) => marks[2]![r.partition] !== undefined).every((r) => r.txn >= 3)).toBe(true);
    expect(new Set(data.map((r) => r.txn))).toContain(3);
    expect(new Set(data.map((r) => r.txn))).toContain(4);
    // A read from the markers' offsets finds nothing new.
    const none: ChangelogRawRecord[] = [];
    await publisher.readChangelog(ends, async (records) => void none.push(...records));
    expect(none.filter((r) => decodeChangelogRecord(r.key, r.value) !== null)).toEqual([]);
  });
});
