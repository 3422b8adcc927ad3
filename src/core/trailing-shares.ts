import type { Tier } from './trailing.js';

// Each trailing tier's own share of the rate budget the polls leave. Counted together, a wide tier's long read held
// every narrower tier back for its whole length (and a stream of cheap narrow reads could hold the wide one back):
// with the budget short, one tier's bound then stretched to another's. Here the budget is split max-min fairly
// (water-filling): a tier that needs less than an equal part gets all it needs, the rest is split evenly among the
// others, so no tier gets less than min(its demand, budget / tiers) whatever the others ask (and budget beyond every
// demand is split evenly). The loop then steps
// the open reads' pages in proportion to their shares (TrailingSchedule.turn), and the bound each share keeps is
// computed here, so that what is reported for a short tier is the bound it can hold, not the one it was meant to.

/** The load the tiers' reads are priced at. */
export interface TrailingLoad {
  /** Changes a second the polls see (their density). */
  changesPerSecond: number;
  /** Reviews a request reads (UPSTREAM_PAGE_SIZE). */
  pageSize: number;
}

/** Requests a second a tier needs to read its window (its coverage plus its period) once a period. */
export function tierDemandRps(tier: Tier, load: TrailingLoad): number {
  return requestsPerRead(tier.coverMs + tier.periodMs, load) / (tier.periodMs / 1000);
}

/**
 * Each tier's share (requests/s) of `budgetRps`, max-min fair over `demands` (requests/s, in tier order): never less
 * than min(its demand, budget / tiers), never more than its demand while another tier is short, and the whole
 * budget: what is left once every demand is met is split evenly (a tier's reads then go faster than they must;
 * trailing pages come before a sweep's, which gets what the reads do not take).
 */
export function allotShares(budgetRps: number, demands: readonly number[]): number[] {
  const shares = demands.map(() => 0);
  let left = Number.isFinite(budgetRps) ? Math.max(0, budgetRps) : 0;
  const order = demands.map((d, i) => ({ d: Math.max(0, d), i })).sort((a, b) => a.d - b.d);
  order.forEach(({ d, i }, rank) => {
    const given = Math.min(d, left / (order.length - rank));
    shares[i] = given;
    left -= given;
  });
  return shares.map((x) => x + left / Math.max(1, shares.length));
}

/**
 * The bound (ms) a tier keeps on `shareRps` while every tier reads at once (alone, a read goes faster: an upper
 * bound): its period plus its read when the share carries a read a period;
 * else reads run back to back, each window W = coverage + P taking P (pages rounded up), and a change shown as one
 * begins waits two of them. Infinity when the share reads fewer changes a second than the listing gains (the bound grows while it
 * lasts).
 */
export function boundOnShareMs(tier: Tier, shareRps: number, load: TrailingLoad): number {
  if (!(shareRps > 0)) return Infinity;
  const readMs = (requestsPerRead(tier.coverMs + tier.periodMs, load) / shareRps) * 1000;
  if (readMs <= tier.periodMs) return tier.periodMs + readMs;
  const readable = shareRps * load.pageSize; // changes a second the share reads
  if (readable <= load.changesPerSecond) return Infinity;
  // P = (changes in coverage + P, plus a part-filled last page) / readable: the last page is a whole request, and
  // leaving it out made the bound smaller just past the branch above than just before it (not monotone in share).
  const periodMs = (load.changesPerSecond * tier.coverMs + 1000 * load.pageSize) / (readable - load.changesPerSecond);
  return 2 * periodMs;
}

/** Requests a read of `windowMs` of updated_date takes (one at least: an empty page is a request too). */
function requestsPerRead(windowMs: number, load: TrailingLoad): number {
  return Math.max(1, Math.ceil((load.changesPerSecond * windowMs) / 1000 / Math.max(1, load.pageSize)));
}
