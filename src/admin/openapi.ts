import { z } from 'zod';
import { ErrorSchema, NAMED_SCHEMAS, ROUTES } from './api.js';
import { EmptyBodySchema } from './bodies.js';

// GET /openapi.json: the admin API as an OpenAPI 3.1 document, generated from the route table and the zod schemas
// the handlers validate with (zod 4's z.toJSONSchema emits JSON Schema 2020-12, OpenAPI 3.1's own dialect).

type Json = Record<string, unknown>;

/** The version of the /v1 API's contract (info.version). */
export const API_VERSION = '1.0.0';

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

function nameOf(schema: z.ZodType): string {
  const found = NAMED_SCHEMAS.find(([, s]) => s === schema);
  if (!found) throw new Error('a route uses a schema that has no name in NAMED_SCHEMAS');
  return found[0];
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io }) as Json;
  return rest;
}

const errorResponse = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: ref(nameOf(ErrorSchema)) } },
});

const UNAUTHORIZED: Json = {
  description: 'No valid bearer token (no detail is given)',
  headers: { 'WWW-Authenticate': { schema: { type: 'string' }, description: 'Bearer' } },
  content: { 'application/json': { schema: ref(nameOf(ErrorSchema)) } },
};

/** The OpenAPI 3.1 document of the admin API. */
export function openApiDocument(): Json {
  const paths: Record<string, Record<string, Json>> = {
    '/openapi.json': {
      get: {
        operationId: 'openapi',
        summary: 'This document',
        responses: {
          '200': { description: 'The OpenAPI 3.1 document', content: { 'application/json': { schema: {} } } },
          '401': UNAUTHORIZED,
        },
      },
    },
  };
  for (const route of ROUTES) {
    const hasAccount = route.path.includes('{account}');
    const responses: Json = {
      [String(route.status)]: {
        description: route.status === 202 ? 'Recorded for the leader' : 'OK',
        content: { 'application/json': { schema: ref(nameOf(route.response)) } },
      },
      '401': UNAUTHORIZED,
    };
    if (route.body) responses['400'] = errorResponse('The body is not valid: `field` names the field at fault');
    if (hasAccount) responses['404'] = errorResponse('No such account in this deployment');
    if (route.conflict) responses['409'] = errorResponse(route.conflict);
    const operation: Json = {
      operationId: route.action,
      summary: route.summary,
      ...(hasAccount
        ? {
            parameters: [
              { name: 'account', in: 'path', required: true, schema: { type: 'string' }, description: 'account id' },
            ],
          }
        : {}),
      ...(route.body
        ? {
            requestBody: {
              // The actions without parameters take no body (or {}); resync needs one.
              required: route.body !== EmptyBodySchema,
              content: { 'application/json': { schema: ref(nameOf(route.body)) } },
            },
          }
        : {}),
      responses,
    };
    (paths[route.path] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'reviews-bridge admin API',
      version: API_VERSION,
      description:
        'Operator actions and status of a reviews-bridge deployment. Every request needs a bearer token of ' +
        'ADMIN_TOKEN_FILE. Actions are recorded in Redis and taken by the replica leading the account, so any ' +
        'replica answers for every account.',
    },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: Object.fromEntries(NAMED_SCHEMAS.map(([name, schema, io]) => [name, jsonSchema(schema, io)])),
    },
  };
}
