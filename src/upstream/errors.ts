import { EMAIL_PATTERN } from '../core/field-policy.js';

// One error type for everything that can go wrong upstream, so the poller decides on `kind` (fail the pass,
// alert on 'auth'/'scope', stop on 'cursor_loop') instead of parsing messages. Messages are built from our own
// words plus redacted fragments: they end up in logs, and must never carry a secret, a token or an e-mail.

/**
 * What went wrong upstream; decides whether a request is retried and what an operator should look at.
 * `not_ready`: 202 Accepted, the answer is not ready yet (retried after Retry-After or a backoff).
 * `cursor_invalid`: the listing refused a cursor (400 even for a page of one): the pass must restart without it.
 * `account`: 402, the account needs a second factor (2FA) the bridge cannot give; not retried.
 * `config`: 404, no listing at the configured address (UPSTREAM_BASE_URL); not retried.
 * `too_large`: the page cannot be served, even as a page of one (over the body cap, or 400 for size).
 */
export type UpstreamErrorKind =
  | 'throttled'
  | 'server'
  | 'network'
  | 'body'
  | 'auth'
  | 'scope'
  | 'client'
  | 'cursor_loop'
  | 'too_large'
  | 'not_ready'
  | 'cursor_invalid'
  | 'account'
  | 'config';

/** Which upstream endpoint a request went to. */
export type Endpoint = 'token' | 'reviews';

/** Details carried by an UpstreamError (all optional except the kind). */
export interface UpstreamErrorDetails {
  endpoint?: Endpoint;
  /** Last HTTP status seen (0 or absent for connection errors). */
  status?: number;
  /** Requests made for this operation, retries included. */
  attempts?: number;
  /** Short bounded label of the cause ('status_503', 'timeout', 'truncated', ...), used as a metric label. */
  reason?: string;
  /** Set once an operation has given up: an enclosing retry loop must not start over. */
  final?: boolean;
  /** How long the server asked us to wait before the next attempt (Retry-After of a 202), in seconds. */
  retryAfterSeconds?: number | null;
  cause?: unknown;
}

/** The typed failure of the upstream client: `kind` says what happened, the message says it to a human. */
export class UpstreamError extends Error {
  readonly kind: UpstreamErrorKind;
  readonly endpoint: Endpoint | undefined;
  readonly status: number | undefined;
  readonly attempts: number | undefined;
  readonly reason: string | undefined;
  readonly final: boolean;
  readonly retryAfterSeconds: number | null;

  constructor(kind: UpstreamErrorKind, message: string, details: UpstreamErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'UpstreamError';
    this.kind = kind;
    this.endpoint = details.endpoint;
    this.status = details.status;
    this.attempts = details.attempts;
    this.reason = details.reason;
    this.final = details.final ?? false;
    this.retryAfterSeconds = details.retryAfterSeconds ?? null;
  }

  /** Whether another attempt could succeed (the retry loop asks this). */
  get retryable(): boolean {
    return !this.final && RETRYABLE.has(this.kind);
  }
}

const RETRYABLE: ReadonlySet<UpstreamErrorKind> = new Set(['throttled', 'server', 'network', 'body', 'not_ready']);

/** True for an UpstreamError of the given kind (or any kind when omitted). */
export function isUpstreamError(err: unknown, kind?: UpstreamErrorKind): err is UpstreamError {
  return err instanceof UpstreamError && (kind === undefined || err.kind === kind);
}

const BEARER = /(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi;

/**
 * Removes e-mail addresses, Authorization-style credentials and the given sensitive values from text that comes
 * from outside (error bodies, library messages) before it enters an error message or a log line.
 */
export function redact(text: string, sensitive: readonly (string | null | undefined)[] = []): string {
  let out = text;
  for (const value of sensitive) {
    // Very short values would blank out ordinary words; real secrets and tokens are long.
    if (value && value.length >= 4) out = out.split(value).join('[redacted]');
  }
  return out.replace(BEARER, '$1 [redacted]').replace(EMAIL_PATTERN, '[email]');
}

/** A short, single-line, redacted excerpt of an error body for a message. */
export function excerpt(body: string, sensitive: readonly (string | null | undefined)[] = [], max = 200): string {
  const line = redact(body, sensitive).replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}
