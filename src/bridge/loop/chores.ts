import type { Logger } from 'pino';
import type { BridgeMetrics } from '../../ops/metrics.js';
import { heartbeatDue, pauseCheckDue, type ScheduleTiming } from '../../core/schedule.js';
import type { PassRunner } from '../passes/index.js';

// What a leader does before each step besides its passes, on their own cadence: it reads the operator's pause flag
// at most once a second, and sends heartbeats in the background.

/** What the chores need. */
export interface ChoreDeps {
  passes: Pick<PassRunner, 'pausedSince' | 'heartbeat'>;
  metrics: Pick<BridgeMetrics, 'setPaused'>;
  logger: Logger;
  timing: ScheduleTiming;
  clock: () => number;
}

/** The pause flag as the leader last read it, and its heartbeats. */
export class LeaderChores {
  private pause: { checkedAt: number; since: number | null } = { checkedAt: -Infinity, since: null };
  private nextHeartbeatAt = 0;
  private heartbeatInFlight = false;

  constructor(private readonly deps: ChoreDeps) {}

  /** Reads the pause flag when due and sends a heartbeat when due; resolves whether an operator paused the bridge. */
  async paused(epoch: number): Promise<boolean> {
    const paused = await this.pausedNow();
    this.heartbeat(epoch, paused);
    return paused;
  }

  /** Whether an operator paused the bridge; read from Redis at most every PAUSE_CHECK_MS, not on every page. */
  private async pausedNow(): Promise<boolean> {
    const { deps } = this;
    const now = deps.clock();
    if (pauseCheckDue(this.pause.checkedAt, now)) {
      const since = await deps.passes.pausedSince();
      if ((since !== null) !== (this.pause.since !== null)) {
        deps.logger.info({ paused: since !== null }, since !== null ? 'paused by an operator' : 'resumed');
      }
      this.pause = { checkedAt: now, since };
      deps.metrics.setPaused(since !== null);
    }
    return this.pause.since !== null;
  }

  /** Sends a heartbeat when one is due, in the background: a slow Kafka must not hold up the passes. */
  private heartbeat(epoch: number, paused: boolean): void {
    const { deps } = this;
    const now = deps.clock();
    if (!heartbeatDue(this.nextHeartbeatAt, this.heartbeatInFlight, now, deps.timing)) return;
    this.nextHeartbeatAt = now + (deps.timing.heartbeatIntervalMs ?? 0);
    this.heartbeatInFlight = true;
    deps.passes
      .heartbeat(epoch, paused)
      .catch((err: unknown) => deps.logger.warn({ err }, 'heartbeat not sent'))
      .finally(() => (this.heartbeatInFlight = false));
  }
}
