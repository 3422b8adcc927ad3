import type { PassType } from '../../core/domain.js';
import type { FingerprintKey } from '../../core/fingerprint-key.js';
import { keyedRecordDigest, recordDigest } from '../../core/record-digest.js';
import type { DeadLetter } from '../../kafka/publisher.js';
import type { Reject } from '../../upstream/types.js';
import type { SnapshotPort } from './types.js';

// A record dead-lettered once is not sent again for a day (a daily sweep sends it again while it stays bad).
const DEAD_LETTER_MEMORY_SECONDS = 86_400;

/** A page's dead letters to publish, and the digests to remember once they are committed. */
export interface PageDeadLetters {
  list: DeadLetter[];
  digests: Set<string>;
}

/**
 * The dead letters not already sent today (the topic keeps each distinct bad record once a day); one without a
 * readable id is keyed by its record's digest under `key` (the fingerprint key).
 */
export async function newDeadLetters(
  snapshot: Pick<SnapshotPort, 'unseenDeadLetters'>,
  rejects: Reject[],
  pass: PassType,
  now: () => number,
  key: FingerprintKey | null = null,
): Promise<PageDeadLetters> {
  if (rejects.length === 0) return { list: [], digests: new Set() };
  const detectedAt = now();
  const digests = rejects.map((r) => recordDigest(r.raw));
  const unseen = await snapshot.unseenDeadLetters(digests);
  const list = rejects
    .filter((_, i) => unseen.has(digests[i]!))
    .map((reject) => {
      const recordKey = reject.id === null && key ? keyedRecordDigest(reject.raw, key) : null;
      return { reject, pass, detectedAt, recordKey };
    });
  return { list, digests: unseen };
}

/** Remembers committed dead letters for a day, so that they are not sent again meanwhile. */
export async function rememberDeadLetters(
  snapshot: Pick<SnapshotPort, 'rememberDeadLetters'>,
  digests: ReadonlySet<string>,
): Promise<void> {
  if (digests.size > 0) await snapshot.rememberDeadLetters(digests, DEAD_LETTER_MEMORY_SECONDS);
}

/** The dead letter of a quarantined review: a reference (its id), not the record. */
export function quarantineReject(id: number): Reject {
  return { id: String(id), reason: 'quarantined', detail: '(record):quarantined', raw: { id, reference: true } };
}
