import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  deletedEvent,
  eventId,
  heartbeatEvent,
  EVENT_SCHEMAS,
  ReviewDeletedEventSchema,
  ReviewHeartbeatEventSchema,
} from '../../../src/core/events.js';
import { firstDiff } from '../../helpers/first-diff.js';
import { renderSchemas } from '../../../src/core/json-schemas.js';

describe('event ids', () => {
  it('are deterministic name-based UUIDs of source, review, sequence and state', () => {
    const id = eventId('urn:a', 1, 1, 'x');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(eventId('urn:a', 1, 1, 'x')).toBe(id);
    expect(
      new Set([
        id,
        eventId('urn:b', 1, 1, 'x'),
        eventId('urn:a', 2, 1, 'x'),
        eventId('urn:a', 1, 2, 'x'),
        eventId('urn:a', 1, 1, 'y'),
      ]).size,
    ).toBe(5);
  });

  it('are the version-5 layout of the SHA-1 of their name, byte for byte (property)', () => {
    // The UUID as RFC 9562 builds it from the digest's bytes: version 5 in byte 6, variant 10 in byte 8.
    const reference = (source: string, review: number, sequence: number, state: string): string => {
      const d = createHash('sha1').update(`${source}\n${review}\n${sequence}\n${state}`).digest();
      d[6] = (d[6]! & 0x0f) | 0x50;
      d[8] = (d[8]! & 0x3f) | 0x80;
      const h = d.toString('hex', 0, 16);
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
    };
    fc.assert(
      fc.property(fc.string(), fc.nat(), fc.integer({ min: 1 }), fc.string(), (source, review, sequence, state) => {
        expect(eventId(source, review, sequence, state)).toBe(reference(source, review, sequence, state));
      }),
      { numRuns: 500 },
    );
  });
});

describe('checked-in JSON Schemas', () => {
  it('are current with the zod definitions (run `npm run schemas` after changing them)', () => {
    const rendered = renderSchemas();
    expect([...rendered.keys()].sort()).toEqual([
      'review.created.v1.json',
      'review.deleted.v1.json',
      'review.heartbeat.v1.json',
      'review.state.v1.json',
      'review.status_changed.v1.json',
      'review.updated.v1.json',
    ]);
    for (const [name, text] of rendered) {
      expect(readFileSync(new URL(`../../../schemas/${name}`, import.meta.url), 'utf8'), name).toBe(text);
    }
  });
});

describe('review.deleted and review.heartbeat builders', () => {
  const previous = {
    client_publication_status: 'APPROVED',
    pwr_publication_status: 'PENDING',
    updated_date: 5,
    sequence: 4,
  };

  it('review.deleted continues the sequence, has a deterministic id and fits its schema', () => {
    const a = deletedEvent('urn:a', { id: 9, previous, stateDigest: 's' }, 1_000);
    expect(a.sequence).toBe(5);
    expect(a.subject).toBe('9');
    expect(a.time).toBe(new Date(1_000).toISOString());
    expect(ReviewDeletedEventSchema.parse(a)).toEqual(a);
    // Re-detected later (after a crash): same id; another state or review: another id.
    expect(deletedEvent('urn:a', { id: 9, previous, stateDigest: 's' }, 2_000).id).toBe(a.id);
    expect(deletedEvent('urn:a', { id: 9, previous, stateDigest: 't' }, 1_000).id).not.toBe(a.id);
    expect(deletedEvent('urn:a', { id: 8, previous, stateDigest: 's' }, 1_000).id).not.toBe(a.id);
  });

  it('review.heartbeat carries watermark, last complete poll and epoch, and fits its schema', () => {
    const beat = heartbeatEvent({
      source: 'urn:a',
      account: 'acme',
      watermark: 10,
      lastCompletePoll: null,
      leaseEpoch: 7,
      paused: true,
      now: 20,
    });
    expect(ReviewHeartbeatEventSchema.parse(beat)).toEqual(beat);
    expect(beat.data).toEqual({
      account: 'acme',
      watermark: new Date(10).toISOString(),
      last_complete_poll: null,
      lease_epoch: 7,
      paused: true,
    });
    expect(
      heartbeatEvent({
        source: 'urn:a',
        account: 'acme',
        watermark: 10,
        lastCompletePoll: null,
        leaseEpoch: 7,
        paused: true,
        now: 21,
      }).id,
    ).not.toBe(beat.id);
  });
});

describe('the traceparent attribute (CloudEvents distributed tracing)', () => {
  const event = firstDiff(
    {
      id: 12,
      updated_date: 1_700_000_000_000,
      client_publication_status: 'APPROVED',
      pwr_publication_status: 'APPROVED',
    },
    1_700_000_000_000,
  ).events[0]!;
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it('is optional: an event is valid with it and without it, and it is kept by parsing', () => {
    expect(EVENT_SCHEMAS['review.created'].safeParse(event).success).toBe(true);
    const parsed = EVENT_SCHEMAS['review.created'].parse({ ...event, traceparent: tp });
    expect(parsed.traceparent).toBe(tp);
    expect(ReviewDeletedEventSchema.safeParse({ ...deletedEvent('urn:a', deleted, 1), traceparent: tp }).success).toBe(
      true,
    );
  });

  it('must be a W3C traceparent', () => {
    for (const bad of ['', '00-abc-def-01', tp.toUpperCase(), `${tp}-extra`]) {
      expect(EVENT_SCHEMAS['review.created'].safeParse({ ...event, traceparent: bad }).success, bad).toBe(false);
    }
  });

  it('is in the published JSON Schemas as an optional property', () => {
    const schema = JSON.parse(renderSchemas().get('review.created.v1.json')!) as {
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(schema.properties).toHaveProperty('traceparent');
    expect(schema.required).not.toContain('traceparent');
  });
});

const deleted = {
  id: 3,
  previous: { client_publication_status: 'APPROVED', pwr_publication_status: 'APPROVED', updated_date: 1, sequence: 2 },
  stateDigest: 'd',
};
