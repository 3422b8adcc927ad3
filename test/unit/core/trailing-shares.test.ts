import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TrailingSchedule, trailingTiers } from '../../../src/core/trailing.js';
import { allotShares, boundOnShareMs, tierDemandRps } from '../../../src/core/trailing-shares.js';
import { freshnessReport } from '../../../src/core/freshness-report.js';

// Each trailing tier's own share of the budget the polls leave: max-min fair shares, the bound a share keeps, the
// schedule stepping open reads in proportion to their shares, and the report status and /readyz show.

const tiers = trailingTiers({ overlapMs: 300_000, boundMs: 30_000, pollIntervalMs: 1_000 });
const [t1, t2, t3] = tiers as [(typeof tiers)[0], (typeof tiers)[0], (typeof tiers)[0]];

describe('allotShares', () => {
  it('an ample budget gives every tier its demand and splits the rest; a short one protects the cheap tiers', () => {
    expect(allotShares(30, [5, 5, 11])).toEqual([8, 8, 14]);
    expect(allotShares(21, [5, 5, 11])).toEqual([5, 5, 11]);
    // 12 requests/s for 21 wanted: 4 each is fair; the two at 5 want more than 4, so all three get 4.
    expect(allotShares(12, [5, 5, 11])).toEqual([4, 4, 4]);
    expect(allotShares(15, [2, 5, 11])).toEqual([2, 5, 8]);
    expect(allotShares(0, [5, 5, 11])).toEqual([0, 0, 0]);
    expect(allotShares(-3, [1])).toEqual([0]);
  });

  it('the whole budget; never less than min(demand, budget / tiers); over a demand only when none is short', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1_000, noNaN: true }),
        fc.array(fc.double({ min: 0, max: 500, noNaN: true }), { minLength: 1, maxLength: 8 }),
        (budget, demands) => {
          const shares = allotShares(budget, demands);
          const total = shares.reduce((a, b) => a + b, 0);
          const wanted = demands.reduce((a, b) => a + b, 0);
          expect(total).toBeCloseTo(budget, 6);
          const anyShort = shares.some((s, i) => s < demands[i]! - 1e-9);
          shares.forEach((s, i) => {
            if (anyShort) expect(s).toBeLessThanOrEqual(demands[i]! + 1e-9);
            else expect(s).toBeCloseTo(demands[i]! + (budget - wanted) / demands.length, 6);
            expect(s).toBeGreaterThanOrEqual(Math.min(demands[i]!, budget / demands.length) - 1e-9);
          });
          // Max-min fair: a tier left short has at least the share of any other tier.
          shares.forEach((s, i) => {
            if (s < demands[i]! - 1e-9) for (const other of shares) expect(s).toBeGreaterThanOrEqual(other - 1e-9);
          });
        },
      ),
    );
  });
});

describe('tierDemandRps and boundOnShareMs', () => {
  const load = { changesPerSecond: 100, pageSize: 100 };

  it('at 100 changes/s and pages of 100, a tier needs its window in pages once a period', () => {
    // Tier 3 reads 330 s of changes (330 pages) every 30 s.
    expect(tierDemandRps(t3, load)).toBeCloseTo(11, 6);
    // An idle listing still costs a request a read.
    expect(tierDemandRps(t3, { changesPerSecond: 0, pageSize: 100 })).toBeCloseTo(1 / 30, 6);
  });

  it('a share that carries its demand keeps period + read; a short one a longer bound; too short: none', () => {
    expect(boundOnShareMs(t3, 11, load)).toBe(60_000);
    expect(boundOnShareMs(t3, 33, load)).toBe(40_000);
    // 2 requests/s read 200 changes/s against 100 arriving: back-to-back reads of 300 s + 300 s, twice that, and a
    // part-filled last page (a request: 1 s) each.
    expect(boundOnShareMs(t3, 2, load)).toBe(602_000);
    expect(boundOnShareMs(t3, 1, load)).toBe(Infinity);
    expect(boundOnShareMs(t3, 0, load)).toBe(Infinity);
  });

  it('the bound never shrinks as the share shrinks', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(t1, t2, t3),
        fc.double({ min: 0.01, max: 50, noNaN: true }),
        fc.double({ min: 0.01, max: 50, noNaN: true }),
        fc.integer({ min: 0, max: 1_000 }),
        (tier, a, b, changesPerSecond) => {
          const l = { changesPerSecond, pageSize: 100 };
          const [small, large] = a < b ? [a, b] : [b, a];
          expect(boundOnShareMs(tier, small, l)).toBeGreaterThanOrEqual(boundOnShareMs(tier, large, l) - 1);
          expect(boundOnShareMs(tier, large, l)).toBeGreaterThanOrEqual(tier.periodMs);
        },
      ),
    );
  });
});

describe('TrailingSchedule turns', () => {
  it('open reads go in proportion to their shares; a tier coming due opens at once and banks nothing', () => {
    const s = new TrailingSchedule(tiers);
    s.allot([1, 1, 2]);
    const open = new Set<number>();
    const pages = new Map<number, number>();
    // At the start nothing is open: the widest opens first (it serves the others).
    for (let i = 0; i < 400; i++) {
      const tier = s.turn(0, open)!;
      if (!open.has(tier)) {
        s.opened(tier, open);
        open.add(tier);
      }
      if (i === 0) expect(tier).toBe(3);
      s.paged(tier);
      pages.set(tier, (pages.get(tier) ?? 0) + 1);
    }
    // Every tier is open within the first three pages, and the pages follow the shares 1 : 1 : 2.
    expect(open).toEqual(new Set([1, 2, 3]));
    expect(pages.get(3)! / pages.get(1)!).toBeCloseTo(2, 1);
    expect(pages.get(2)! / pages.get(1)!).toBeCloseTo(1, 1);
  });

  it('a tier that idled while another read long gets no burst of pages when it comes back', () => {
    const s = new TrailingSchedule(tiers);
    const first = s.due(0, 0)!;
    s.completed(first, 0, 0, 1);
    const open = new Set([3]);
    for (let i = 0; i < 100; i++) s.paged(3);
    // Tier 1 comes due: it opens, then alternates with tier 3 (equal weights) instead of taking 100 pages in a row.
    expect(s.turn(5_000, open)).toBe(1);
    s.opened(1, open);
    open.add(1);
    const order: number[] = [];
    for (let i = 0; i < 6; i++) {
      const t = s.turn(5_000, open)!;
      order.push(t);
      s.paged(t);
    }
    expect(order.filter((t) => t === 1)).toHaveLength(3);
  });

  it('no due tier and nothing open: no turn; a read begun later is not overwritten by an earlier one finishing', () => {
    const s = new TrailingSchedule(tiers);
    const wide = s.due(0, 0)!;
    s.completed(wide, 0, 0, 1_000);
    expect(s.turn(1_000, new Set())).toBeNull();
    // Tier 1 reads from 5 s and commits at 6 s; a tier 3 read begun at 2 s commits at 40 s: tier 1 keeps its own.
    const narrow = s.readFor(1, 5_000)!;
    s.completed(narrow, 5_000, 5_000, 6_000);
    s.completed(s.readFor(3, 2_000)!, 2_000, 2_000, 40_000);
    expect(s.kept()[0]!.keptMs).toBe(6_000);
    expect(s.holdingByTier(41_000)[0]!.holdingMs).toBe(36_000);
  });

  it('holdingByTier: a tier still reading shows its wait since its last read began, not its last kept bound', () => {
    const s = new TrailingSchedule(tiers);
    const r = s.due(0, 0)!;
    s.completed(r, 0, 0, 2_000);
    // The first read kept each tier's period plus its own 2 s.
    expect(s.holdingByTier(3_000).map((x) => x.holdingMs)).toEqual([6_688, 20_750, 32_000]);
    expect(s.holdingByTier(100_000).map((x) => x.holdingMs)).toEqual([100_000, 100_000, 100_000]);
    expect(s.holding(100_000)).toBe(100_000);
  });
});

describe('freshnessReport', () => {
  it('the configured bound, the one that holds, and each tier with its share and the bound the share keeps', () => {
    const report = freshnessReport({
      boundMs: 30_000,
      tiers: [
        { tier: t1, holdingMs: 4_900 },
        { tier: t2, holdingMs: 19_500 },
        { tier: t3, holdingMs: 95_250 },
      ],
      allotment: {
        budgetRps: 6.666,
        tiers: [
          { demandRps: 1.07, shareRps: 1.07, boundOnShareMs: 9_400 },
          { demandRps: 1.07, shareRps: 1.07, boundOnShareMs: 37_500 },
          { demandRps: 11, shareRps: 4.526, boundOnShareMs: Infinity },
        ],
      },
    });
    expect(report).toEqual({
      configuredBoundSeconds: 30,
      holdingBoundSeconds: 95.25,
      trailingBudgetRps: 6.67,
      tiers: [
        {
          tier: 1,
          coverSeconds: 18.75,
          periodSeconds: 4.688,
          demandRps: 1.07,
          shareRps: 1.07,
          short: false,
          boundSeconds: 4.9,
          boundOnShareSeconds: 9.4,
        },
        {
          tier: 2,
          coverSeconds: 75,
          periodSeconds: 18.75,
          demandRps: 1.07,
          shareRps: 1.07,
          short: false,
          boundSeconds: 19.5,
          boundOnShareSeconds: 37.5,
        },
        {
          tier: 3,
          coverSeconds: 300,
          periodSeconds: 30,
          demandRps: 11,
          shareRps: 4.53,
          short: true,
          boundSeconds: 95.25,
          boundOnShareSeconds: null,
        },
      ],
    });
  });

  it('before any read or pricing: nulls, and no tier short', () => {
    const report = freshnessReport({
      boundMs: 30_000,
      tiers: tiers.map((tier) => ({ tier, holdingMs: null })),
      allotment: null,
    });
    expect(report.holdingBoundSeconds).toBeNull();
    expect(report.tiers.every((t) => t.shareRps === null && !t.short && t.boundSeconds === null)).toBe(true);
    expect(freshnessReport({ boundMs: 0, tiers: [], allotment: null })).toEqual({
      configuredBoundSeconds: 0,
      holdingBoundSeconds: null,
      trailingBudgetRps: null,
      tiers: [],
    });
  });
});
