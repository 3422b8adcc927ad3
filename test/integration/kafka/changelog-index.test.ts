import { afterAll, describe, expect, it } from 'vitest';
import { diffReview } from '../../../src/core/diff.js';
import { EMPTY_CHANGELOG_CHECKPOINT, decodeChangelogRecord } from '../../../src/core/changelog.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import type { KafkaPublisher } from '../../../src/kafka/publisher.js';
import type { ChangelogRawRecord } from '../../../src/kafka/changelog-reader.js';
import { ChangelogIndex, changelogName, type PartitionOffsets } from '../../../src/kafka/changelog-index.js';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';
import { kafkaBrokers } from '../../helpers/services.js';
import { review } from '../../helpers/fakes.js';

// Accounts sharing a changelog topic on the real broker, with one changelog index as a process has: the first full
// restore reads the whole topic and teaches the index; a new account's full restore then starts where it ended and
// still gets its own records; an account the index saw still reads from the beginning.

const key = new FingerprintKey(Buffer.alloc(32, 7));
const open: KafkaPublisher[] = [];
afterAll(async () => {
  await Promise.allSettled(open.map((p) => p.disconnect()));
});

/** A changelog index that remembers what every read taught it: where the read started and the prefixes it saw. */
class RecordingIndex extends ChangelogIndex {
  readonly reads: Array<{ from: PartitionOffsets; ends: PartitionOffsets; seen: Set<string> }> = [];
  override learn(changelog: string, from: PartitionOffsets, ends: PartitionOffsets, seen: ReadonlySet<string>): void {
    this.reads.push({ from: { ...from }, ends: { ...ends }, seen: new Set(seen) });
    super.learn(changelog, from, ends, seen);
  }
}

/** Publishes one commit of the account: entries of `ids` and a checkpoint, under transaction `txn`. */
async function commit(publisher: KafkaPublisher, ids: number[], txn: number): Promise<void> {
  const entries: Array<[number, NonNullable<ReturnType<typeof diffReview>['next']>]> = [];
  const events = [];
  for (const id of ids) {
    const result = diffReview({
      previous: null,
      review: review(id),
      detection: 'incremental',
      source: 'urn:index',
      fetchedAt: 1,
      suppressCreated: false,
      key,
    });
    entries.push([id, result.next!]);
    events.push(...result.events);
  }
  await publisher.publish(events, [], [], { entries, checkpoint: { ...EMPTY_CHANGELOG_CHECKPOINT, txn, epoch: 1 } });
}

/** A full restore's read (from the beginning, as restoreFromChangelog asks): the entry ids and the records. */
async function fullRead(publisher: KafkaPublisher): Promise<{ ids: number[]; records: ChangelogRawRecord[] }> {
  const records: ChangelogRawRecord[] = [];
  await publisher.readChangelog({}, async (batch) => void records.push(...batch));
  const ids = records
    .map((r) => decodeChangelogRecord(r.key, r.value))
    .flatMap((d) => (d?.kind === 'entry' ? [d.id] : []))
    .sort((a, b) => a - b);
  return { ids, records };
}

describe('changelog index (accounts sharing a changelog topic)', () => {
  it('a new account full-restores from where the process last read; a known one from the beginning', async () => {
    const topics = uniqueTopics('clindex');
    const changelog = changelogName(kafkaBrokers(), topics.changelog);
    const index = new RecordingIndex();
    const account = async (prefix: string, createTopics = false): Promise<KafkaPublisher> => {
      const publisher = await connectedPublisher(topics, {
        exactlyOnce: true,
        keyPrefix: prefix,
        changelogIndex: index,
        createTopics,
      });
      open.push(publisher);
      await publisher.beginTransactions();
      return publisher;
    };
    const a = await account('a:', true);
    const b = await account('b:');
    await commit(a, [1, 2, 3, 4, 5, 6], 1);
    await commit(b, [101, 102, 103], 1);
    await commit(b, [104], 2);

    // A's full restore: the index knows nothing yet, so it reads everything, and learns both accounts.
    expect(index.startFor(changelog, 'a:')).toBeNull();
    const restoredA = await fullRead(a);
    expect(restoredA.ids).toEqual([1, 2, 3, 4, 5, 6]);
    expect(index.reads).toHaveLength(1);
    const first = index.reads[0]!;
    expect(first.from).toEqual({});
    expect([...first.seen].sort()).toEqual(['a:', 'b:']);
    const e = index.startFor(changelog, 'c:');
    expect(e).toEqual(first.ends);
    expect(Object.keys(e!)).toEqual(['0', '1']);
    // Both accounts wrote enough that the offsets skipped are real: something lies before E in every partition.
    expect(Object.values(e!).every((offset) => offset > 0)).toBe(true);

    // After E: a new account C writes its first records, and B one more commit.
    const c = await account('c:');
    await commit(c, [201, 202, 203], 1);
    await commit(b, [105], 3);

    // C's full restore starts at E: it scans neither A's records (all before E) nor A's end marker (at E).
    const restoredC = await fullRead(c);
    expect(restoredC.ids).toEqual([201, 202, 203]);
    expect(restoredC.records.every((r) => r.offset >= e![r.partition]!)).toBe(true);
    expect(index.reads).toHaveLength(2);
    const second = index.reads[1]!;
    expect(second.from).toEqual(e);
    expect([...second.seen].sort()).toEqual(['b:', 'c:']);
    // The index moved on to C's ends and knows C now.
    expect(index.startFor(changelog, 'c:')).toBeNull();
    expect(index.startFor(changelog, 'd:')).toEqual(second.ends);

    // B is known: its full restore reads from the beginning and gets every commit, before E and after.
    expect(index.startFor(changelog, 'b:')).toBeNull();
    const restoredB = await fullRead(b);
    expect(restoredB.ids).toEqual([101, 102, 103, 104, 105]);
    const third = index.reads[2]!;
    expect(third.from).toEqual({});
    expect([...third.seen].sort()).toEqual(['a:', 'b:', 'c:']);
    expect(restoredB.records.some((r) => r.offset < e![r.partition]!)).toBe(true);
  });

  it('a publisher without a key prefix (a single-account topic) neither uses nor teaches the index', async () => {
    const topics = uniqueTopics('clindex-off');
    const changelog = changelogName(kafkaBrokers(), topics.changelog);
    const index = new RecordingIndex();
    const a = await connectedPublisher(topics, { exactlyOnce: true, keyPrefix: 'a:', changelogIndex: index });
    open.push(a);
    await a.beginTransactions();
    await commit(a, [1, 2, 3], 1);
    await fullRead(a);
    const e = index.startFor(changelog, 'c:');
    expect(e).not.toBeNull();
    // Single-account topics (no prefix) neither use nor teach the index.
    const single = await connectedPublisher(topics, { exactlyOnce: true, changelogIndex: index, createTopics: false });
    open.push(single);
    const records: ChangelogRawRecord[] = [];
    await single.readChangelog({}, async (batch) => void records.push(...batch));
    expect(index.reads).toHaveLength(1);
    expect(index.startFor(changelog, 'c:')).toEqual(e);
    // It read from the beginning: every record, A's included (an empty prefix filters nothing).
    expect(records.some((r) => r.key.startsWith('a:e:'))).toBe(true);
  });
});
