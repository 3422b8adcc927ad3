import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ForeignMessageError, parseReviewEvent } from '../../../src/consumer/kit.js';
import { loadConfig } from '../../../src/config/config.js';
import { diffReview } from '../../../src/core/diff.js';
import { eventMessage, messageBytes } from '../../../src/core/event-size.js';
import {
  dataschemaOf,
  deletedEvent,
  heartbeatEvent,
  type RecordType,
  type ReviewEvent,
} from '../../../src/core/events.js';
import { registrySchema } from '../../../src/core/json-schemas.js';
import {
  binaryEventMessage,
  frame,
  structuredFromBinary,
  unframe,
  type RecordContracts,
  type WireFormat,
} from '../../../src/core/wire-format.js';
import { RecordEncoder } from '../../../src/kafka/encoding.js';
import { MINIMAL_ENV } from '../../helpers/config.js';
import { silentLogger, review } from '../../helpers/fakes.js';
import { firstDiff } from '../../helpers/first-diff.js';

// What a registry's contracts change in the records (src/core/wire-format.ts, src/kafka/encoding.ts): dataschema
// names the registered schema; the confluent wire format frames the value (binary content mode) and the consumer
// kit reads it back into the same event; the schemas registered (draft-07) accept what is written.

const REGISTRY = 'https://registry.example.com/apis/ccompat/v7';
const TYPES: RecordType[] = [
  'review.created',
  'review.status_changed',
  'review.updated',
  'review.deleted',
  'review.heartbeat',
  'review.state',
];

function contracts(wire: WireFormat): RecordContracts {
  const byType = Object.fromEntries(
    TYPES.map((type, i) => [type, { id: 1000 + i, url: `${REGISTRY}/schemas/ids/${1000 + i}` }]),
  ) as RecordContracts['byType'];
  return { wire, byType };
}

const config = loadConfig(MINIMAL_ENV);

function encoder(wire: WireFormat | null): RecordEncoder {
  return new RecordEncoder(config.kafka, 'acct', config.privacy, silentLogger, wire ? contracts(wire) : null);
}

/** A created, a status change and an edit of one review. */
function changes(headline = 'first'): ReviewEvent[] {
  const first = firstDiff(review(7, { headline }), 1_000);
  const changed = diffReview({
    previous: first.next,
    review: review(7, {
      headline: `${headline}!`,
      client_publication_status: 'REJECTED',
      updated_date: 1_700_000_000_100,
    }),
    detection: 'incremental',
    source: 'urn:reviews-bridge:test',
    fetchedAt: 2_000,
    suppressCreated: false,
  });
  return [...first.events, ...changed.events];
}

/** A validator of one schema (each its own: the schemas share their $id across wire formats). */
function compile(schema: object) {
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats.default(ajv);
  return ajv.compile(schema);
}

describe('records under a schema registry', () => {
  it('without a registry, the records are as before (dataschema the URN)', () => {
    const records = encoder(null).commitRecords(changes(), [], [], undefined, 1 << 20);
    const events = records.filter((r) => r.topic !== config.kafka.topics.state);
    expect(events.map((r) => JSON.parse(String(r.message.value)).dataschema)).toEqual([
      dataschemaOf('review.created'),
      dataschemaOf('review.status_changed'),
      dataschemaOf('review.updated'),
    ]);
    expect(events.map((r) => r.message.value)).toEqual(changes().map((e) => eventMessage(e).value));
  });

  it('structured: every event names its registered schema, the rest is unchanged', () => {
    const records = encoder('structured').commitRecords(changes(), [], [], undefined, 1 << 20);
    const c = contracts('structured');
    for (const record of records) {
      const value = JSON.parse(String(record.message.value)) as { type?: RecordType; dataschema?: string };
      if (record.topic === config.kafka.topics.state) {
        expect(value.dataschema).toBeUndefined();
        continue;
      }
      expect(value.dataschema).toBe(c.byType[value.type!].url);
      const parsed = parseReviewEvent(record.message);
      expect('event' in parsed && parsed.event.dataschema).toBe(value.dataschema);
    }
    const heartbeat = heartbeatEvent({
      source: 's',
      account: 'acct',
      watermark: null,
      lastCompletePoll: null,
      leaseEpoch: 1,
      paused: false,
      now: 5,
    });
    expect(JSON.parse(String(encoder('structured').heartbeatMessage(heartbeat).value)).dataschema).toBe(
      c.byType['review.heartbeat'].url,
    );
  });

  it('confluent: framed values with the schema id, ce_ headers, and the kit reads back the same events', () => {
    const events = changes();
    const c = contracts('confluent');
    const records = encoder('confluent').commitRecords(events, [], [], undefined, 1 << 20);
    const eventRecords = records.filter((r) => r.topic !== config.kafka.topics.state);
    expect(eventRecords).toHaveLength(3);
    eventRecords.forEach((record, i) => {
      const value = record.message.value as Buffer;
      const framed = unframe(value)!;
      expect(framed.schemaId).toBe(c.byType[events[i]!.type].id);
      expect(JSON.parse(framed.json)).toEqual(events[i]!.data);
      const headers = record.message.headers as Record<string, string>;
      expect(headers.ce_type).toBe(events[i]!.type);
      expect(headers.ce_sequence).toBe(String(events[i]!.sequence));
      expect(headers.ce_dataschema).toBe(c.byType[events[i]!.type].url);
      expect(headers['content-type']).toBe('application/json');
      const parsed = parseReviewEvent(record.message);
      expect(parsed).toMatchObject({ event: { ...events[i], dataschema: c.byType[events[i]!.type].url } });
    });
    const states = records.filter((r) => r.topic === config.kafka.topics.state);
    expect(unframe(states[0]!.message.value as Buffer)!.schemaId).toBe(c.byType['review.state'].id);
    expect(parseReviewEvent(states[0]!.message)).toMatchObject({ kind: 'state', reviewId: 7 });

    const deletion = deletedEvent(
      'urn:reviews-bridge:test',
      {
        id: 7,
        previous: {
          client_publication_status: 'REJECTED',
          pwr_publication_status: 'PENDING',
          updated_date: 1,
          sequence: 3,
        },
        stateDigest: 'd',
      },
      9_000,
    );
    const [deleted, tombstone] = encoder('confluent').deletionRecords([deletion]);
    expect(parseReviewEvent(deleted!.message)).toMatchObject({ kind: 'deleted', event: { sequence: 4 } });
    expect(tombstone!.message.value).toBeNull();
  });

  it('the kit refuses a framed value without CloudEvents headers, naming why', () => {
    expect(() => parseReviewEvent({ key: '1', value: frame(3, '{}'), headers: {} })).toThrow(ForeignMessageError);
    expect(() => parseReviewEvent({ key: '1', value: frame(3, '{}'), headers: {} })).toThrow(/ce_ headers/);
  });

  it('binary mode round-trips every attribute, a traceparent included', () => {
    const event = { ...changes()[1]!, traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` };
    const message = binaryEventMessage(event, 42);
    expect(message.headers.traceparent).toBe(event.traceparent);
    expect(structuredFromBinary(message.headers, unframe(message.value)!.json)).toEqual(event);
  });

  it('a contract adds at most the reserve the publisher takes off the limit (fitEvent stays right)', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 300 }),
        fc.boolean(),
        fc.constantFrom<WireFormat>('structured', 'confluent'),
        (headline, traced, wire) => {
          const e = encoder(wire);
          for (const event of changes(headline)) {
            const stamped = traced ? { ...event, traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` } : event;
            const plain = messageBytes(eventMessage(stamped));
            const [record] = e.commitRecords([stamped], [], [], undefined, 1 << 20);
            expect(messageBytes(record!.message as Parameters<typeof messageBytes>[0])).toBeLessThanOrEqual(
              plain + e.contractReserveBytes,
            );
          }
        },
      ),
      { numRuns: 50 },
    );
    expect(encoder(null).contractReserveBytes).toBe(0);
  });

  it('the registered schemas (draft-07) accept what the bridge writes, in both wire formats', () => {
    const check = (type: RecordType, wire: WireFormat, value: unknown) => {
      const schema = JSON.parse(registrySchema(type, wire)) as { $schema: string };
      expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
      const validate = compile(schema);
      expect(validate(value), `${type} ${wire}: ${JSON.stringify(validate.errors)}`).toBe(true);
    };
    for (const event of changes()) {
      check(event.type, 'structured', { ...event, dataschema: `${REGISTRY}/schemas/ids/1` });
      check(event.type, 'confluent', event.data);
    }
    // Closed objects: what the compatibility rule relies on to see a removed field as a breaking change.
    const closed = compile(JSON.parse(registrySchema('review.created', 'structured')) as object);
    expect(closed({ ...changes()[0]!, unknown_attribute: 1 })).toBe(false);
  });
});
