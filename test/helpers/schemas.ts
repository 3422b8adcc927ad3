import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// Events are checked against the checked-in JSON Schemas with ajv, a validator independent of the zod code
// that produced both, as a consumer in another service would.

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats.default(ajv);
const validators = new Map<string, ValidateFunction>();

/** Validates one event value against schemas/<type>.v1.json (type: the event's own unless given); returns the errors. */
export function schemaErrors(event: unknown, type: unknown = (event as { type?: unknown }).type): string[] {
  if (typeof type !== 'string') return ['event has no type'];
  let validate = validators.get(type);
  if (!validate) {
    const schema = JSON.parse(readFileSync(new URL(`../../schemas/${type}.v1.json`, import.meta.url), 'utf8'));
    validate = ajv.compile(schema);
    validators.set(type, validate);
  }
  return validate(event) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}
