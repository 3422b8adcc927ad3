import { expect } from 'vitest';
import { accountKeys } from '../../src/redis/connection.js';
import { startSimulator } from '../../src/simulator/index.js';
import { capturedLogger, startTestBridge, testEnv, topicsOf } from './bridge.js';
import { CheckpointMonitor, Oracle, readTopics, settle, summary, violations } from './oracle.js';
import { waitFor } from './processes.js';
import { redisAddress } from './topologies.js';

// The failover tests' common run: a simulator with a scripted history, the bridge in-process on the topology
// under test, and faults injected at chosen moments: in the middle of the initial load and while polling, either
// from inside a commit (between the page's publish and its Redis commit: "mid-commit") or from the test. After the
// history, the oracle judges every event read back (nothing lost, nothing invented, duplicates only identical)
// and the confirmed checkpoint must never have gone back.

/**
 * Faults while polling per run (after the one in the initial load): 1 in `npm test`; the long variant repeats them,
 * e.g. FAULT_TOPOLOGY_ROUNDS=10.
 */
export const FAULT_ROUNDS = Number(process.env.FAULT_TOPOLOGY_ROUNDS ?? 1);

/** The faults of a run: one in the initial load, then FAULT_ROUNDS while polling (round numbers from 0). */
export function faultRounds(initial: Fault, polling: (round: number) => Fault): Fault[] {
  return [initial, ...Array.from({ length: FAULT_ROUNDS }, (_, round) => polling(round))];
}

/** One fault of a run. */
export interface Fault {
  /** Shown in the figures. */
  name: string;
  /** In the middle of the initial load, or while incremental polls run after it. */
  during: 'initial' | 'polling';
  /** 'commit': run `inject` inside the bridge's next commit (before it reaches Redis); 'test': from the test. */
  from: 'commit' | 'test';
  /** Resolves once the topology can take this fault (a healthy deployment is the premise of the fault tested). */
  ready?(): Promise<void>;
  /** Breaks something (kills a member, starts a failover). */
  inject(): Promise<void>;
  /** After inject: waits for the topology to heal (a promoted replica, a member restarted) and says what it did. */
  heal?(): Promise<Record<string, unknown>>;
}

/** Options of a failover run. */
export interface FailoverRun {
  title: string;
  seed: number;
  reviews?: number;
  /** Bridge settings for the topology (KAFKA_BROKERS, REDIS_SENTINELS, ...). */
  env: Record<string, string>;
  /** Kafka bootstrap to read the events back from (default: the shared broker). */
  brokers?: string[];
  /** Replica acknowledgements a checkpoint sample needs to count (1 on replicated Redis). */
  confirmReplicas?: number;
  faults: Fault[];
  /** Where the topology stands (members' roles and links), for the message of a fault it did not recover from. */
  describe?(): Promise<string>;
}

/** Figures of one fault: how long until the bridge committed again. */
export interface FaultFigures {
  fault: string;
  during: string;
  recoverMs: number;
  [detail: string]: unknown;
}

/** Runs the scenario and asserts the oracle's verdict; resolves the figures (also printed). */
export async function runFailover(run: FailoverRun): Promise<{ faults: FaultFigures[]; republished: number }> {
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const sim = await startSimulator({ reviewCount: run.reviews ?? 500, seed: run.seed, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, {
      UPSTREAM_PAGE_SIZE: '10',
      UPSTREAM_RATE_LIMIT_RPS: '20',
      POLL_INTERVAL_MS: '500',
      LEASE_TTL_MS: '5000',
      ...run.env,
    });
    const topics = topicsOf(env);
    const account = env.BRIDGE_ACCOUNT!;
    const prefix = env.REDIS_KEY_PREFIX!;
    const redis = redisAddress(env);
    const monitor = new CheckpointMonitor(redis, prefix, account, 100, run.confirmReplicas ?? 0);
    cleanups.push(() => monitor.stop());

    // The bridge's warnings and errors are kept for the message of a fault it does not recover from (a run with
    // TEST_LOG_LEVEL prints every line instead).
    const captured = process.env.TEST_LOG_LEVEL ? null : capturedLogger('warn');
    // A fault armed for the next commit runs inside it, after the page's events were published.
    let armed: { fault: Fault; done: (at: number) => void } | null = null;
    const b = await startTestBridge(
      env,
      {
        beforeCommit: async () => {
          const next = armed;
          armed = null;
          if (!next) return;
          const at = Date.now();
          await next.fault.inject();
          next.done(at);
        },
      },
      captured?.logger,
    );
    cleanups.push(() => b.stop());
    const oracle = new Oracle(sim.control, run.seed);
    const history = oracle.runHistory({
      durationMs: 20_000 + 15_000 * run.faults.length,
      pauseMs: [30, 150],
      passRunning: () => monitor.sweepRunning,
    });

    const figures: FaultFigures[] = [];
    for (const fault of run.faults) {
      if (fault.during === 'initial') {
        await waitFor(
          () => (monitor.last.sweep_kind === 'initial' && Number(monitor.last.sweep_seen) >= 100 ? true : undefined),
          60_000,
          'the initial load to be under way',
          20,
        );
      } else {
        await waitFor(() => (monitor.last.initial_done === '1' ? true : undefined), 120_000, 'the initial load');
        await waitFor(
          () => (Number(monitor.last.last_incremental_at ?? 0) > Date.now() - 1_000 ? true : undefined),
          60_000,
          'polls to run',
        );
      }
      await fault.ready?.();
      const before = {
        seen: Number(monitor.last.sweep_seen ?? 0),
        poll: Number(monitor.last.last_incremental_at ?? 0),
      };
      let at: number;
      if (fault.from === 'commit') {
        at = await new Promise<number>((done) => (armed = { fault, done }));
      } else {
        at = Date.now();
        await fault.inject();
      }
      // The topology heals in parallel: a bridge that needs it to commit again waits for it, one that does not
      // (a Kafka partition moved to another leader) recovers before the dead member is back.
      const healing = fault.heal?.() ?? Promise.resolve({});
      // A topology that cannot heal (no promotion, a member that does not start) is the failure to report, not
      // the bridge's wait for it that would follow.
      let healFailed: unknown = null;
      healing.catch((err: unknown) => (healFailed = err ?? new Error('heal failed')));
      // Recovered: a commit after the fault moved the checkpoint on (a later initial-load page, or a poll).
      await waitFor(
        () =>
          healFailed !== null ||
          (fault.during === 'initial'
            ? Number(monitor.last.sweep_seen ?? 0) > before.seen || monitor.last.initial_done === '1'
            : Number(monitor.last.last_incremental_at ?? 0) > Math.max(before.poll, at))
            ? true
            : undefined,
        120_000,
        `the bridge to commit again after ${fault.name}`,
        20,
      ).catch(async (err: unknown) => {
        throw new Error(
          [
            err instanceof Error ? err.message : String(err),
            `topology healed: ${JSON.stringify(await Promise.race([healing.catch((e: unknown) => `failed: ${String(e)}`), Promise.resolve('not yet')]))}`,
            `checkpoint: ${JSON.stringify(monitor.last)}`,
            `the bridge's loop: ${JSON.stringify(b.app.loop.health())}`,
            `topology:\n${(await run.describe?.().catch((e: unknown) => String(e))) ?? '(not described)'}`,
            `the bridge's last warnings and errors:\n${lastLines(captured?.lines ?? [])}`,
          ].join('\n'),
        );
      });
      if (healFailed !== null) throw new Error(`${fault.name}: the topology did not heal: ${String(healFailed)}`);
      const recoverMs = Date.now() - at;
      figures.push({ fault: fault.name, during: fault.during, recoverMs, ...(await healing) });
    }

    const stats = await history;
    const historyEnd = Date.now();
    await settle(redis, prefix, account, historyEnd, 180_000);
    const report = await monitor.stop();
    const messages = await readTopics(Object.values(topics), run.brokers);
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    console.log(
      summary(run.title, verdict, {
        faults: figures,
        'events re-published (extra deliveries)': verdict.duplicates.extraDeliveries,
        'settled after the history ended (ms)': Date.now() - historyEnd,
        history: stats,
        checkpoint: report,
        keys: accountKeys(prefix, account).checkpoint,
      }),
    );
    expect(violations(verdict, { tolerateDetectionDrift: true })).toEqual([]);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
    expect(report.regressions).toEqual([]);
    expect(await b.store.size()).toBe(verdict.reviews);
    return { faults: figures, republished: verdict.duplicates.extraDeliveries };
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

/** The last warnings and errors a bridge logged, one line each (time, message, error), for a failure's message. */
function lastLines(lines: Record<string, unknown>[], count = 25): string {
  if (lines.length === 0) return '(none)';
  return lines
    .slice(-count)
    .map((l) => {
      const err = l.err as { type?: string; message?: string } | undefined;
      return `${String(l.time)} ${String(l.msg ?? '')}${err ? ` [${err.type}: ${err.message}]` : ''}`;
    })
    .join('\n');
}
