import type { RequestPriority } from '../core/domain.js';
import { STATUS_FIELDS } from '../core/review.js';
import type { UpstreamHooks } from '../upstream/types.js';
import type { Instruments } from './metric-definitions.js';
import {
  rejectKindLabel,
  statusCodeLabel,
  THROTTLE_STATUSES,
  TOKEN_OUTCOMES,
  type BoundedVocabulary,
} from './metric-labels.js';

// The upstream client's side of the metrics: its hooks, recording requests, throttles, retries, the clock offset,
// token refreshes and limiter waits with bounded labels, and the share of the rate budget polls take.

const BUDGET_WINDOW_MS = 60_000;

/** Upstream requests of incremental polls over the last minute, as a share of the minute's rate budget. */
export class PollBudget {
  private readonly times: number[] = [];
  private readonly budget: number;

  constructor(
    rateLimitRps: number,
    private readonly clock: () => number,
  ) {
    this.budget = (rateLimitRps * BUDGET_WINDOW_MS) / 1000;
  }

  /** Records one poll request now. */
  requested(now = this.clock()): void {
    this.times.push(now);
    // Bounded between scrapes too: only the last minute matters, and the limiter caps how many fit in it.
    this.forget(now);
  }

  /** The share (0..1) of the last minute's budget spent on polls. */
  share(now = this.clock()): number {
    this.forget(now);
    return Math.min(1, this.times.length / this.budget);
  }

  private forget(now: number): void {
    while (this.times.length > 0 && this.times[0]! < now - BUDGET_WINDOW_MS) this.times.shift();
  }
}

/** The upstream client's hooks, recording into the upstream metrics with bounded labels. */
export function upstreamRecorders(
  m: Instruments,
  retryReasons: BoundedVocabulary,
  pollBudget: PollBudget,
): UpstreamHooks {
  const endpointLabel = (e: string): 'token' | 'reviews' => (e === 'token' ? 'token' : 'reviews');
  const passLabel = (k: string): RequestPriority => (k === 'sweep' ? 'sweep' : 'incremental');
  return {
    onRequest: (endpoint, status, durationSeconds) => {
      const e = endpointLabel(endpoint);
      m.upstreamRequests.inc({ endpoint: e, status: statusCodeLabel(status) });
      if (Number.isFinite(durationSeconds) && durationSeconds >= 0) {
        m.upstreamDuration.observe({ endpoint: e }, durationSeconds);
      }
    },
    onThrottled: (status) => {
      const s = statusCodeLabel(status);
      m.upstreamThrottled.inc({ status: THROTTLE_STATUSES.includes(s) ? s : 'other' });
    },
    onRetry: (endpoint, reason) => {
      m.upstreamRetries.inc({ endpoint: endpointLabel(endpoint), reason: retryReasons.label(reason) });
    },
    onClockOffset: (seconds) => {
      if (Number.isFinite(seconds)) m.clockOffset.set(seconds);
    },
    onPageShrunk: (reason) => {
      m.pageShrinks.inc({ reason: reason === 'too_large' ? 'too_large' : 'status_400' });
    },
    onTokenRefresh: (outcome) => {
      const o = (TOKEN_OUTCOMES as readonly string[]).includes(outcome) ? outcome : 'error';
      m.tokenRefreshes.inc({ outcome: o });
    },
    onLimiterWait: (kind, seconds) => {
      if (kind === 'incremental') pollBudget.requested();
      if (Number.isFinite(seconds) && seconds >= 0) m.limiterWait.observe({ pass: passLabel(kind) }, seconds);
    },
    onReject: (reason) => {
      m.recordsRejected.inc({ reason: rejectKindLabel(reason) });
    },
    onUnknownStatus: (field) => {
      const f = (STATUS_FIELDS as readonly string[]).includes(field) ? field : 'other';
      m.unknownStatuses.inc({ field: f });
    },
  };
}
