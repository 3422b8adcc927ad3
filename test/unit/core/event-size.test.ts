import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { EVENT_SCHEMAS, type ReviewEvent } from '../../../src/core/events.js';
import { diffReview } from '../../../src/core/diff.js';
import { firstDiff } from '../../helpers/first-diff.js';
import {
  deadLetterMessage,
  eventMessage,
  fitEvent,
  fitReviewEvents,
  jsonBytesBound,
  messageBytes,
  tooLargeReject,
  TRACE_CONTEXT_BYTES,
  type OutgoingMessage,
} from '../../../src/core/event-size.js';
import { chunkBySize } from '../../../src/kafka/publisher.js';
import type { Review } from '../../../src/core/review.js';

const MiB = 1024 * 1024;
const NOW = Date.UTC(2026, 10, 23, 12);

function review(over: Record<string, unknown> = {}): Review {
  return {
    id: 4711,
    updated_date: NOW,
    client_publication_status: 'APPROVED',
    pwr_publication_status: 'APPROVED',
    headline: 'Great',
    comments: 'Works.',
    email: 'someone@example.com',
    ...over,
  } as Review;
}

function created(r: Review): ReviewEvent {
  return firstDiff(r, NOW).events[0]!;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe('fitEvent', () => {
  it('returns an event that fits unchanged (the same object)', () => {
    const event = created(review());
    const fit = fitEvent(event, MiB);
    expect(fit).toEqual({ verdict: 'fits', event });
    expect(fit.verdict === 'fits' && fit.event).toBe(event);
  });

  it('measures what the publisher sends: value, key and headers in UTF-8, plus overhead', () => {
    const event = created(review({ comments: 'é'.repeat(1000) }));
    const message = eventMessage(event);
    expect(message.key).toBe('4711');
    expect(message.value).toBe(JSON.stringify(event));
    const exact =
      Buffer.byteLength(message.value) + 4 + 'content-type'.length + message.headers['content-type']!.length;
    expect(messageBytes(message)).toBeGreaterThan(exact);
    expect(messageBytes(message)).toBeLessThan(exact + 256);
  });

  it('cuts the largest free-text field first and names it; the id and everything else stay', () => {
    const event = created(review({ comments: 'c'.repeat(3 * MiB), headline: 'h'.repeat(10_000) }));
    const fit = fitEvent(event, MiB);
    expect(fit.verdict).toBe('truncated');
    if (fit.verdict !== 'truncated') return;
    expect(fit.truncatedFields).toEqual(['comments']);
    expect(fit.event.data.truncated_fields).toEqual(['comments']);
    expect(fit.event.id).toBe(event.id);
    expect(fit.event.data.review.headline).toBe(event.data.review.headline);
    expect(fit.event.data.review.email).toBe('someone@example.com');
    expect(fit.originalBytes).toBeGreaterThan(3 * MiB);
    const bytes = messageBytes(eventMessage(fit.event));
    expect(bytes).toBeLessThanOrEqual(MiB);
    // Cut close to the limit, not to nothing.
    expect(bytes).toBeGreaterThan(MiB - 4096);
    expect(EVENT_SCHEMAS['review.created'].safeParse(fit.event).success).toBe(true);
    // The original is not touched.
    expect(event.data.review.comments).toHaveLength(3 * MiB);
    expect(event.data).not.toHaveProperty('truncated_fields');
  });

  it('cuts several fields when one is not enough, and never splits a surrogate pair', () => {
    const event = created(review({ comments: '😀'.repeat(300_000), headline: '€'.repeat(300_000), nickname: 'n' }));
    const fit = fitEvent(event, 512 * 1024);
    expect(fit.verdict).toBe('truncated');
    if (fit.verdict !== 'truncated') return;
    expect(fit.truncatedFields.sort()).toEqual(['comments', 'headline']);
    expect(fit.event.data.review.nickname).toBe('n');
    expect(LONE_SURROGATE.test(fit.event.data.review.comments!)).toBe(false);
    expect(messageBytes(eventMessage(fit.event))).toBeLessThanOrEqual(512 * 1024);
  });

  it('gives a too_large reference, without content, when cutting text cannot make it fit', () => {
    const bulk = Array.from({ length: 50_000 }, (_, i) => i * 1_000_003);
    const event = created(review({ comments: 'secret words', scores: bulk }));
    const fit = fitEvent(event, 64 * 1024);
    expect(fit.verdict).toBe('too_large');
    if (fit.verdict !== 'too_large') return;
    expect(fit.reference).toEqual({
      review_id: 4711,
      event_type: 'review.created',
      original_bytes: messageBytes(eventMessage(event)),
      limit_bytes: 64 * 1024,
    });
    const reject = tooLargeReject(fit.reference);
    expect(reject).toMatchObject({ id: '4711', reason: 'too_large', detail: '(event):too_large' });
    expect(JSON.stringify(reject)).not.toMatch(/secret|example\.com/);
  });

  it('property: fits, truncated or too_large, always within the limit, deterministic, prefixes only', () => {
    const text = fc.oneof(fc.string({ maxLength: 3000 }), fc.string({ unit: 'grapheme', maxLength: 2000 }));
    fc.assert(
      fc.property(
        fc.record({ comments: text, headline: text, location: text, extra_note: text }),
        fc.integer({ min: 1500, max: 12_000 }),
        (fields, limit) => {
          const event = created(review(fields));
          const fit = fitEvent(event, limit);
          expect(fitEvent(event, limit)).toEqual(fit);
          if (fit.verdict === 'fits') {
            expect(messageBytes(eventMessage(event))).toBeLessThanOrEqual(limit);
          } else if (fit.verdict === 'truncated') {
            expect(messageBytes(eventMessage(fit.event))).toBeLessThanOrEqual(limit);
            const before = event.data.review as Record<string, unknown>;
            const after = fit.event.data.review as Record<string, unknown>;
            const changed = Object.keys(before).filter((k) => before[k] !== after[k]);
            expect(changed.sort()).toEqual([...fit.truncatedFields].sort());
            for (const k of changed) expect((before[k] as string).startsWith(after[k] as string)).toBe(true);
            expect(EVENT_SCHEMAS['review.created'].safeParse(fit.event).success).toBe(true);
          } else {
            expect(fit.reference.limit_bytes).toBe(limit);
            expect(Object.keys(fit.reference).sort()).toEqual([
              'event_type',
              'limit_bytes',
              'original_bytes',
              'review_id',
            ]);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('fitReviewEvents', () => {
  const changed = (over: Record<string, unknown>): ReviewEvent[] => {
    const before = firstDiff(review(), NOW).next!;
    const after = review({ client_publication_status: 'REJECTED', updated_date: NOW + 1, ...over });
    return diffReview({
      previous: before,
      review: after,
      detection: 'incremental',
      source: 'urn:reviews-bridge:test',
      fetchedAt: NOW + 1,
      suppressCreated: false,
    }).events;
  };

  it('publishes all events of a review, cutting those over the limit', () => {
    const events = changed({ comments: 'c'.repeat(200_000) });
    expect(events.map((e) => e.type)).toEqual(['review.status_changed', 'review.updated']);
    const fit = fitReviewEvents(events, 64 * 1024);
    expect(fit.verdict).toBe('publish');
    if (fit.verdict !== 'publish') return;
    expect(fit.events.map((e) => e.sequence)).toEqual([2, 3]);
    expect(fit.truncated).toHaveLength(2);
    expect(fit.events.every((e) => messageBytes(eventMessage(e)) <= 64 * 1024)).toBe(true);
  });

  it('publishes none when one cannot fit: one too_large dead letter, no gap in the sequence', () => {
    const events = changed({ scores: Array.from({ length: 20_000 }, (_, i) => i * 1_000_003) });
    const fit = fitReviewEvents(events, 64 * 1024);
    expect(fit.verdict).toBe('too_large');
    if (fit.verdict !== 'too_large') return;
    expect(fit.reject).toMatchObject({ id: '4711', reason: 'too_large' });
  });
});

describe('deadLetterMessage', () => {
  const dl = (raw: unknown, reason: 'schema' | 'too_deep' | 'string_too_long' = 'schema') => ({
    reject: { id: '9', reason, detail: `comments:${reason}`, raw },
    pass: 'incremental',
    detectedAt: NOW,
  });

  it('carries the record, the kind and the detail when it fits', () => {
    const m = deadLetterMessage(dl({ id: 9, comments: 1 }), 'acme', MiB);
    expect(m.key).toBe('9');
    expect(m.headers).toEqual({
      'content-type': 'application/json',
      'dlq-reason': 'schema',
      'dlq-detail': 'comments:schema',
    });
    expect(JSON.parse(m.value)).toEqual({
      account: 'acme',
      reason: 'schema',
      detail: 'comments:schema',
      pass: 'incremental',
      detected_at: new Date(NOW).toISOString(),
      record: { id: 9, comments: 1 },
    });
  });

  it('replaces a record over the limit by a note, and the message fits', () => {
    const m = deadLetterMessage(dl({ id: 9, comments: 'x'.repeat(3 * MiB) }, 'string_too_long'), 'acme', MiB);
    expect(messageBytes(m)).toBeLessThanOrEqual(MiB);
    expect(JSON.parse(m.value)).toMatchObject({
      reason: 'string_too_long',
      record: null,
      record_omitted: { reason: 'too_large', limit_bytes: MiB },
    });
  });

  it('withholds a too deep record without serializing it recursively', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = { a: deep };
    const m = deadLetterMessage(dl({ id: 9, deep }, 'too_deep'), 'acme', MiB);
    expect(JSON.parse(m.value)).toMatchObject({ record: null, record_omitted: { reason: 'too_deep' } });
    // Even a kind that does not withhold it survives such a record (a deep record that is also too large).
    const m2 = deadLetterMessage(dl({ id: 9, deep }), 'acme', MiB);
    expect(JSON.parse(m2.value)).toMatchObject({ record: null });
  });
});

describe('chunkBySize', () => {
  it('property: keeps order, and every chunk is within the limit or a single message', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 3000 }), { maxLength: 60 }),
        fc.integer({ min: 1, max: 5000 }),
        (sizes, limit) => {
          const items = sizes.map((bytes, i) => ({ bytes, i }));
          const chunks = chunkBySize(items, limit);
          expect(chunks.flat()).toEqual(items);
          for (const chunk of chunks) {
            expect(chunk.length).toBeGreaterThan(0);
            if (chunk.length > 1) expect(chunk.reduce((s, c) => s + c.bytes, 0)).toBeLessThanOrEqual(limit);
          }
        },
      ),
    );
  });

  it('keeps a normal page of events in one send', () => {
    const messages: OutgoingMessage[] = Array.from({ length: 100 }, (_, i) =>
      eventMessage(created(review({ id: i + 1, comments: 'x'.repeat(2000) }))),
    );
    expect(
      chunkBySize(
        messages.map((m) => ({ bytes: messageBytes(m) })),
        MiB,
      ),
    ).toHaveLength(1);
  });
});

describe('events and their traceparent', () => {
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it('a stamped event carries it in the envelope and as a traceparent header; an unstamped one in neither', () => {
    const event = created(review());
    expect(eventMessage(event).headers).toEqual({ 'content-type': 'application/cloudevents+json' });
    const message = eventMessage({ ...event, traceparent: tp });
    expect(message.headers).toEqual({ 'content-type': 'application/cloudevents+json', traceparent: tp });
    expect(JSON.parse(message.value)).toEqual({ ...event, traceparent: tp });
    expect(messageBytes(message) - messageBytes(eventMessage(event))).toBe(TRACE_CONTEXT_BYTES);
  });

  it('property: an event fitted without a traceparent still fits once stamped, and is cut the same either way', () => {
    const text = fc.string({ maxLength: 3000 });
    fc.assert(
      fc.property(fc.record({ comments: text, headline: text }), fc.integer({ min: 1500, max: 8_000 }), (f, limit) => {
        const event = created(review(f));
        const fit = fitEvent(event, limit);
        if (fit.verdict === 'too_large') return;
        expect(messageBytes(eventMessage({ ...fit.event, traceparent: tp }))).toBeLessThanOrEqual(limit);
        // Stamped first (the reserve is then already spent): the same cut.
        const stampedFit = fitEvent({ ...event, traceparent: tp }, limit);
        expect(stampedFit.verdict).toBe(fit.verdict);
        if (stampedFit.verdict !== 'too_large') {
          expect(stampedFit.event.data.review).toEqual(fit.event.data.review);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('jsonBytesBound', () => {
  it('is never below the UTF-8 bytes of JSON.stringify (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.string({ unit: 'binary' }), (value, text) =>
        [value, text, { text, value }, [text, value]].every(
          (v) => jsonBytesBound(v) >= Buffer.byteLength(JSON.stringify(v)),
        ),
      ),
      { numRuns: 200 },
    );
  }, 60_000);

  it('decides for fitEvent only what measuring would decide', () => {
    const event = created(review({ comments: 'é'.repeat(3_000) }));
    // As sent: the message plus the traceparent every event's size reserves.
    const exact = messageBytes(eventMessage(event)) + TRACE_CONTEXT_BYTES;
    expect(fitEvent(event, exact).verdict).toBe('fits');
    expect(fitEvent(event, exact - 1).verdict).toBe('truncated');
  });
});
