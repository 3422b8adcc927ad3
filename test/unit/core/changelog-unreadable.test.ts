import { describe, expect, it } from 'vitest';
import {
  checkpointRecord,
  decodeChangelogRecord,
  EMPTY_CHANGELOG_CHECKPOINT,
  type ChangelogCheckpoint,
} from '../../../src/core/changelog.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import { keyedRecordDigest } from '../../../src/core/record-digest.js';

// What deletion detection remembers of unreadable records travels with the checkpoint in the Kafka changelog, so a
// Redis that lost every key is restored with it; a checkpoint written before these fields reads as "unknown".

describe('the changelog checkpoint and unreadable records', () => {
  it('round-trips the remembered digests and the deferral count', () => {
    const ckpt: ChangelogCheckpoint = {
      ...EMPTY_CHANGELOG_CHECKPOINT,
      txn: 7,
      epoch: 2,
      unreadable: ['00aa11bb22cc33dd', '00aa11bb22cc33dd', 'ffee'],
      unreadableCandidates: { '00aa11bb22cc33dd': [4, 9], ffee: [] },
      deferredSweeps: 3,
      deferredReason: 'new_unreadable',
    };
    const { key, value } = checkpointRecord(ckpt);
    expect(decodeChangelogRecord(key, Buffer.from(value))).toEqual({
      kind: 'checkpoint',
      checkpoint: ckpt,
      identity: null,
    });
  });

  it('reads a checkpoint written before the fields as unknown digests and no deferral', () => {
    const old = { v: 1, txn: 1, epoch: 1, watermark: 5, initialDone: true, sweep: null, lastSweepAt: 4 };
    const decoded = decodeChangelogRecord(
      'checkpoint',
      Buffer.from(JSON.stringify({ ...old, lastIncrementalAt: null })),
    );
    expect(decoded).toMatchObject({
      checkpoint: { unreadable: null, unreadableCandidates: null, deferredSweeps: 0, deferredReason: null },
    });
    // Written with digests but before their candidates: the candidates are unknown (every record is new once).
    const digestsOnly = { ...old, lastIncrementalAt: null, unreadable: ['ab'], deferredSweeps: 0 };
    expect(decodeChangelogRecord('checkpoint', Buffer.from(JSON.stringify(digestsOnly)))).toMatchObject({
      checkpoint: { unreadable: ['ab'], unreadableCandidates: null },
    });
  });

  it('refuses digests that are not short hex (never raw text)', () => {
    const bad = { ...JSON.parse(checkpointRecord(EMPTY_CHANGELOG_CHECKPOINT).value), unreadable: ['a@b.example'] };
    expect(() => decodeChangelogRecord('checkpoint', Buffer.from(JSON.stringify(bad)))).toThrow();
    const keyed = {
      ...JSON.parse(checkpointRecord(EMPTY_CHANGELOG_CHECKPOINT).value),
      unreadableCandidates: { x: [1] },
    };
    expect(() => decodeChangelogRecord('checkpoint', Buffer.from(JSON.stringify(keyed)))).toThrow();
  });
});

describe('keyedRecordDigest', () => {
  it('depends on the key and on every byte of the record, and equals the key digest of its JSON text', () => {
    const a = new FingerprintKey(Buffer.alloc(32, 1));
    const b = new FingerprintKey(Buffer.alloc(32, 2));
    const raw = { headline: 'x', email: 'someone@example.com' };
    expect(keyedRecordDigest(raw, a)).toBe(a.digest(JSON.stringify(raw)));
    expect(keyedRecordDigest(raw, a)).not.toBe(keyedRecordDigest(raw, b));
    expect(keyedRecordDigest({ ...raw, headline: 'y' }, a)).not.toBe(keyedRecordDigest(raw, a));
    expect(keyedRecordDigest(raw, a)).toMatch(/^[0-9a-f]{16}$/);
  });
});
