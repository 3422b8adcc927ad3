import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import { diffReview } from '../../../src/core/diff.js';
import { decodeEntry, encodeEntry, fingerprint, FINGERPRINT_FIELDS } from '../../../src/core/snapshot-entry.js';
import { checkpointRecord, decodeChangelogRecord, entryRecord } from '../../../src/core/changelog.js';
import { EMPTY_CHECKPOINT } from '../../../src/core/checkpoint.js';
import { review } from '../../helpers/fakes.js';

// Fingerprints that leave the process are keyed: without the key, an id or a changelog row confirms nothing about a
// review's fields (an e-mail address above all). Entries written before keys keep working without a single event.

const key = new FingerprintKey(Buffer.alloc(32, 1));
const other = new FingerprintKey(Buffer.alloc(32, 2));
const base = { detection: 'sweep' as const, source: 'urn:t', fetchedAt: 1, suppressCreated: false };

describe('FingerprintKey', () => {
  it('keys the digest and every field hash: another key or no key gives other values, the same key the same', () => {
    const r = review(1, { email: 'someone@example.com' });
    const a = fingerprint(r, key);
    expect(fingerprint(r, key)).toEqual(a);
    expect(a.keyId).toBe(key.id);
    expect(fingerprint(r, other).digest).not.toBe(a.digest);
    const unkeyed = fingerprint(r, null);
    expect(unkeyed.keyId).toBeNull();
    expect(unkeyed.digest).not.toBe(a.digest);
    expect(a.fieldHashes).not.toEqual(unkeyed.fieldHashes);
    expect(key.id).not.toBe(other.id);
  });

  it("maps each field's 16-bit space one to one (a permutation), so changed fields are still named exactly", () => {
    const seen = new Set<number>();
    for (let v = 0; v < 65_536; v++) seen.add(key.fieldHash(4, v));
    expect(seen.size).toBe(65_536);
  });

  it('keys field hashes per review: an equal e-mail address gives unrelated hashes in two reviews', () => {
    // The changelog must not link reviews by author: a field hash that only depends on the value (even through a
    // secret permutation) is equal wherever the value is.
    const email = FINGERPRINT_FIELDS.indexOf('email');
    const differing = [1, 2, 3, 4, 5, 6, 7, 8].filter(
      (id) =>
        fingerprint(review(id, { email: 'same@example.com' }), key).fieldHashes[email] !==
        fingerprint(review(100 + id, { email: 'same@example.com' }), key).fieldHashes[email],
    );
    expect(differing.length).toBeGreaterThanOrEqual(7);
    // Within one review an equal value keeps its hash, and an edit changes it: changed fields are still named.
    const r = review(9, { email: 'same@example.com' });
    expect(fingerprint(r, key).fieldHashes).toEqual(fingerprint({ ...r }, key).fieldHashes);
    expect(fingerprint({ ...r, email: 'other@example.com' }, key).fieldHashes[email]).not.toBe(
      fingerprint(r, key).fieldHashes[email],
    );
  });

  it('refuses a key shorter than 16 bytes', () => {
    expect(() => new FingerprintKey(Buffer.alloc(8))).toThrow(/16 bytes/);
  });
});

describe('the diff across keys', () => {
  it('an entry written before keys compares unkeyed: no event for an unchanged review, and it is re-keyed', () => {
    const r = review(7);
    const legacy = diffReview({ ...base, previous: null, review: r }).next!;
    expect(legacy.keyId).toBeNull();
    const result = diffReview({ ...base, previous: legacy, review: r, fetchedAt: 2, key });
    expect(result.events).toEqual([]);
    expect(result.next).toMatchObject({ keyId: key.id, sequence: legacy.sequence, digest: fingerprint(r, key).digest });
  });

  it('an entry written before keys still yields review.updated for a real edit, naming the field', () => {
    const legacy = diffReview({ ...base, previous: null, review: review(7) }).next!;
    const edited = review(7, { headline: 'changed' });
    const result = diffReview({ ...base, previous: legacy, review: edited, fetchedAt: 2, key });
    expect(result.events.map((e) => e.type)).toEqual(['review.updated']);
    expect(result.events[0]!.data.changed_fields).toEqual(['headline']);
  });

  it('an entry of a lost key is adopted without an event (its content cannot be compared); statuses still are', () => {
    const old = diffReview({ ...base, previous: null, review: review(7), key: other }).next!;
    const same = diffReview({ ...base, previous: old, review: review(7, { headline: 'x' }), fetchedAt: 2, key });
    expect(same.events).toEqual([]);
    expect(same.next?.keyId).toBe(key.id);
    const approved = review(7, { client_publication_status: 'APPROVED', updated_date: 1_800_000_000_000 });
    const moved = diffReview({ ...base, previous: old, review: approved, fetchedAt: 2, key });
    expect(moved.events.map((e) => [e.type, e.sequence])).toEqual([['review.status_changed', 2]]);
  });

  it('event ids depend on the key (nobody without it can recompute one from a guessed field)', () => {
    const r = review(3, { email: 'guess@example.com' });
    const a = diffReview({ ...base, previous: null, review: r, key }).events[0]!.id;
    const b = diffReview({ ...base, previous: null, review: r, key: other }).events[0]!.id;
    const unkeyed = diffReview({ ...base, previous: null, review: r }).events[0]!.id;
    expect(new Set([a, b, unkeyed]).size).toBe(3);
  });
});

describe('changelog records', () => {
  it('round-trip entries, deletion markers and checkpoints', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 31 }),
        (id, deleted, seq) => {
          const entry = {
            ...diffReview({ ...base, previous: null, review: review(id % 1000), key }).next!,
            sequence: seq,
          };
          const rec = entryRecord(id, entry, deleted);
          expect(decodeChangelogRecord(rec.key, rec.value)).toEqual({ kind: 'entry', id, entry, deleted });
        },
      ),
    );
    const ckpt = {
      ...EMPTY_CHECKPOINT,
      watermark: 5,
      initialDone: true,
      sweep: { kind: 'sweep' as const, cursor: 'c', startedAt: 1, seen: 2 },
      txn: 9,
      epoch: 3,
    };
    const rec = checkpointRecord(ckpt);
    expect(decodeChangelogRecord(rec.key, Buffer.from(rec.value))).toEqual({
      kind: 'checkpoint',
      checkpoint: ckpt,
      identity: null,
    });
  });

  it('refuses to write an unkeyed entry, ignores foreign keys and tombstones, and fails on a broken record', () => {
    const legacy = diffReview({ ...base, previous: null, review: review(1) }).next!;
    expect(() => entryRecord(1, legacy)).toThrow(/keyed/);
    expect(decodeChangelogRecord('restore-marker', Buffer.from('x'))).toBeNull();
    expect(decodeChangelogRecord('e:1', null)).toBeNull();
    expect(() => decodeChangelogRecord('e:1', Buffer.from([9, 1, 2]))).toThrow();
  });

  it('keeps a keyed entry within the 64 bytes that keep Redis buckets compact', () => {
    const entry = diffReview({ ...base, previous: null, review: review(1), key }).next!;
    expect(encodeEntry(entry).length).toBeLessThanOrEqual(64);
    expect(decodeEntry(encodeEntry(entry))).toEqual(entry);
  });
});
