import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, fingerprint, FINGERPRINT_FIELDS } from '../../../src/core/snapshot-entry.js';
import type { Review } from '../../../src/core/review.js';

const base: Review = {
  id: 1,
  updated_date: 1_700_000_000_000,
  client_publication_status: 'APPROVED',
  pwr_publication_status: 'APPROVED',
  headline: 'h',
  comments: 'c',
};

describe('snapshot entry codec', () => {
  it('round-trips any entry (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.constantFrom('PENDING', 'APPROVED', 'REJECTED', 'ON_HOLD', 'ÜBERPRÜFT'),
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.integer({ min: 0, max: 2 ** 47 }),
        (client, pwr, updatedDate, sequence, observedAt) => {
          const entry = { client, pwr, updatedDate, sequence, observedAt, ...fingerprint(base) };
          expect(decodeEntry(encodeEntry(entry))).toEqual(entry);
        },
      ),
    );
  });

  it('stays within 64 bytes for the usual statuses (the listpack value limit)', () => {
    const entry = {
      client: 'APPROVED',
      pwr: 'REJECTED',
      updatedDate: Date.now(),
      sequence: 7,
      observedAt: Date.now(),
      ...fingerprint(base),
    };
    expect(encodeEntry(entry).length).toBeLessThanOrEqual(64);
  });

  it('refuses an unknown format version', () => {
    const buf = encodeEntry({
      client: 'PENDING',
      pwr: 'PENDING',
      updatedDate: 1,
      sequence: 1,
      observedAt: 1,
      ...fingerprint(base),
    });
    buf[0] = 99;
    expect(() => decodeEntry(buf)).toThrow(/version 99/);
  });

  it('writes zeros past a digest shorter than 8 bytes (the buffer comes unzeroed from the pool)', () => {
    const entry = { client: 'X', pwr: 'Y', updatedDate: 1, sequence: 1, observedAt: 1, ...fingerprint(base) };
    for (const digest of ['abcd', '', 'zz']) {
      const decoded = decodeEntry(encodeEntry({ ...entry, digest }));
      expect(decoded.digest).toBe(digest === 'abcd' ? 'abcd000000000000' : '0000000000000000');
    }
  });
});

describe('fingerprint', () => {
  it('ignores statuses and updated_date, treats null and missing alike', () => {
    const a = fingerprint(base);
    expect(fingerprint({ ...base, updated_date: 5, client_publication_status: 'REJECTED' })).toEqual(a);
    expect(fingerprint({ ...base, location: null })).toEqual(a);
  });

  it('changes exactly the hash of the edited field', () => {
    const a = fingerprint(base);
    const b = fingerprint({ ...base, comments: 'edited' });
    expect(b.digest).not.toBe(a.digest);
    const changed = FINGERPRINT_FIELDS.filter((_, i) => a.fieldHashes[i] !== b.fieldHashes[i]);
    expect(changed).toEqual(['comments']);
  });

  it('covers unknown fields in the (other) slot regardless of key order', () => {
    const x = fingerprint({ ...base, extra1: 1, extra2: 'b' } as Review);
    const y = fingerprint({ ...base, extra2: 'b', extra1: 1 } as Review);
    expect(x).toEqual(y);
    expect(x.digest).not.toBe(fingerprint(base).digest);
  });
});
