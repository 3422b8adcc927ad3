import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AdminOutcome } from '../ops/metrics.js';
import type { BodyProblem } from './bodies.js';

// The admin API's request and response helpers: what an answer is, how it goes on the wire (the same headers on
// every answer), and how a request body is read with a size limit. Routing and actions build on these.

/** An answer to send: status, body and extra headers, with the outcome the request counter records. */
export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  outcome: AdminOutcome;
}

const JSON_TYPE = 'application/json; charset=utf-8';
/** Largest request body: a resync of 10,000 ids fits with room to spare. */
const MAX_BODY_BYTES = 1024 * 1024;

/** An error answer in the shape of the OpenAPI document's Error schema. */
export function problem(
  status: number,
  outcome: AdminOutcome,
  error: string,
  extra: BodyProblem | object = {},
): Answer {
  return { status, outcome, body: { error, ...extra } };
}

/** The request body as text, or null when it exceeds MAX_BODY_BYTES. */
export async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes an answer as JSON (a string body is sent as it is: the prepared OpenAPI document). */
export function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...headers,
  });
  res.end(text);
}
