import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bearerToken,
  matchToken,
  MIN_TOKEN_LENGTH,
  parseTokenFile,
  TokenFileError,
} from '../../../src/core/admin-tokens.js';

// The admin API's token file and the comparison of a presented token: who a token is, and nothing about a token
// that is not one of them (no early exit on a match, no dependence on its length).

const A = 'a'.repeat(16) + 'first-token';
const B = 'b'.repeat(16) + 'second-token';

function errorOf(text: string): string {
  try {
    parseTokenFile(text);
  } catch (err) {
    expect(err).toBeInstanceOf(TokenFileError);
    return (err as Error).message;
  }
  throw new Error('expected a TokenFileError');
}

describe('parseTokenFile', () => {
  it('reads name:token lines, skipping blank lines and comments', () => {
    const tokens = parseTokenFile(`# who may call the admin API\n\nalice:${A}\r\n  ci-bot : ${B}  \n`);
    expect(tokens.map((t) => t.name)).toEqual(['alice', 'ci-bot']);
    expect(matchToken(tokens, A)).toBe('alice');
    expect(matchToken(tokens, B)).toBe('ci-bot');
  });

  it('a single bare token is named default (a trailing newline is not part of it)', () => {
    const tokens = parseTokenFile(`${A}\n`);
    expect(tokens.map((t) => t.name)).toEqual(['default']);
    expect(matchToken(tokens, A)).toBe('default');
  });

  it('a token may contain colons after its name', () => {
    const token = 'x:y:' + 'z'.repeat(20);
    expect(matchToken(parseTokenFile(`ops:${token}`), token)).toBe('ops');
  });

  it('refuses bad files, naming the line and never the token', () => {
    expect(errorOf('\n# nothing\n')).toBe('no token in the file');
    expect(errorOf(`alice:${A}\n${B}`)).toMatch(/^line 2: expected name:token/);
    expect(errorOf('alice:short')).toBe(`line 1: the token is shorter than ${MIN_TOKEN_LENGTH} characters`);
    expect(errorOf(`alice:${A}\nalice:${B}`)).toBe('line 2: the name alice appears twice');
    expect(errorOf(`alice:${A}\nbob:${A}`)).toBe('line 2: the same token as an earlier line');
    expect(errorOf(`alice:${A} ${B}`)).toBe('line 1: the token contains white space');
    for (const text of [`alice:${A}\nalice:${B}`, `alice:${A}\nbob:${A}`, `alice:${A} ${B}`]) {
      expect(errorOf(text)).not.toContain(A.slice(0, 16));
    }
  });

  it('keeps digests only, not the tokens', () => {
    const tokens = parseTokenFile(`alice:${A}`);
    expect(JSON.stringify(tokens)).not.toContain(A);
    expect(tokens[0]!.digest).toHaveLength(32);
  });
});

describe('matchToken', () => {
  const tokens = parseTokenFile(`alice:${A}\nbob:${B}`);

  it('finds the name of a known token and nothing for any other string, whatever its length', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        const expected = s === A ? 'alice' : s === B ? 'bob' : null;
        expect(matchToken(tokens, s)).toBe(expected);
      }),
    );
    // Prefixes, extensions and one-character changes of a known token are not it.
    expect(matchToken(tokens, A.slice(0, -1))).toBeNull();
    expect(matchToken(tokens, `${A}x`)).toBeNull();
    expect(matchToken(tokens, `${A.slice(0, -1)}X`)).toBeNull();
    expect(matchToken(tokens, '')).toBeNull();
    expect(matchToken([], A)).toBeNull();
  });

  it('compares with every known token, also after a match (no early exit)', () => {
    // A proxy of the token list counts how many entries were looked at.
    let visited = 0;
    const counting = tokens.map(
      (t) => new Proxy(t, { get: (o, k) => (k === 'digest' && visited++, Reflect.get(o, k)) }),
    );
    expect(matchToken(counting, A)).toBe('alice');
    expect(visited).toBe(2);
    visited = 0;
    expect(matchToken(counting, 'nope')).toBeNull();
    expect(visited).toBe(2);
  });
});

describe('bearerToken', () => {
  it('takes the token of a Bearer authorization only', () => {
    expect(bearerToken(`Bearer ${A}`)).toBe(A);
    expect(bearerToken(`bearer ${A}`)).toBe(A);
    expect(bearerToken(undefined)).toBeNull();
    expect(bearerToken(`Basic ${A}`)).toBeNull();
    expect(bearerToken('Bearer')).toBeNull();
    expect(bearerToken(`Bearer ${A} extra`)).toBeNull();
  });
});
