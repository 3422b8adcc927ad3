import { randomBytes, timingSafeEqual } from 'node:crypto';

// Access tokens: random opaque strings held in memory with their expiry and scope, as an authorisation server
// would; nothing about the credential can be read from a token.

/** Which credential a token was issued to: the scoped one may list reviews, the scopeless one gets 403. */
export type TokenScope = 'reviews' | 'none';

/** Result of checking a bearer token. */
export type TokenCheck = 'valid' | 'unknown' | 'expired' | 'no-scope';

/** A client_id/client_secret pair the token endpoint accepts. */
export interface Credential {
  id: string;
  secret: string;
  scope: TokenScope;
}

/** Issues, checks and revokes tokens. */
export class TokenRegistry {
  private tokens = new Map<string, { expiresAt: number; scope: TokenScope }>();
  private nextSweep = 0;

  constructor(
    private readonly credentials: readonly Credential[],
    private readonly ttlSeconds: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The scope of the credential, or null when id and secret do not match (compared in constant time). */
  authenticate(id: string, secret: string): TokenScope | null {
    let scope: TokenScope | null = null;
    for (const credential of this.credentials) {
      if (safeEqual(id, credential.id) && safeEqual(secret, credential.secret)) scope = credential.scope;
    }
    return scope;
  }

  /** A new token for the scope, valid for the configured lifetime. */
  issue(scope: TokenScope): { token: string; expiresIn: number } {
    const now = this.clock();
    this.sweep(now);
    const token = randomBytes(24).toString('base64url');
    this.tokens.set(token, { expiresAt: now + this.ttlSeconds * 1000, scope });
    return { token, expiresIn: this.ttlSeconds };
  }

  /** Whether a bearer token may list reviews. */
  check(token: string): TokenCheck {
    const entry = this.tokens.get(token);
    if (entry === undefined) return 'unknown';
    if (this.clock() >= entry.expiresAt) return 'expired';
    return entry.scope === 'reviews' ? 'valid' : 'no-scope';
  }

  /** Forgets every issued token. */
  revokeAll(): void {
    this.tokens = new Map();
  }

  // Drops expired tokens now and then so a client that fetches a token per request cannot grow memory forever.
  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + 60_000;
    for (const [token, entry] of this.tokens) if (now >= entry.expiresAt) this.tokens.delete(token);
  }
}

function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
