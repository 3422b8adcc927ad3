import { describe, expect, it } from 'vitest';
import { Allotment, type ReplicaRegistry } from '../../../src/bridge/allotment.js';
import type { LeasePort } from '../../../src/bridge/lease-keeper.js';
import { silentLogger } from '../../helpers/fakes.js';

// Balanced leadership on in-memory fakes: a lease table standing in for the leases in Redis (one holder per
// account, never two), and a registry whose live set the test controls.

class LeaseTable {
  readonly holders = new Map<string, string>();
  private epoch = 0;
  lease(account: string, holder: string): LeasePort {
    let held = 0;
    return {
      renew: async () => {
        const now = this.holders.get(account);
        if (now === undefined || now === holder) {
          if (now === undefined) this.epoch += 1;
          this.holders.set(account, holder);
          held = held || this.epoch;
        } else held = 0;
        return held;
      },
      current: () => held,
      release: async () => {
        if (this.holders.get(account) === holder) this.holders.delete(account);
        held = 0;
      },
    };
  }
}

class Registry implements ReplicaRegistry {
  live = new Set<string>();
  async beat(replica: string, _ttlMs: number, leave = false): Promise<string[]> {
    if (leave) this.live.delete(replica);
    else this.live.add(replica);
    return [...this.live];
  }
}

interface Replica {
  id: string;
  allotment: Allotment;
  leases: LeasePort[];
}

async function replica(id: string, accounts: string[], table: LeaseTable, registry: Registry): Promise<Replica> {
  const allotment = new Allotment(registry, {
    replica: id,
    accounts: accounts.length,
    ttlMs: 60_000,
    logger: silentLogger,
  });
  await allotment.start();
  const leases = accounts.map((a) => allotment.gate(table.lease(a, id), a));
  return { id, allotment, leases };
}

/** One renewal round of every lease of every replica, in the given order (as their keepers would do). */
async function round(...replicas: Replica[]): Promise<void> {
  for (const r of replicas) await Promise.all(r.leases.map((l) => l.renew()));
}

const ACCOUNTS = Array.from({ length: 10 }, (_, i) => `acct-${i}`);
const ledBy = (table: LeaseTable, id: string) => [...table.holders.values()].filter((h) => h === id).length;

describe('Allotment', () => {
  it('a lone replica leads every account; a second one gets half after one renewal round of each', async () => {
    const table = new LeaseTable();
    const registry = new Registry();
    const a = await replica('a', ACCOUNTS, table, registry);
    await round(a);
    expect(ledBy(table, 'a')).toBe(10);
    expect(a.allotment.held()).toBe(10);

    const b = await replica('b', ACCOUNTS, table, registry);
    // a learns of b at its next beat; until then it keeps everything (b finds no free lease).
    await round(b);
    expect(ledBy(table, 'b')).toBe(0);
    await (a.allotment as unknown as { beat(): Promise<void> }).beat();
    expect(a.allotment.share()).toBe(5);
    await round(a);
    expect(ledBy(table, 'a')).toBe(5);
    await round(b);
    expect(ledBy(table, 'b')).toBe(5);
    // Stable: more rounds move nothing.
    await round(a, b, a, b);
    expect([ledBy(table, 'a'), ledBy(table, 'b')]).toEqual([5, 5]);
  });

  it('concurrent acquisitions never take more than the share', async () => {
    const table = new LeaseTable();
    const registry = new Registry();
    registry.live.add('other');
    const a = await replica('a', ACCOUNTS, table, registry);
    expect(a.allotment.share()).toBe(5);
    // All ten renewals at once: only five may go to Redis.
    await Promise.all(a.leases.map((l) => l.renew()));
    expect(ledBy(table, 'a')).toBe(5);
    expect(a.allotment.held()).toBe(5);
  });

  it('takes over the accounts of a replica that left, and the share rounds up (3 replicas, 10 accounts: 4/4/2)', async () => {
    const table = new LeaseTable();
    const registry = new Registry();
    const reps = [];
    for (const id of ['a', 'b', 'c']) reps.push(await replica(id, ACCOUNTS, table, registry));
    for (const r of reps) await (r.allotment as unknown as { beat(): Promise<void> }).beat();
    await round(...reps);
    expect(reps.map((r) => ledBy(table, r.id))).toEqual([4, 4, 2]);
    // c leaves cleanly: its leases are released, the registry forgets it, the others take its accounts.
    await Promise.all(reps[2]!.leases.map((l) => l.release()));
    await reps[2]!.allotment.stop();
    for (const r of reps.slice(0, 2)) await (r.allotment as unknown as { beat(): Promise<void> }).beat();
    await round(reps[0]!, reps[1]!);
    expect(reps.slice(0, 2).map((r) => ledBy(table, r.id))).toEqual([5, 5]);
    expect(table.holders.size).toBe(10);
    for (const r of reps.slice(0, 2)) await r.allotment.stop();
  });
});
