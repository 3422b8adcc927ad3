import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../../src/simulator/index.js';
import { capturedLogger, startTestBridge, testEnv } from '../../helpers/bridge.js';
import { CheckpointMonitor, Oracle, readTopics, settle, summary, violations } from '../../helpers/oracle.js';
import { redisAddress } from '../../helpers/topologies.js';
import { PrivateKafka, waitFor } from '../../helpers/processes.js';

// A private Kafka broker (its own port, data kept) is killed in the middle of the initial load and started again
// once the bridge has failed FAULT_KAFKA_OUTAGE_FAILURES passes to it (default 3: each failure comes after the
// producer's own retries are spent, and the third is past two pass backoffs, 1 s then 2 s, which is what a longer
// outage would show too; the full minute is about 6). The history keeps running through the outage;
// afterwards the bridge must catch up with nothing lost.

const PORT = Number(process.env.FAULT_KAFKA_PORT ?? 39192);
const OUTAGE_FAILURES = Number(process.env.FAULT_KAFKA_OUTAGE_FAILURES ?? 3);
// What the loop logs for each failed pass (src/bridge/loop.ts).
const PASS_FAILED = 'pass failed; nothing committed past the last page';
const kafka = new PrivateKafka(PORT);
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  await kafka.start();
}, 180_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await kafka.clean();
}, 120_000);

describe('fault: Kafka broker down mid-pass', () => {
  it(`pauses while the broker is down (${OUTAGE_FAILURES} failed passes) and catches up without losing a change`, async () => {
    const sim = await startSimulator({ reviewCount: 500, seed: 31, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, {
      KAFKA_BROKERS: kafka.brokers,
      UPSTREAM_PAGE_SIZE: '10',
      UPSTREAM_RATE_LIMIT_RPS: '20',
      POLL_INTERVAL_MS: '500',
    });
    const topics = {
      created: env.KAFKA_TOPIC_CREATED!,
      statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
      updated: env.KAFKA_TOPIC_UPDATED!,
      deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
    };
    const account = env.BRIDGE_ACCOUNT!;
    const monitor = new CheckpointMonitor(redisAddress(env), env.REDIS_KEY_PREFIX!, account);
    cleanups.push(() => monitor.stop());
    // At debug: once the process has said Kafka is unreachable, each failed pass is logged at debug only.
    const log = capturedLogger('debug');
    const b = await startTestBridge(env, {}, log.logger);
    cleanups.push(() => b.stop());
    const oracle = new Oracle(sim.control, 31);
    const history = oracle.runHistory({
      durationMs: 55_000,
      pauseMs: [30, 150],
      passRunning: () => monitor.sweepRunning,
    });

    // Mid initial load: a fifth of it done.
    await waitFor(
      () => (monitor.last.sweep_kind === 'initial' && Number(monitor.last.sweep_seen) >= 100 ? true : undefined),
      60_000,
      'the initial load to be under way',
      20,
    );
    const seenAtStop = Number(monitor.last.sweep_seen);
    const logged = log.lines.length;
    await kafka.kill();
    const down = Date.now();
    // The fault itself: the broker stays down until the bridge has failed OUTAGE_FAILURES passes (its health looked
    // at after the first one).
    const failures = async (count: number) =>
      waitFor(
        () => (log.lines.slice(logged).filter((l) => l.msg === PASS_FAILED).length >= count ? true : undefined),
        120_000,
        `${count} passes failed to the outage`,
        20,
      );
    await failures(1);
    const midOutage = { ...b.app.loop.health(), sweepSeen: monitor.last.sweep_seen };
    await failures(OUTAGE_FAILURES);
    const seenBeforeStart = Number(monitor.last.sweep_seen ?? 0);
    await kafka.start();
    const outageMs = Date.now() - down;

    const stats = await history;
    const historyEnd = Date.now();
    await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, account, historyEnd, 180_000);
    const catchUpMs = Date.now() - historyEnd;
    const report = await monitor.stop();
    const messages = await readTopics(Object.values(topics), [kafka.brokers]);
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    console.log(
      summary('Kafka broker killed mid initial load and restarted', verdict, {
        'initial load progress at the kill': seenAtStop,
        'progress when the broker came back (pages without events may still commit)': seenBeforeStart,
        'outage incl. broker start (ms)': outageMs,
        'bridge health mid-outage': midOutage,
        'settled after the history ended (ms)': catchUpMs,
        history: stats,
        checkpoint: report,
      }),
    );
    expect(midOutage.lastError).not.toBeNull();
    expect(violations(verdict, { tolerateDetectionDrift: true })).toEqual([]);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
    expect(report.regressions).toEqual([]);
  });
});
