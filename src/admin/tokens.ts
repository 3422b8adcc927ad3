import { readFile, stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { matchToken, parseTokenFile, TokenFileError, type AdminToken } from '../core/admin-tokens.js';

// The admin API's token file, re-read when it changes: every request stats it (one cheap system call) and reads it
// again only when its inode, size or times differ from the last read. A rotated Kubernetes Secret (the kubelet
// swaps a symlink) or a rewritten file takes effect at the next request, without a restart. A file that becomes
// unreadable or invalid refuses every request until it is fixed: keeping the old tokens would keep a token the
// operator meant to revoke.

/** The tokens of ADMIN_TOKEN_FILE, as of the file's last change. */
export class TokenFile {
  private loaded: { version: string; tokens: readonly AdminToken[] } | null = null;

  constructor(
    private readonly path: string,
    private readonly logger?: Logger,
  ) {}

  /** The name of the token `presented` is, or null (unknown token, or no valid file). */
  async match(presented: string): Promise<string | null> {
    return matchToken(await this.tokens(), presented);
  }

  /** The current tokens (none while the file cannot be read or is invalid). */
  async tokens(): Promise<readonly AdminToken[]> {
    let version: string;
    try {
      const s = await stat(this.path);
      version = `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
    } catch (err) {
      return this.refuse('missing', 'the admin token file cannot be read', err);
    }
    if (this.loaded?.version === version) return this.loaded.tokens;
    let tokens: AdminToken[];
    try {
      tokens = parseTokenFile(await readFile(this.path, 'utf8'));
    } catch (err) {
      return this.refuse(version, 'the admin token file cannot be read or is invalid', err);
    }
    if (this.loaded !== null) {
      this.logger?.info({ names: tokens.map((t) => t.name) }, 'admin token file changed: tokens reloaded');
    }
    this.loaded = { version, tokens };
    return tokens;
  }

  /** Refuses every token; logs once per state of the file. */
  private refuse(version: string, what: string, err: unknown): readonly AdminToken[] {
    if (this.loaded?.version !== version) {
      // The parser's message names a line and a problem, never a token; an I/O error names its code only.
      const reason = err instanceof TokenFileError ? err.message : ((err as NodeJS.ErrnoException).code ?? 'error');
      this.logger?.error({ reason }, `${what}: every admin request is refused until it is fixed`);
    }
    this.loaded = { version, tokens: [] };
    return [];
  }
}
