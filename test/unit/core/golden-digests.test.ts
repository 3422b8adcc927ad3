import { describe, expect, it } from 'vitest';
import { diffReview } from '../../../src/core/diff.js';
import { eventId } from '../../../src/core/events.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import {
  decodeEntry,
  encodeEntry,
  fingerprint,
  fingerprintSource,
  slotFieldHashesOf,
  type SnapshotEntry,
} from '../../../src/core/snapshot-entry.js';
import type { Review } from '../../../src/core/review.js';

// Values computed by the code before the page path was optimised (issue 19, CPU per review): event ids, digests and
// field hashes are stored in Redis, in the Kafka changelog and by consumers, so any change to them would make an
// upgraded bridge re-publish every review. These pins fail if a faster implementation computes anything else.

const review = {
  id: 42,
  updated_date: 1_700_000_000_000,
  client_publication_status: 'APPROVED',
  pwr_publication_status: 'PENDING',
  headline: 'Grüße ✓',
  rating: 4,
  comments: null,
  email: 'a@b.example',
  merchant_id: 7,
  zeta: { n: [1, 'x'] },
  alpha: true,
  nothing: null,
} as Review;
const key = new FingerprintKey(Buffer.from('0123456789abcdef0123456789abcdef'));
// Entry format 3: field hashes keyed per review.
const KEYED = {
  digest: '22a32b3f82d1cf30',
  fieldHashes: [
    2337, 36819, 37913, 2633, 25232, 20380, 30890, 46915, 25403, 36257, 32453, 46654, 2230, 62051, 15844, 57014, 18513,
  ],
  keyId: 56231,
};
// Entry format 2 (before per-review field hashes): the same digest, field hashes keyed per field only.
const SLOT_KEYED = {
  ...KEYED,
  fieldHashes: [
    63557, 45804, 35879, 3587, 36932, 58001, 63078, 1385, 20755, 52125, 15479, 49849, 59182, 23314, 52768, 8159, 175,
  ],
  fieldHashForm: 'slot' as const,
};
const UNKEYED = {
  digest: '8b31944fc2ffb460',
  fieldHashes: [
    33924, 60138, 7385, 7385, 62312, 7385, 7385, 7385, 7385, 7385, 7385, 61255, 7385, 7385, 7385, 7385, 23019,
  ],
  keyId: null,
};

describe('digests and ids stay those of earlier versions', () => {
  it('event ids', () => {
    expect(eventId('urn:reviews-bridge:acct', 42, 3, 'review.updated:1|A|B|0011223344556677')).toBe(
      'e5643ea4-0a52-5040-89ab-53348fd609f7',
    );
  });

  it('fingerprints, keyed and unkeyed', () => {
    expect(fingerprint(review, key)).toEqual(KEYED);
    expect(fingerprint(review, null)).toEqual(UNKEYED);
    expect(slotFieldHashesOf(fingerprintSource(review, key), key)).toEqual(SLOT_KEYED.fieldHashes);
  });

  it('the created event and entry of the diff', () => {
    const result = diffReview({
      previous: null,
      review,
      detection: 'initial',
      source: 'urn:x',
      fetchedAt: 5,
      suppressCreated: false,
      key,
    });
    expect(result.events.map((e) => e.id)).toEqual(['9194aa08-22e9-556a-9c2f-3304b243ab11']);
    expect(result.next).toEqual({
      client: 'APPROVED',
      pwr: 'PENDING',
      updatedDate: 1_700_000_000_000,
      observedAt: 5,
      sequence: 1,
      ...KEYED,
    });
  });

  it('an entry written before keys is compared in the unkeyed form and re-keyed without an event', () => {
    const legacy: SnapshotEntry = {
      client: 'APPROVED',
      pwr: 'PENDING',
      updatedDate: 1_700_000_000_000,
      observedAt: 1,
      sequence: 4,
      ...UNKEYED,
    };
    const input = { review, detection: 'sweep' as const, source: 'urn:x', fetchedAt: 5, suppressCreated: false, key };
    // Re-keyed, and observed by this read (deletion detection's re-check sees that a read listed it).
    expect(diffReview({ ...input, previous: legacy })).toEqual({
      events: [],
      next: { ...legacy, ...KEYED, observedAt: 5 },
    });
    // An edit of the headline since: named by comparing the unkeyed field hashes.
    const edited = diffReview({ ...input, previous: legacy, review: { ...review, headline: 'other' } });
    expect(edited.events.map((e) => [e.type, e.data.changed_fields])).toEqual([['review.updated', ['headline']]]);
    expect(edited.next).toMatchObject({ keyId: KEYED.keyId, sequence: 5 });
  });

  it('an entry of format 2 (field hashes keyed per field) publishes nothing when unchanged and is rewritten', () => {
    const slotKeyed: SnapshotEntry = {
      client: 'APPROVED',
      pwr: 'PENDING',
      updatedDate: 1_700_000_000_000,
      observedAt: 1,
      sequence: 4,
      ...SLOT_KEYED,
    };
    // As read back from Redis or the changelog: the version byte says which form its field hashes have.
    expect(encodeEntry(slotKeyed)[0]).toBe(2);
    expect(decodeEntry(encodeEntry(slotKeyed))).toEqual(slotKeyed);
    const input = { review, detection: 'sweep' as const, source: 'urn:x', fetchedAt: 5, suppressCreated: false, key };
    const unchanged = diffReview({ ...input, previous: slotKeyed });
    expect(unchanged).toEqual({
      events: [],
      next: { ...slotKeyed, fieldHashes: KEYED.fieldHashes, fieldHashForm: undefined, observedAt: 5 },
    });
    expect(encodeEntry(unchanged.next!)[0]).toBe(3);
    expect(decodeEntry(encodeEntry(unchanged.next!))).not.toHaveProperty('fieldHashForm');
    // An edit of the headline since: named by comparing the field hashes of format 2.
    const edited = diffReview({ ...input, previous: slotKeyed, review: { ...review, headline: 'other' } });
    expect(edited.events.map((e) => [e.type, e.data.changed_fields])).toEqual([['review.updated', ['headline']]]);
    expect(edited.next).toMatchObject({ keyId: KEYED.keyId, sequence: 5 });
    expect(edited.next).not.toHaveProperty('fieldHashForm');
  });
});
