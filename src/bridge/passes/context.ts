import type { BridgeMetrics } from '../../ops/metrics.js';

/** What every pass needs besides the pipeline and the upstream: settings, the clock and its metrics. */
export interface PassContext {
  /** How far before the watermark incremental polls start (covers clock skew and unordered listings). */
  overlapMs: number;
  clock: () => number;
  metrics: Pick<BridgeMetrics, 'setWatermark' | 'incrementalPollCompleted' | 'sweepProgress' | 'passProgress'>;
}
