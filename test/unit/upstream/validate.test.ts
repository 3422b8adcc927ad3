import { describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';
import { listingRecords, rejectId, validateRecords } from '../../../src/upstream/validate.js';
import { isUpstreamError } from '../../../src/upstream/errors.js';
import { REJECT_KINDS } from '../../../src/core/reject.js';
import { wordsOutsideVocabulary } from '../../helpers/reason-vocabulary.js';

const good = (over: Record<string, unknown> = {}) => ({
  id: 1,
  updated_date: 1_700_000_000_000,
  client_publication_status: 'APPROVED',
  pwr_publication_status: 'APPROVED',
  headline: 'Great',
  email: 'someone@example.com',
  ...over,
});

describe('listingRecords', () => {
  it('returns the reviews array', () => {
    expect(listingRecords({ count: 1, reviews: [1] })).toEqual([1]);
  });

  it.each([[null], [[]], ['text'], [{}], [{ reviews: null }], [{ reviews: {} }]])(
    'treats %j as a (retryable) body error',
    (envelope) => {
      let caught: unknown;
      try {
        listingRecords(envelope);
      } catch (err) {
        caught = err;
      }
      expect(isUpstreamError(caught, 'body')).toBe(true);
      expect((caught as { retryable: boolean }).retryable).toBe(true);
    },
  );
});

describe('validateRecords', () => {
  it('keeps lenient fields lenient: null or missing optionals, unknown fields kept', () => {
    const { reviews, rejects } = validateRecords([
      good({ headline: null, rating: undefined, comments: null, extra_field: { nested: true } }),
      {
        id: 2,
        updated_date: 1_000_000_000_000,
        client_publication_status: 'PENDING',
        pwr_publication_status: 'PENDING',
      },
    ]);
    expect(rejects).toEqual([]);
    expect(reviews).toHaveLength(2);
    expect(reviews[0]).toHaveProperty('extra_field', { nested: true });
  });

  it('separates bad records from good ones and never fails the page', () => {
    const onReject = vi.fn();
    const records = [
      good({ id: 1 }),
      good({ id: 'abc' }),
      good({ id: 3, updated_date: undefined }),
      good({ id: 4, client_publication_status: 42 }),
      good({ id: 5, updated_date: 1.5 }),
      'not a record',
      good({ id: 7 }),
    ];
    const { reviews, rejects } = validateRecords(records, { onReject });
    expect(reviews.map((r) => r.id)).toEqual([1, 7]);
    expect(rejects.map((r) => [r.id, r.reason, r.detail])).toEqual([
      ['abc', 'schema', 'id:invalid_type'],
      ['3', 'schema', 'updated_date:invalid_type'],
      ['4', 'schema', 'client_publication_status:invalid_type'],
      ['5', 'schema', 'updated_date:invalid_type'],
      [null, 'malformed', '(record):malformed'],
    ]);
    expect(rejects[0]!.raw).toBe(records[1]);
    expect(onReject.mock.calls).toEqual([['schema'], ['schema'], ['schema'], ['schema'], ['malformed']]);
  });

  it('never puts a value of the record into the reason', () => {
    fc.assert(
      fc.property(fc.emailAddress(), fc.string({ minLength: 6 }), (email, secretish) => {
        const { rejects } = validateRecords([
          { id: secretish, updated_date: email, client_publication_status: email, pwr_publication_status: [email] },
        ]);
        const { reason, detail } = rejects[0]!;
        // Known words only: a generated string may be part of one ("_date", "invali").
        expect(REJECT_KINDS).toContain(reason);
        expect(wordsOutsideVocabulary(detail)).toEqual([]);
        return true;
      }),
    );
  });

  it('accepts unknown statuses, counts them, compares case-insensitively', () => {
    const onUnknownStatus = vi.fn();
    const { reviews, rejects } = validateRecords(
      [
        good({ client_publication_status: 'approved', pwr_publication_status: 'Pending' }),
        good({ id: 2, client_publication_status: 'ARCHIVED', pwr_publication_status: 'REJECTED' }),
      ],
      { onUnknownStatus },
    );
    expect(rejects).toEqual([]);
    expect(reviews[1]!.client_publication_status).toBe('ARCHIVED');
    expect(onUnknownStatus.mock.calls).toEqual([['client_publication_status']]);
  });
});

describe('rejectId', () => {
  it('reads integer and token-like ids only', () => {
    expect(rejectId({ id: 12 })).toBe('12');
    expect(rejectId({ id: 'r-12' })).toBe('r-12');
    expect(rejectId({ id: 'has space@x.com' })).toBeNull();
    expect(rejectId({ id: {} })).toBeNull();
    expect(rejectId(null)).toBeNull();
  });
});
