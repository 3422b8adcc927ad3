import type { RecordType } from './events.js';
import type { WireFormat } from './json-schemas.js';

// The records' values when a schema registry holds the contracts (SCHEMA_REGISTRY_URL). Structured mode keeps the
// CloudEvents JSON document and only names the registered schema in `dataschema`. The `confluent` wire format is
// the frame registry-aware deserializers expect (magic byte 0, schema id as a 4-byte big-endian integer, then the
// JSON); a framed value is no longer a JSON document, so an event goes in CloudEvents binary content mode: its
// `data` is the value and its other attributes are `ce_` headers (the CloudEvents Kafka binding). Pure functions.

export type { WireFormat };

/** A schema the registry holds for one record type: its id there and the URL that serves it. */
export interface RecordContract {
  id: number;
  url: string;
}

/** The registered schema of every record type the bridge writes, and the wire format of the values. */
export interface RecordContracts {
  wire: WireFormat;
  byType: Readonly<Record<RecordType, RecordContract>>;
}

/** The magic byte of the Confluent wire format (the only version there is). */
export const MAGIC_BYTE = 0;

/** Prefix of the headers that carry CloudEvents attributes in binary content mode (Kafka protocol binding). */
export const CE_HEADER_PREFIX = 'ce_';

/** A value in the Confluent wire format: magic byte, schema id (big-endian int32), the JSON text. */
export function frame(schemaId: number, json: string): Buffer {
  const body = Buffer.from(json, 'utf8');
  const out = Buffer.allocUnsafe(5 + body.length);
  out.writeUInt8(MAGIC_BYTE, 0);
  out.writeUInt32BE(schemaId, 1);
  body.copy(out, 5);
  return out;
}

/** The schema id and JSON text of a framed value; null when the value is not framed (a JSON document). */
export function unframe(value: Buffer): { schemaId: number; json: string } | null {
  if (value.length < 5 || value[0] !== MAGIC_BYTE) return null;
  return { schemaId: value.readUInt32BE(1), json: value.toString('utf8', 5) };
}

/** A CloudEvent as written: its attributes and its data (every event of the bridge has both). */
interface CloudEventLike {
  subject: string;
  datacontenttype: string;
  data: unknown;
  traceparent?: string;
  [attribute: string]: unknown;
}

/**
 * The Kafka message of a CloudEvent in binary content mode under the Confluent wire format: key = subject, value =
 * the framed JSON of `data`, every other attribute a `ce_<name>` header (numbers as decimal text), the data's
 * content type as `content-type`, and the traceparent also in a `traceparent` header as in structured mode.
 */
export function binaryEventMessage(
  event: CloudEventLike,
  schemaId: number,
): { key: string; value: Buffer; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'content-type': event.datacontenttype };
  for (const name in event) {
    if (name === 'data' || name === 'datacontenttype') continue;
    const value = event[name];
    if (value !== undefined) headers[`${CE_HEADER_PREFIX}${name}`] = String(value);
  }
  if (event.traceparent !== undefined) headers.traceparent = event.traceparent;
  return { key: event.subject, value: frame(schemaId, JSON.stringify(event.data)), headers };
}

/** CloudEvents attributes whose value is a number in the bridge's events (header text is turned back into one). */
const NUMERIC_ATTRIBUTES: ReadonlySet<string> = new Set(['sequence']);

/**
 * The structured-mode document of a binary-mode event: its `ce_` headers as attributes, `data` from the JSON
 * text, `datacontenttype` from the `content-type` header. Null when the headers hold no CloudEvent.
 */
export function structuredFromBinary(
  headers: Readonly<Record<string, string>>,
  dataJson: string,
): Record<string, unknown> | null {
  if (headers[`${CE_HEADER_PREFIX}specversion`] === undefined) return null;
  const event: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(CE_HEADER_PREFIX)) continue;
    const attribute = name.slice(CE_HEADER_PREFIX.length);
    event[attribute] = NUMERIC_ATTRIBUTES.has(attribute) && /^\d{1,15}$/.test(value) ? Number(value) : value;
  }
  if (headers['content-type'] !== undefined) event.datacontenttype = headers['content-type'];
  event.data = JSON.parse(dataJson) as unknown;
  return event;
}

/**
 * Bytes a message may grow by when it names its registered schema or is framed, beyond what fitEvent measured:
 * the most a registered URL is longer than the URN it replaces (`urnBytes` of the type), plus (framed) the frame and
 * the `ce_` headers' overhead over the same attributes in JSON (per header: two length varints and `ce_`, against
 * quotes, colon and comma).
 */
export function contractReserveBytes(
  contracts: RecordContracts | null | undefined,
  urnBytes: (type: RecordType) => number,
): number {
  if (!contracts) return 0;
  const entries = Object.entries(contracts.byType) as [RecordType, RecordContract][];
  const longer = Math.max(0, ...entries.map(([type, c]) => Buffer.byteLength(c.url) - urnBytes(type)));
  // Ten attributes at most (specversion, id, source, type, subject, time, sequence, dataschema, traceparent and
  // content-type), each at most 16 + 3 bytes more as a header than as a JSON member; 5 bytes of frame.
  return contracts.wire === 'confluent' ? longer + 5 + 10 * 19 : longer;
}
