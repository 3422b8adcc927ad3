import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideDetection, SweepListing } from '../../../src/core/deletion-inference.js';

// The inference that lets deletion detection go on while records whose id cannot be read stay listed: which
// sweeps defer, and which not-seen reviews are kept because an unreadable record may stand for them.

type Listed = { id: number } | { body: string };

/** A SweepListing of the records in listing order (the body stands for its keyed digest). */
function listingOf(records: readonly Listed[], cap?: number): SweepListing {
  const listing = new SweepListing(cap);
  for (const r of records) {
    if ('id' in r) listing.listed(r.id);
    else listing.unreadableRecord(r.body);
  }
  return listing;
}

describe('decideDetection', () => {
  it('detects with no unreadable record', () => {
    const d = decideDetection(listingOf([{ id: 1 }, { id: 3 }]), null);
    expect(d).toMatchObject({ action: 'detect', remember: [] });
  });

  it('defers once for a new unreadable record, then detects while it stays the same, keeping its gap', () => {
    const records: Listed[] = [{ id: 1 }, { body: 'b1' }, { id: 4 }, { id: 9 }];
    const first = decideDetection(listingOf(records), []);
    expect(first).toEqual({ action: 'defer', reason: 'new_unreadable', unreadable: 1, fresh: 1, remember: ['b1'] });
    const second = decideDetection(listingOf(records), first.remember);
    expect(second.action).toBe('detect');
    if (second.action !== 'detect') return;
    // Ids 2 and 3 lie between the listed 1 and 4: one of them may be the unreadable record, neither is deleted.
    expect([2, 3].map(second.keep)).toEqual([true, true]);
    expect([5, 8, 10].map(second.keep)).toEqual([false, false, false]);
  });

  it('counts repeats: a second identical unreadable body is new', () => {
    const once = decideDetection(listingOf([{ body: 'x' }, { id: 2 }]), []);
    const twice = decideDetection(listingOf([{ body: 'x' }, { id: 2 }, { body: 'x' }]), once.remember);
    expect(twice).toMatchObject({ action: 'defer', reason: 'new_unreadable', fresh: 1 });
  });

  it('defers with its own reason beyond the cap, and forgets (null)', () => {
    const many: Listed[] = Array.from({ length: 4 }, (_, i) => ({ body: `b${i}` }));
    expect(decideDetection(listingOf(many, 3), [], 3)).toMatchObject({
      action: 'defer',
      reason: 'too_many_unreadable',
      unreadable: 4,
      remember: null,
    });
  });

  it('defers when the listing is not in id order (an unreadable record has no place then)', () => {
    const records: Listed[] = [{ id: 5 }, { body: 'b' }, { id: 2 }];
    expect(decideDetection(listingOf(records), ['b'])).toMatchObject({ action: 'defer', reason: 'unordered_listing' });
    // Without unreadable records the order does not matter.
    expect(decideDetection(listingOf([{ id: 5 }, { id: 2 }]), []).action).toBe('detect');
  });

  it('treats an unknown memory (null) as no memory', () => {
    expect(decideDetection(listingOf([{ body: 'b' }]), null)).toMatchObject({ action: 'defer', fresh: 1 });
  });
});

// The model: an upstream of reviews (by id), each listed readable or as an unreadable body (a small alphabet, so
// that identical bodies happen), plus unreadable junk that stands for no review, listed in id order, or in an order
// whose readable ids do not ascend (an upstream not in id order, which the bridge must notice); the bridge's
// snapshot of ids and the digests it remembers. Any sequence of changes and sweeps.
const MAX_ID = 12;
const bodyArb = fc.constantFrom('a', 'b', 'c');
const changeArb = fc.record({
  deleted: fc.uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 4 }),
  created: fc.uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 4 }),
  broken: fc.array(fc.tuple(fc.integer({ min: 1, max: MAX_ID }), bodyArb), { maxLength: 3 }),
  fixed: fc.uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 3 }),
  junk: fc.array(fc.tuple(fc.integer({ min: 0, max: MAX_ID }), bodyArb), { maxLength: 2 }),
  shuffled: fc.boolean(),
  seed: fc.integer(),
});

describe('deletion inference over sweeps (property)', () => {
  it('no sequence of sweeps deletes a review that is still listed, readable or not', () => {
    fc.assert(
      fc.property(fc.array(changeArb, { minLength: 1, maxLength: 12 }), (changes) => {
        // Upstream: id -> null (readable) or the body it is listed with.
        const upstream = new Map<number, string | null>();
        for (let id = 1; id <= 8; id++) upstream.set(id, null);
        const snapshot = new Set(upstream.keys());
        let remembered: string[] | null = null;
        for (const change of changes) {
          for (const id of change.deleted) upstream.delete(id);
          for (const id of change.created) if (!upstream.has(id)) upstream.set(id, null);
          for (const [id, body] of change.broken) if (upstream.has(id)) upstream.set(id, body);
          for (const id of change.fixed) if (upstream.has(id)) upstream.set(id, null);
          // The listing: reviews in id order, junk at its place, or everything in some other order.
          const placed: Array<[number, Listed]> = [...upstream].map(([id, body]) => [
            id,
            body === null ? { id } : { body },
          ]);
          for (const [at, body] of change.junk) placed.push([at + 0.5, { body }]);
          placed.sort(([a], [b]) => a - b);
          const sorted = placed.map(([, r]) => r);
          let records = sorted;
          if (change.shuffled) {
            const arb = fc.shuffledSubarray(sorted, { minLength: sorted.length });
            records = fc.sample(arb, { seed: change.seed, numRuns: 1 })[0] ?? sorted;
            // The inference's premise: the upstream lists in id order. A shuffle whose readable ids still ascend
            // only moved unreadable records away from their ids, which such an upstream cannot do.
            const ids = records.flatMap((r) => ('id' in r ? [r.id] : []));
            if (ids.every((id, k) => k === 0 || id > ids[k - 1]!)) records = sorted;
          }
          const listing = listingOf(records);
          const decision = decideDetection(listing, remembered);
          remembered = decision.remember;
          if (decision.action === 'detect') {
            for (const id of [...snapshot]) {
              if (listing.seen.has(id) || decision.keep(id)) continue;
              // Deleted: it must be gone upstream.
              expect(upstream.has(id), `review ${id} deleted while listed`).toBe(false);
              snapshot.delete(id);
            }
          }
          for (const id of upstream.keys()) if (listing.seen.has(id)) snapshot.add(id);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('a review deleted while a persistent unreadable record stays listed is deleted by the next sweep', () => {
    const before: Listed[] = [{ id: 1 }, { body: 'old' }, { id: 5 }, { id: 7 }];
    const first = decideDetection(listingOf(before), null);
    const second = decideDetection(listingOf(before), first.remember);
    expect(second.action).toBe('detect');
    // Review 7 deleted upstream: not seen, not in the gap (1, 5): deleted.
    const after = listingOf([{ id: 1 }, { body: 'old' }, { id: 5 }]);
    const third = decideDetection(after, second.remember);
    expect(third.action === 'detect' && !after.seen.has(7) && !third.keep(7)).toBe(true);
  });
});
