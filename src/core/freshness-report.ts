import { z } from 'zod';
import type { Tier } from './trailing.js';

// The bound that holds for late changes, as `status`, the admin API and /readyz show it for an account its replica
// leads: the configured bound (FRESHNESS_BOUND_MS), the bound that holds now (the widest tier's, measured from the
// reads themselves), and per tier what it covers, how often, its share of the budget and the bound it keeps. The
// metrics say the same (freshness_bound_seconds, trailing_bound_seconds, trailing_share_rps); this is one reading
// of them an operator can ask for by account.

const seconds = z.number().nonnegative();

/** One trailing tier as reported. */
export const TierFreshnessSchema = z.object({
  tier: z.number().int().positive().describe('1: the narrowest'),
  coverSeconds: seconds.describe('the most lateness a change may have and be found by this tier'),
  periodSeconds: seconds.describe('how often it reads when its share of the budget allows'),
  demandRps: seconds.nullable().describe('requests/s it needs to read once a period (null: not priced yet)'),
  shareRps: seconds.nullable().describe('its share of the requests/s the polls leave (null: not priced yet)'),
  short: z.boolean().describe('its share is below its demand: its reads come less often than its period'),
  boundSeconds: seconds
    .nullable()
    .describe('the bound that holds now: the last kept, or the wait since its last read began if longer'),
  boundOnShareSeconds: seconds
    .nullable()
    .describe('the bound its share keeps at the density polls see (null: not priced yet, or it cannot keep up)'),
});

/** One trailing tier as reported. */
export type TierFreshness = z.infer<typeof TierFreshnessSchema>;

/** The bound that holds for late changes of one account led here. */
export const FreshnessReportSchema = z.object({
  configuredBoundSeconds: seconds.describe('FRESHNESS_BOUND_MS (0: no trailing reads)'),
  holdingBoundSeconds: seconds
    .nullable()
    .describe(
      'the bound that holds now for changes shown up to POLL_OVERLAP_MS late (the widest tier; null: no read yet)',
    ),
  trailingBudgetRps: seconds.nullable().describe('requests/s the polls leave to trailing reads (null: not priced yet)'),
  tiers: z.array(TierFreshnessSchema),
});

/** The bound that holds for late changes of one account led here. */
export type FreshnessReport = z.infer<typeof FreshnessReportSchema>;

/** What a report is built from (src/bridge/passes/poll-state.ts and the trailing schedule). */
export interface FreshnessInputs {
  /** FRESHNESS_BOUND_MS. */
  boundMs: number;
  /** Narrowest first, with the bound each holds now (ms; null before a read). */
  tiers: ReadonlyArray<{ tier: Tier; holdingMs: number | null }>;
  /** The tiers' shares as last allotted (null: not yet), in the same order. */
  allotment: {
    budgetRps: number;
    tiers: ReadonlyArray<{ demandRps: number; shareRps: number; boundOnShareMs: number }>;
  } | null;
}

/** The report of `inputs`, in seconds to the millisecond, rates to the hundredth. */
export function freshnessReport(inputs: FreshnessInputs): FreshnessReport {
  const { boundMs, tiers, allotment } = inputs;
  const holding = tiers.at(-1)?.holdingMs ?? null;
  return {
    configuredBoundSeconds: secondsOf(boundMs)!,
    holdingBoundSeconds: secondsOf(holding),
    trailingBudgetRps: allotment ? rate(allotment.budgetRps) : null,
    tiers: tiers.map(({ tier, holdingMs }, i) => {
      const priced = allotment?.tiers[i] ?? null;
      return {
        tier: tier.index,
        coverSeconds: secondsOf(tier.coverMs)!,
        periodSeconds: secondsOf(tier.periodMs)!,
        demandRps: priced ? rate(priced.demandRps) : null,
        shareRps: priced ? rate(priced.shareRps) : null,
        short: priced ? priced.shareRps < priced.demandRps : false,
        boundSeconds: secondsOf(holdingMs),
        boundOnShareSeconds: priced && Number.isFinite(priced.boundOnShareMs) ? secondsOf(priced.boundOnShareMs) : null,
      };
    }),
  };
}

function secondsOf(ms: number | null): number | null {
  return ms === null ? null : Math.round(Math.max(0, ms)) / 1000;
}

function rate(rps: number): number {
  return Math.round(Math.max(0, rps) * 100) / 100;
}
