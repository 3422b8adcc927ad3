import { z } from 'zod';
import { RECORD_SCHEMAS, SCHEMA_VERSION, type RecordType } from './events.js';

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
