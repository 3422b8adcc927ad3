// Whether Redis holds an account's snapshot: a Redis that evicts (maxmemory under an evicting policy, smaller than
// the snapshot needs) removes keys faster than a restore writes them back. Every loss is detected before anything
// is derived from it (docs/exactly-once.md, "Some keys lost, not all"), but restoring again and again publishes
// a little between losses and says nothing; so a restore that Redis evicted keys during, or after which a key of
// the snapshot is missing, does not hold: the account publishes nothing until a restore holds, and /readyz, the
// metrics and one log line per change say why. Pure: the adapters measure, the passes decide (src/bridge/passes).

/** What a restore that did not hold saw. */
export interface EvictionSeen {
  /** Keys Redis evicted (INFO stats evicted_keys, every primary) while the restore ran; null: not readable. */
  evicted: number | null;
  /** What of the snapshot was missing after the restore (null: nothing). */
  lost: string | null;
  /** About how many bytes the snapshot needs in Redis, with what else Redis holds (null: not estimated). */
  needBytes: number | null;
  /** Redis's maxmemory in bytes (null: unknown; 0: no limit). */
  maxmemory: number | null;
}

/** The account's snapshot is held, or Redis keeps evicting it (since when, what was seen last). */
export type SnapshotHoldState =
  { kind: 'held' } | ({ kind: 'evicting'; since: number; attempts: number } & EvictionSeen);

const MIB = 1024 * 1024;

/** The line that says why an account publishes nothing (names the account and sizes, never a secret). */
export function evictionMessage(account: string, seen: EvictionSeen): string {
  const mib = (bytes: number) => Math.max(1, Math.ceil(bytes / MIB));
  const what =
    seen.maxmemory && (seen.evicted ?? 0) > 0
      ? `Redis maxmemory too small for the snapshot of account ${account} (` +
        (seen.needBytes !== null && seen.needBytes > seen.maxmemory ? `needs about ${mib(seen.needBytes)} MiB, ` : '') +
        `maxmemory is ${mib(seen.maxmemory)} MiB)`
      : `Redis cannot hold the snapshot of account ${account}`;
  const how = [
    seen.evicted !== null && seen.evicted > 0 ? `Redis evicted ${seen.evicted} keys while it was restored` : null,
    seen.lost !== null ? `lost: ${seen.lost}` : null,
  ].filter((s) => s !== null);
  return (
    `${what}: ${how.join('; ') || 'keys vanished while it was restored'}; nothing is published for the account ` +
    'until a restore holds (raise maxmemory, and set maxmemory-policy noeviction)'
  );
}

/** The pause before the next restore after `attempts` restores in a row that did not hold: 1 s doubling to 30 s. */
export function evictionBackoffMs(attempts: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, Math.min(attempts - 1, 5)));
}

/** One account's hold state, with listeners told of every change (the process's readiness). */
export class SnapshotHold {
  private current: SnapshotHoldState = { kind: 'held' };
  private readonly listeners = new Set<() => void>();

  /** The state now. */
  state(): SnapshotHoldState {
    return this.current;
  }

  /** A restore did not hold; resolves whether this is a change (held before: the caller logs it once). */
  evicting(seen: EvictionSeen, now: number): boolean {
    const before = this.current;
    const changed = before.kind === 'held';
    const since = before.kind === 'evicting' ? before.since : now;
    const attempts = before.kind === 'evicting' ? before.attempts + 1 : 1;
    this.current = { kind: 'evicting', since, attempts, ...seen };
    if (changed) this.notify();
    return changed;
  }

  /** A restore held; resolves whether this is a change (evicting before). */
  held(): boolean {
    if (this.current.kind === 'held') return false;
    this.current = { kind: 'held' };
    this.notify();
    return true;
  }

  /** Calls `listener` at every change of state. */
  onChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }
}
