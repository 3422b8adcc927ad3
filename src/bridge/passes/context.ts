import type { BridgeMetrics } from '../../ops/metrics.js';
import type { PollState } from './poll-state.js';

/** What every pass needs besides the pipeline and the upstream: settings, the clock and its metrics. */
export interface PassContext {
  /** POLL_OVERLAP_MS: the ceiling of the polls' lookback, and how far ahead of the upstream's time data may run. */
  overlapMs: number;
  /** The polls' learned lookback and paging allowance (src/bridge/passes/poll-state.ts). */
  polls: PollState;
  clock: () => number;
  metrics: Pick<
    BridgeMetrics,
    | 'setWatermark'
    | 'incrementalPollCompleted'
    | 'sweepProgress'
    | 'passProgress'
    | 'setPollLookback'
    | 'pollRead'
    | 'pollOverran'
    | 'lateChanges'
    | 'setLatenessSeen'
    | 'trailingRead'
    | 'setFreshnessBound'
    | 'setTrailingShare'
    | 'trailingRequest'
  >;
}
