import { pino, type Logger } from 'pino';

// Logs are pino JSON. Redaction is the last line of defence: code already avoids logging records, but a
// reviewer's e-mail address, a token or a secret must not reach the log even if an object slips through.

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

/** The process logger (JSON on stdout). */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'reviews-bridge', ...base },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
