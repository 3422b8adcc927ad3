import type { AccountKeys, BridgeRedis } from './connection.js';

// The dead-letter memory of one account: which bad records (by digest) were dead-lettered recently. Polls re-read a
// bad record for as long as it stays in the overlap window; without this the dead-letter topic would get a copy
// every poll.

/** Remembers dead-lettered records for a while, one expiring key per record digest. */
export class DeadLetterMemory {
  constructor(
    private readonly redis: BridgeRedis,
    private readonly keys: AccountKeys,
  ) {}

  /** Which of these bad records (by digest) were not dead-lettered recently. */
  async unseenDeadLetters(digests: readonly string[]): Promise<Set<string>> {
    if (digests.length === 0) return new Set();
    const pipeline = this.redis.pipeline();
    for (const d of digests) pipeline.exists(this.keys.deadLettered(d));
    const results = (await pipeline.exec()) ?? [];
    return new Set(digests.filter((_, i) => results[i]?.[1] === 0));
  }

  /** Remembers dead-lettered records (after they were published) for `ttlSeconds`. */
  async rememberDeadLetters(digests: Iterable<string>, ttlSeconds: number): Promise<void> {
    const pipeline = this.redis.pipeline();
    for (const d of digests) pipeline.set(this.keys.deadLettered(d), '1', 'EX', ttlSeconds);
    await pipeline.exec();
  }
}
