import { describe, expect, it } from 'vitest';
import { newDeadLetters } from '../../../src/bridge/pipeline/dead-letters.js';
import { deadLetterMessage } from '../../../src/core/event-size.js';
import { FingerprintKey } from '../../../src/core/fingerprint-key.js';
import { recordDigest } from '../../../src/core/record-digest.js';
import type { Reject } from '../../../src/core/reject.js';

// A dead letter of a record whose id could not be read is keyed by a keyed digest of the record, not left without
// a key: a keyless record goes round-robin (a producer that chose its partition again on a retry wrote one twice and
// dropped another), and the same bad record now always lands in the same partition. The digest is keyed, so the
// key confirms nothing about the record's content to someone guessing it.

const key = new FingerprintKey(Buffer.alloc(32, 7));
const snapshot = { unseenDeadLetters: async (digests: string[]) => new Set(digests) };
const reject = (raw: unknown, id: string | null = null): Reject => ({ id, reason: 'malformed', detail: 'x', raw });

describe('dead-letter keys', () => {
  it('keys a dead letter without a readable id by the keyed digest of its record; one with an id by the id', async () => {
    const rejects = [
      reject({ no: 'id', email: 'a@b.example' }),
      reject({ no: 'id', email: 'a@b.example' }),
      reject(42),
    ];
    rejects.push(reject({ id: 5, bad: true }, '5'));
    const letters = await newDeadLetters(snapshot, rejects, 'sweep', () => 1, key);
    const keys = letters.list.map((dl) => deadLetterMessage(dl, 'acct', 1_000_000).key);
    expect(keys[0]).toMatch(/^record:[0-9a-f]{16}$/);
    // The same record, the same key (and partition); another record, another key; a readable id stays the key.
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).toMatch(/^record:[0-9a-f]{16}$/);
    expect(keys[2]).not.toBe(keys[0]);
    expect(keys[3]).toBe('5');
    // Keyed: neither a plain digest of the record nor the same under another key.
    expect(keys[0]).not.toContain(recordDigest(rejects[0]!.raw).slice(0, 16));
    const other = await newDeadLetters(
      snapshot,
      [rejects[0]!],
      'sweep',
      () => 1,
      new FingerprintKey(Buffer.alloc(32, 8)),
    );
    expect(deadLetterMessage(other.list[0]!, 'acct', 1_000_000).key).not.toBe(keys[0]);
  });
});
