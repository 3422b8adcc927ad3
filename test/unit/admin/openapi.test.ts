import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { ROUTES } from '../../../src/admin/api.js';
import { openApiDocument } from '../../../src/admin/openapi.js';
import { accountStatus } from '../../../src/core/account-status.js';
import { EMPTY_CHECKPOINT } from '../../../src/core/checkpoint.js';

// The admin API's OpenAPI document: a valid OpenAPI 3.1 document, generated from the route table, whose schemas
// accept what the handlers answer.

type Json = Record<string, unknown>;

/** The value at a path of nested objects (undefined when a step is missing). */
function at(value: unknown, ...keys: string[]): Json {
  let v = value;
  for (const k of keys) v = typeof v === 'object' && v !== null ? (v as Json)[k] : undefined;
  return v as Json;
}

describe('openApiDocument', () => {
  const doc = openApiDocument();

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    // The validator can say no: a document without info, or with a response of no description, is refused.
    const { info: _info, ...noInfo } = structuredClone(doc);
    expect((await new Validator().validate(noInfo)).valid).toBe(false);
    const broken = structuredClone(doc);
    delete at(broken, 'paths', '/v1/accounts', 'get', 'responses', '200').description;
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('has every route, secured by the bearer scheme, with 401 everywhere and 400/404 where they can happen', () => {
    expect(doc.security).toEqual([{ bearer: [] }]);
    expect(at(doc, 'components', 'securitySchemes', 'bearer')).toEqual({ type: 'http', scheme: 'bearer' });
    for (const route of ROUTES) {
      const op = at(doc, 'paths', route.path, route.method.toLowerCase());
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      expect(Object.keys(at(op, 'responses'))).toEqual(
        expect.arrayContaining([String(route.status), '401', ...(route.body ? ['400'] : [])]),
      );
      if (route.path.includes('{account}')) expect(at(op, 'responses', '404')).toBeDefined();
      if (route.body) expect(at(op, 'requestBody').required).toBe(['resync', 'checkpoint_set'].includes(route.action));
      if (route.conflict) expect(at(op, 'responses', '409')).toBeDefined();
    }
    expect(at(doc, 'paths', '/openapi.json', 'get')).toBeDefined();
    // The checkpoint of an account: read, and changed (409 while the account runs).
    expect(at(doc, 'paths', '/v1/accounts/{account}/checkpoint', 'get')).toBeDefined();
    expect(at(doc, 'paths', '/v1/accounts/{account}/checkpoint', 'put', 'responses', '409')).toBeDefined();
  });

  it('its schemas accept the answers and bodies of the handlers, and refuse others', () => {
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    for (const [name, schema] of Object.entries(at(doc, 'components', 'schemas'))) ajv.addSchema(schema as Json, name);
    const status = accountStatus(
      {
        account: 'a',
        checkpoint: {
          ...EMPTY_CHECKPOINT,
          watermark: 1_000,
          sweep: { kind: 'sweep', cursor: 'c', startedAt: 1_000, seen: 50 },
        },
        snapshotReviews: 100,
        lease: { holder: 'host:1:abc', epoch: 3, ttlMs: 2_000 },
        sweepRequested: false,
        pausedSince: null,
        pass: null,
        resync: { id: 'r', requestedAt: 1_000, scope: { kind: 'ids', ids: [1] } },
        changelogTxn: 7,
        restoreRequested: false,
        redisDurability: null,
      },
      11_000,
    );
    expect(ajv.validate('AccountStatus', status), JSON.stringify(ajv.errors)).toBe(true);
    expect(ajv.validate('AccountStatus', { ...status, paused: 'no' })).toBe(false);
    expect(ajv.validate('ResyncBody', { ids: [1, 2] })).toBe(true);
    expect(ajv.validate('ResyncBody', { since: '2026-11-01' })).toBe(true);
    expect(ajv.validate('ResyncBody', { all: true })).toBe(true);
    expect(ajv.validate('ResyncBody', { ids: [1], all: true })).toBe(false);
    expect(ajv.validate('EmptyBody', {})).toBe(true);
    expect(ajv.validate('EmptyBody', { x: 1 })).toBe(false);
  });
});
