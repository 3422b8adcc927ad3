import type { PassType } from '../core/domain.js';
import type { Instruments } from './metric-definitions.js';
import { PASS_OUTCOMES, passLabel, type PassOutcome } from './metric-labels.js';

// The recorders of how the passes go (outcomes, durations, progress), restores, deletions, the pause flag and
// leadership: what the loop and the passes report, apart from what the pages they commit produce (BridgeMetrics).

/** Recorders of passes, restores, deletions, pause and leadership; BridgeMetrics provides the instruments. */
export abstract class PassRecorders {
  /** The instruments of the registry, created by the subclass. */
  protected abstract readonly m: Instruments;

  /** Counts a restore from the Kafka changelog, its entries and duration. */
  restoreFinished(kind: 'full' | 'tail', entries: number, seconds: number): void {
    this.m.restores.inc({ kind });
    if (entries > 0) this.m.restoreEntries.inc({ kind }, entries);
    if (Number.isFinite(seconds) && seconds >= 0) this.m.restoreDuration.observe({ kind }, seconds);
  }

  /** Counts a finished pass and observes its duration. */
  passFinished(pass: PassType, outcome: PassOutcome, seconds: number): void {
    const p = passLabel(pass);
    this.m.passes.inc({ pass: p, outcome: PASS_OUTCOMES.includes(outcome) ? outcome : 'error' });
    if (Number.isFinite(seconds) && seconds >= 0) this.m.passDuration.observe({ pass: p }, seconds);
  }

  /** Reports progress of the reconciliation sweep (or initial load). */
  sweepProgress(reviewsSeen: number, running: boolean): void {
    this.m.sweepSeen.set(reviewsSeen);
    this.m.sweepRunning.set(running ? 1 : 0);
  }

  /** Counts reviews found deleted upstream (after their review.deleted events were acknowledged). */
  reviewsDeleted(n: number): void {
    if (n > 0) this.m.reviewsDeletedTotal.inc(n);
  }

  /** Counts a sweep whose deletions the guard refused (the refused-deletion alert watches it). */
  deletionRefused(): void {
    this.m.deletionsRefused.inc();
  }

  /** Counts a complete sweep whose deletion detection was deferred, by reason. */
  deletionDeferred(reason: string): void {
    this.m.deletionDeferredTotal.inc({ reason });
  }

  /** Reports how many complete sweeps in a row deferred deletion detection (the deferral alert watches it). */
  setDeletionDeferredSweeps(n: number): void {
    this.m.deletionDeferredSweeps.set(n);
  }

  /** Reports whether the operator pause flag is set. */
  setPaused(paused: boolean): void {
    this.m.paused.set(paused ? 1 : 0);
  }

  /** Reports whether Redis keeps evicting the account's snapshot (publishing stopped until a restore holds). */
  setSnapshotEvicting(evicting: boolean): void {
    this.m.snapshotEvicting.set(evicting ? 1 : 0);
  }

  /** Reports the fraction done of a running sweep or resync; null removes the series (nothing running). */
  passProgress(pass: PassType | 'resync', fraction: number | null): void {
    const label = pass === 'resync' ? 'resync' : passLabel(pass);
    if (fraction === null || !Number.isFinite(fraction)) this.m.progressRatio.remove({ pass: label });
    else this.m.progressRatio.set({ pass: label }, Math.min(1, Math.max(0, fraction)));
  }

  /** Reports this replica's role and the lease epoch. */
  /** Shows how far before the watermark polls start now. */
  setPollLookback(ms: number): void {
    this.m.pollLookback.set(ms / 1000);
  }

  /**
   * Counts changes that became visible late: seen by a poll within its lookback, by a trailing read's tier
   * (`trailing_<n>`) or by a sweep beyond them all.
   */
  lateChanges(foundBy: string, n: number): void {
    if (n > 0) this.m.lateChanges.inc({ found_by: foundBy }, n);
  }

  /** Shows the lateness (ms) of the latest late change a finder found. */
  setLatenessSeen(foundBy: string, ms: number): void {
    this.m.latenessSeen.set({ found_by: foundBy }, ms / 1000);
  }

  /** Shows a trailing tier's last read: the window it read and the bound it kept (ms). */
  trailingRead(tier: number, windowMs: number | null, keptMs: number | null): void {
    if (windowMs !== null) this.m.trailingWindow.set({ tier: String(tier) }, windowMs / 1000);
    if (keptMs !== null) this.m.trailingBound.set({ tier: String(tier) }, keptMs / 1000);
  }

  /** Counts a request (a page) of a trailing tier's read. */
  trailingRequest(tier: number): void {
    this.m.trailingRequests.inc({ tier: String(tier) });
  }

  /** Shows a trailing tier's share of the requests/s the polls leave (src/core/trailing-shares.ts). */
  setTrailingShare(tier: number, rps: number): void {
    this.m.trailingShare.set({ tier: String(tier) }, rps);
  }

  /** Shows the bound (ms) that holds now for a change up to POLL_OVERLAP_MS late (null: no trailing read yet). */
  setFreshnessBound(ms: number | null): void {
    if (ms === null) this.m.freshnessBound.reset();
    else this.m.freshnessBound.set(ms / 1000);
  }

  /** Counts a poll that did not fit its interval. */
  pollOverran(): void {
    this.m.pollsOverrun.inc();
  }

  /** Marks the topics weaker than asked (1) among those checked (0), as the leadership's connect found them. */
  topicDurability(checked: readonly string[], shortfalls: ReadonlyMap<string, string>): void {
    for (const topic of checked) this.m.topicDurabilityUnmet.set({ topic }, shortfalls.has(topic) ? 1 : 0);
  }

  /** Reports the refusal of this replica's leadership by the setting it names, or none (null). */
  setLeadershipRefused(setting: string | null): void {
    this.m.leadershipRefused.reset();
    if (setting !== null) this.m.leadershipRefused.set({ setting }, 1);
  }

  setLeadership(state: 'leader' | 'standby', epoch: number): void {
    this.m.leader.set(state === 'leader' ? 1 : 0);
    this.m.leaseEpoch.set(epoch);
  }
}
