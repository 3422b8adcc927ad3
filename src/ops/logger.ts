import { isDeepStrictEqual } from 'node:util';
import { pino, stdSerializers, type LogFn, type Logger } from 'pino';
import { EMAIL_PATTERN } from '../core/field-policy.js';
import { UpstreamError } from '../upstream/errors.js';

// Logs are pino JSON. Code avoids logging records and secrets, but libraries attach their own context to errors:
// ioredis puts the failed command and its arguments (AUTH <password>) on the error, URLs may carry userinfo, HTTP
// errors their headers. So every logged error goes through a serializer that keeps the error's name, message and
// stack and drops command arguments and credential-shaped values, and the redaction paths below are the last line
// of defence for objects that slip through.

const REDACT = [
  'email',
  '*.email',
  '*.*.email',
  '*.*.*.email',
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  'password',
  '*.password',
  'clientSecret',
  '*.clientSecret',
  'client_secret',
  '*.client_secret',
  'access_token',
  '*.access_token',
  'token',
  '*.token',
];

/** Keys whose values are never logged: credentials, and command arguments (ioredis `command.args`). */
const SECRET_KEY =
  /password|secret|^(pass|passwd|token|access_?token|refresh_?token|(proxy-)?authorization|(set-)?cookie|credentials?|auth|args|sasl)$/i;
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^/\s@]+@/gi;
const AUTH_VALUE = /\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi;
const MAX_DEPTH = 6;

/** A log-safe copy of a text: no URL userinfo, no Authorization-style credentials, no e-mail addresses. */
export function scrubText(text: string): string {
  return text.replace(USERINFO, '$1[redacted]@').replace(AUTH_VALUE, '$1 [redacted]').replace(EMAIL_PATTERN, '[email]');
}

// Stack frames are code locations (a scoped package path such as /node_modules/@scope/x.js looks like an e-mail
// address); the message lines between them are scrubbed.
function scrubStack(stack: string): string {
  return stack
    .split('\n')
    .map((line) => (/^\s+at /.test(line) ? line : scrubText(line)))
    .join('\n');
}

function scrub(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH || seen.has(value)) return '[omitted]';
  // pino applies the log formatter before the serializers: an error is serialized here, not flattened.
  if (value instanceof Error) return scrub(stdSerializers.err(value), depth, seen);
  seen.add(value);
  if (Buffer.isBuffer(value)) return '[bytes]';
  if (Array.isArray(value)) return value.slice(0, 20).map((v) => scrub(v, depth + 1, seen));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (SECRET_KEY.test(k)) out[k] = '[redacted]';
    else if (k === 'stack' && typeof v === 'string') out[k] = scrubStack(v);
    else out[k] = scrub(v, depth + 1, seen);
  }
  return out;
}

/** pino's error serializer with command arguments and credential-shaped values removed (also from causes). */
export function safeErrorSerializer(err: unknown): unknown {
  const serialized = err instanceof Error ? stdSerializers.err(err) : err;
  return scrub(serialized, 0, new WeakSet());
}

/**
 * A short, bounded name for what went wrong, never its text: `upstream:<kind>` for an UpstreamError, otherwise the
 * error class plus its errno code (ECONNREFUSED) or Redis reply code (WRONGPASS) when it has one. For health
 * bodies (the loop's lastError, ops-server failures) and anything else an operator sees without the logs.
 */
export function errorKind(err: unknown): string {
  if (err instanceof UpstreamError) return `upstream:${err.kind}`;
  if (!(err instanceof Error)) return typeof err;
  const name = /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(err.name) ? err.name : 'Error';
  const code = (err as { code?: unknown }).code;
  const reply = name === 'ReplyError' ? /^([A-Z]{3,20})\b/.exec(err.message)?.[1] : undefined;
  const detail = typeof code === 'string' ? code : reply;
  return detail && /^[A-Za-z0-9_.-]{1,40}$/.test(detail) ? `${name}:${detail}` : name;
}

// A log line is its logger's bindings (base and child: service, account...) followed by the call's own fields, and
// pino writes both: a field that repeats a binding gave lines such as {"account":"a",...,"account":"a"}. Bindings
// are read back from the text pino keeps of them (its chindings), once per distinct text.
const boundCache = new Map<string, Record<string, unknown>>();

function boundFields(logger: Logger): Record<string, unknown> {
  const chindings = (logger as unknown as Record<symbol, unknown>)[pino.symbols.chindingsSym];
  if (typeof chindings !== 'string' || chindings === '') return {};
  let bound = boundCache.get(chindings);
  if (bound === undefined) {
    bound = JSON.parse(`{${chindings.slice(1)}}`) as Record<string, unknown>;
    if (boundCache.size < 1_000) boundCache.set(chindings, bound);
  }
  return bound;
}

/**
 * pino hook: a field the logger's bindings already carry is written once. The same value is dropped from the
 * call's fields; a different one (a call contradicting its logger's context) moves under `logged`, so that no
 * line has a key twice and nothing is lost.
 */
export function dedupeBoundFields(this: Logger, args: Parameters<LogFn>, method: LogFn): void {
  const [first, ...rest] = args as unknown[];
  if (first === null || typeof first !== 'object' || first instanceof Error || Array.isArray(first)) {
    method.apply(this, args);
    return;
  }
  const bound = boundFields(this);
  let own: Record<string, unknown> | null = null;
  for (const key of Object.keys(first)) {
    if (!Object.hasOwn(bound, key)) continue;
    own ??= { ...(first as Record<string, unknown>) };
    const value = own[key];
    delete own[key];
    if (!isDeepStrictEqual(value, bound[key])) {
      const logged = (own.logged ??= {}) as Record<string, unknown>;
      logged[key] = value;
    }
  }
  method.apply(this, (own === null ? args : [own, ...rest]) as Parameters<LogFn>);
}

/** pino options every logger of the process shares: the safe error serializer and the redaction paths. */
export const SAFE_LOG_OPTIONS = {
  hooks: { logMethod: dedupeBoundFields },
  serializers: { err: safeErrorSerializer, error: safeErrorSerializer },
  redact: { paths: REDACT, censor: '[redacted]' },
  formatters: {
    // Anything else logged (library context, URLs) passes the same scrubbing.
    log: (object: Record<string, unknown>) => scrub(object, 0, new WeakSet()) as Record<string, unknown>,
  },
};

/** The process logger (JSON on stdout). */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'reviews-bridge', ...base },
    ...SAFE_LOG_OPTIONS,
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
