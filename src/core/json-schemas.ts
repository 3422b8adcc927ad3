import { z } from 'zod';
import {
  CreatedDataSchema,
  DeletedDataSchema,
  HeartbeatDataSchema,
  RECORD_SCHEMAS,
  ReviewStateSchema,
  SCHEMA_VERSION,
  StatusChangedDataSchema,
  UpdatedDataSchema,
  type RecordType,
} from './events.js';

// JSON Schemas for consumers in other languages, generated from the zod definitions the bridge itself uses so
// that the two can never drift (a test regenerates them and compares with the checked-in files).

/** File name of an event type's JSON Schema under schemas/. */
export function schemaFileName(type: RecordType): string {
  return `${type}.${SCHEMA_VERSION}.json`;
}

/** The JSON Schema of every record type, as the text checked in under schemas/. */
export function renderSchemas(): Map<string, string> {
  const files = new Map<string, string>();
  for (const [type, schema] of Object.entries(RECORD_SCHEMAS) as [RecordType, z.ZodType][]) {
    const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' }) as Record<string, unknown>;
    const doc = {
      $schema: json.$schema,
      $id: `urn:reviews-bridge:schema:${type}.${SCHEMA_VERSION}`,
      title:
        type === 'review.state'
          ? `${type} (value of the compacted state topic; a deleted review is a tombstone)`
          : `${type} (CloudEvents 1.0, structured JSON mode)`,
      ...json,
    };
    files.set(schemaFileName(type), JSON.stringify(doc, null, 2) + '\n');
  }
  return files;
}

/**
 * How the bridge frames the value of a record: `structured` (a CloudEvents structured-mode JSON document, the
 * default) or `confluent` (a schema registry's frame: magic byte 0, the schema id as 4 bytes big-endian, then the
 * JSON of the event's `data`, its CloudEvents attributes in `ce_` headers: binary content mode).
 */
export type WireFormat = 'structured' | 'confluent';

// What the value of each record type is in binary content mode: the event's data (state rows are not CloudEvents).
const BINARY_VALUE_SCHEMAS: Record<RecordType, z.ZodType> = {
  'review.created': CreatedDataSchema,
  'review.status_changed': StatusChangedDataSchema,
  'review.updated': UpdatedDataSchema,
  'review.deleted': DeletedDataSchema,
  'review.heartbeat': HeartbeatDataSchema,
  'review.state': ReviewStateSchema,
};

/**
 * The JSON Schema a schema registry holds for a record type's topic (subject `<topic>-value`): the schema of the
 * record's value as written in `wire` format. Rendered as draft-07, not 2020-12 like schemas/: the JSON Schema
 * compatibility checkers of registries (Apicurio's, Confluent's) read draft-04 to draft-07 only. The same zod
 * schemas, so the two renderings accept the same documents.
 */
export function registrySchema(type: RecordType, wire: WireFormat): string {
  const schema = wire === 'structured' ? RECORD_SCHEMAS[type] : BINARY_VALUE_SCHEMAS[type];
  const json = z.toJSONSchema(schema, { target: 'draft-7', io: 'output' }) as Record<string, unknown>;
  const what =
    type === 'review.state'
      ? 'value of the compacted state topic; a deleted review is a tombstone'
      : wire === 'structured'
        ? 'CloudEvents 1.0, structured JSON mode'
        : "the event's data; CloudEvents 1.0 binary mode, attributes in ce_ headers";
  const suffix = wire === 'confluent' && type !== 'review.state' ? '.data' : '';
  const doc = {
    $schema: json.$schema,
    $id: `urn:reviews-bridge:schema:${type}.${SCHEMA_VERSION}${suffix}`,
    title: `${type} (${what})`,
    ...json,
  };
  return JSON.stringify(doc);
}

/** The file under schemas/released/ of a record type's registered schema in one wire format. */
export function releasedSchemaFileName(type: RecordType, wire: WireFormat): string {
  return `${type}.${SCHEMA_VERSION}.${wire}.json`;
}

/** The registered schemas of every record type in both wire formats, as schemas/released/ keeps them. */
export function releasedSchemaFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const type of Object.keys(RECORD_SCHEMAS) as RecordType[]) {
    for (const wire of ['structured', 'confluent'] as const) {
      const pretty = JSON.stringify(JSON.parse(registrySchema(type, wire)), null, 2);
      files.set(releasedSchemaFileName(type, wire), pretty + '\n');
    }
  }
  return files;
}
