import { UpstreamError, type UpstreamErrorKind } from '../core/errors.js';
import { EMAIL_PATTERN } from '../core/field-policy.js';

// The upstream's failures are UpstreamErrors of the one error model (src/core/errors.ts): the orchestration decides
// on `kind` (fail the pass, alert on 'auth'/'scope', stop on 'cursor_loop') and `retriable`, never on messages.
// Messages are built from our own words plus redacted fragments: they end up in logs, and must never carry a
// secret, a token or an e-mail.

export { UpstreamError, type UpstreamErrorKind, type Endpoint, type UpstreamErrorDetails } from '../core/errors.js';

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
