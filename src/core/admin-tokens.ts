import { createHash, timingSafeEqual } from 'node:crypto';

// The admin API's bearer tokens (ADMIN_TOKEN_FILE): the file's format and the comparison of a presented token with
// the known ones. Pure: the admin server reads the file (and re-reads it when it changes); the configuration checks
// it at start with the same parser, so a bad file stops the process with one message naming the line.
//
// Format: one token a line, `name:token`, so that logs can say who acted; blank lines and lines starting with #
// are ignored. A file of a single line without a name holds one token named `default`.

/** A known token: who it is (in logs and never secret) and the SHA-256 of the token itself. */
export interface AdminToken {
  name: string;
  /** SHA-256 of the token: compared in constant time, and the token itself is not kept around. */
  digest: Buffer;
}

/** Why a token file was refused; the message names the line and the problem, never a token. */
export class TokenFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenFileError';
  }
}

/** Shortest token accepted: a guessable token would make the API's authentication worthless. */
export const MIN_TOKEN_LENGTH = 16;

/** Allowed token names: they appear in logs. */
export const TOKEN_NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

/** Parses the text of a token file; throws TokenFileError naming the first bad line. */
export function parseTokenFile(text: string): AdminToken[] {
  const lines = text
    .split(/\r?\n/)
    .map((raw, index) => ({ line: raw.trim(), number: index + 1 }))
    .filter(({ line }) => line !== '' && !line.startsWith('#'));
  if (lines.length === 0) throw new TokenFileError('no token in the file');
  const tokens: AdminToken[] = [];
  const names = new Set<string>();
  const digests = new Set<string>();
  for (const { line, number } of lines) {
    const colon = line.indexOf(':');
    const label = colon > 0 ? line.slice(0, colon).trim() : '';
    const named = TOKEN_NAME.test(label);
    if (!named && lines.length > 1) {
      throw new TokenFileError(`line ${number}: expected name:token (a bare token is allowed only alone in the file)`);
    }
    const name = named ? label : 'default';
    const token = named ? line.slice(colon + 1).trim() : line;
    if (token.length < MIN_TOKEN_LENGTH) {
      throw new TokenFileError(`line ${number}: the token is shorter than ${MIN_TOKEN_LENGTH} characters`);
    }
    if (/\s/.test(token)) throw new TokenFileError(`line ${number}: the token contains white space`);
    if (names.has(name)) throw new TokenFileError(`line ${number}: the name ${name} appears twice`);
    const d = digest(token);
    // Two names for one token would make the log's "who" a guess.
    if (digests.has(d.toString('hex'))) throw new TokenFileError(`line ${number}: the same token as an earlier line`);
    names.add(name);
    digests.add(d.toString('hex'));
    tokens.push({ name, digest: d });
  }
  return tokens;
}

/**
 * The name of the token `presented` equals, or null. Constant time: the presented token is hashed (so its length
 * does not matter) and compared with every known digest by timingSafeEqual, without stopping at a match.
 */
export function matchToken(tokens: readonly AdminToken[], presented: string): string | null {
  const d = digest(presented);
  let found: string | null = null;
  for (const token of tokens) {
    if (timingSafeEqual(token.digest, d) && found === null) found = token.name;
  }
  return found;
}

/** The token of an `Authorization: Bearer <token>` header, or null when the header is absent or of another scheme. */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^Bearer +(\S+) *$/i.exec(header);
  return m ? m[1]! : null;
}
