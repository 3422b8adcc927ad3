// What a process has learnt about a changelog topic shared by accounts (multi-account mode: every key starts with
// `<account>:`), so that a brand-new account's full restore need not read the whole topic again: without it, a cold
// start of N new accounts reads the topic N times (N² records).
//
// Per changelog, offsets E (per partition) and a set S of key prefixes, with the invariant: every account prefix
// that has a committed record (end markers aside) at an offset below E[p] of partition p is in S. An account not in
// S has nothing below E, so its full restore may start at E. Why "nothing below E" stays true:
// - a read learns E from its end markers, which a read_committed consumer only receives once every transaction
//   written before them has completed: nothing below E can still become committed afterwards, and anything written
//   later lands above E;
// - compaction only removes records, so a prefix absent below E stays absent;
// - end markers are skipped by every restore, so an account whose only records below E are markers has nothing a
//   restore needs there.
// S may hold more prefixes than needed (that only costs a full read); E never passes an unread record. Like the
// offsets Redis keeps for tail restores, E assumes the topic is not deleted and created again under the process.

/** Offsets per partition. */
export type PartitionOffsets = Record<number, number>;

/** What the index knows of one changelog. */
interface Learnt {
  ends: Map<number, number>;
  prefixes: Set<string>;
}

/** Names a changelog across the process: the same topic on another cluster is another changelog. */
export function changelogName(brokers: readonly string[], topic: string): string {
  return `${brokers.join(',')}|${topic}`;
}

/** The account prefix of a changelog key (up to and including its first ':'), or null for a key without one. */
export function keyPrefixOf(key: string): string | null {
  const colon = key.indexOf(':');
  return colon < 0 ? null : key.slice(0, colon + 1);
}

/** One per process: where a new account's full restore of a shared changelog may start (see the module comment). */
export class ChangelogIndex {
  private readonly changelogs = new Map<string, Learnt>();

  /** Offsets a full restore of `prefix` may start at (it has nothing before them), or null: from the beginning. */
  startFor(changelog: string, prefix: string): PartitionOffsets | null {
    const learnt = this.changelogs.get(changelog);
    if (!learnt || prefix === '' || learnt.prefixes.has(prefix)) return null;
    return Object.fromEntries(learnt.ends);
  }

  /**
   * Records a successful read that scanned every record of every partition from `from[p]` (absent: 0) up to
   * `ends[p]` and saw these key prefixes.
   */
  learn(changelog: string, from: PartitionOffsets, ends: PartitionOffsets, seen: ReadonlySet<string>): void {
    const learnt = this.changelogs.get(changelog);
    if (!learnt) {
      // Only a read from the beginning knows everything below its ends.
      if (Object.values(from).some((offset) => offset > 0)) return;
      this.changelogs.set(changelog, { ends: new Map(entries(ends)), prefixes: new Set(seen) });
      return;
    }
    // The read must leave no gap above what is known: S covers [0, E[p]) and the read [from[p], ends[p]), so
    // together they cover [0, max(E[p], ends[p])). A tail read starting beyond E proves nothing about the gap.
    // Concurrent reads need no more than this check: learn runs whole (one thread), E and S only grow, so a read
    // that started from an E that has grown since still starts at or below the current E. Two reads from the same
    // E both merge, each partition's new E coming from a read that scanned everything between the old E and it.
    for (const [partition, offset] of entries(from)) {
      if (offset > (learnt.ends.get(partition) ?? 0)) return;
    }
    for (const [partition, end] of entries(ends)) {
      learnt.ends.set(partition, Math.max(end, learnt.ends.get(partition) ?? 0));
    }
    for (const prefix of seen) learnt.prefixes.add(prefix);
  }
}

/** The entries of offsets per partition, with numeric partitions. */
function entries(offsets: PartitionOffsets): Array<[number, number]> {
  return Object.entries(offsets).map(([partition, offset]) => [Number(partition), offset]);
}
