import { loadConfig } from '../../../src/config/config.js';
import { afterAll, describe, expect, it } from 'vitest';
import { leaseHolder } from '../../../src/redis/lease.js';
import { accountKeys, connectRedis } from '../../../src/redis/connection.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { intBetween, mulberry32 } from '../../../src/simulator/prng.js';
import { testEnv, upstreamRequests } from '../../helpers/bridge.js';
import {
  CheckpointMonitor,
  Oracle,
  readTopics,
  requestSweep,
  settle,
  summary,
  violations,
} from '../../helpers/oracle.js';
import { runDir, spawnBridge, waitFor, type Child } from '../../helpers/processes.js';
import { redisAddress } from '../../helpers/topologies.js';

// Two replicas of one account as child processes behind the lease (LEASE_TTL_MS 2000). The leader is SIGKILLed
// mid-pass, or frozen with SIGSTOP past its lease and thawed (a paused leader that must be fenced), over and over
// while the history runs; the dead one is replaced by a new standby. The standby must take over, no change may be
// lost, and the checkpoint must never go back (a fenced former leader cannot commit).

const ROUNDS = Number(process.env.FAULT_FAILOVER_ROUNDS ?? 6);
const TTL_MS = 2_000;

const children: Child[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of children) {
    c.signal('SIGCONT');
    if (c.alive) await c.kill();
  }
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('fault: leader killed or frozen with a standby running', () => {
  it('the standby takes over; nothing lost, nothing invented, the checkpoint never regresses', async () => {
    const sim = await startSimulator({ reviewCount: 400, seed: 61, rateLimit: null });
    cleanups.push(() => sim.close());
    const env = testEnv(sim.url, {
      UPSTREAM_PAGE_SIZE: '10',
      UPSTREAM_RATE_LIMIT_RPS: '40',
      POLL_INTERVAL_MS: '400',
      POLL_OVERLAP_MS: '5000',
      LEASE_TTL_MS: String(TTL_MS),
      LOG_LEVEL: 'info',
    });
    const topics = {
      created: env.KAFKA_TOPIC_CREATED!,
      statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED!,
      updated: env.KAFKA_TOPIC_UPDATED!,
      deadLetter: env.KAFKA_TOPIC_DEAD_LETTER!,
    };
    const account = env.BRIDGE_ACCOUNT!;
    const logs = runDir(account);
    const redis = connectRedis(loadConfig(env).redis);
    cleanups.push(() => redis.quit());
    const keys = accountKeys(env.REDIS_KEY_PREFIX!, account);
    const monitor = new CheckpointMonitor(redisAddress(env), env.REDIS_KEY_PREFIX!, account);
    cleanups.push(() => monitor.stop());
    const oracle = new Oracle(sim.control, 61);

    let n = 0;
    const spawn = () => {
      const child = spawnBridge(env, `${logs}/replica-${n++}.log`);
      children.push(child);
      return child;
    };
    const leader = async (among: Child[]): Promise<{ child: Child; epoch: number }> =>
      waitFor(
        async () => {
          const lease = await leaseHolder(redis, keys);
          const pid = lease ? Number(lease.holder.split(':')[1]) : NaN;
          const child = among.find((c) => c.pid === pid && c.alive);
          return child && lease ? { child, epoch: lease.epoch } : undefined;
        },
        30_000,
        'a leader among the replicas',
        50,
      );

    let replicas = [spawn(), spawn()];
    let current = await leader(replicas);
    const history = oracle.runHistory({
      durationMs: 45_000,
      pauseMs: [20, 120],
      passRunning: () => monitor.sweepRunning,
      onStep: async (step) => {
        if (step % 90 === 0) await requestSweep(redisAddress(env), env.REDIS_KEY_PREFIX!, account);
      },
    });

    const random = mulberry32(61);
    const rounds: { fault: string; epochBefore: number; epochAfter: number; takeoverMs: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Both replicas up (the standby has started and stands by), then a random moment inside a pass.
      const standby = replicas.find((c) => c !== current.child)!;
      await waitFor(() => (standby.log().includes('"msg":"standing by"') ? true : undefined), 30_000, 'the standby');
      // A seeded random number of the leader's upstream requests, then a sweep and a few more (a pass under way).
      await upstreamRequests(sim, intBetween(random, 2, 12));
      await requestSweep(redisAddress(env), env.REDIS_KEY_PREFIX!, account);
      await upstreamRequests(sim, intBetween(random, 0, 4));
      const frozen = round % 2 === 1;
      const t0 = Date.now();
      if (frozen) current.child.signal('SIGSTOP');
      else await current.child.kill();
      const next = await leader([standby]);
      const takeoverMs = Date.now() - t0;
      rounds.push({
        fault: frozen ? 'SIGSTOP' : 'SIGKILL',
        epochBefore: current.epoch,
        epochAfter: next.epoch,
        takeoverMs,
      });
      expect(next.epoch).toBeGreaterThan(current.epoch);
      if (frozen) {
        // Thawed after its lease expired: it must notice, abandon its pass and stand by (its commits are fenced).
        // It stays frozen until the new leader has worked: three upstream requests past the takeover.
        await upstreamRequests(sim, 3);
        const old = current.child;
        old.signal('SIGCONT');
        await waitFor(
          () => (old.log().includes('"msg":"standing by"') ? true : undefined),
          20_000,
          'the thawed leader to stand by',
        );
        replicas = [old, standby];
      } else {
        replicas = [standby, spawn()];
      }
      current = next;
    }
    const stats = await history;
    const historyEnd = Date.now();
    await settle(redisAddress(env), env.REDIS_KEY_PREFIX!, account, historyEnd, 120_000);
    const report = await monitor.stop();
    const messages = await readTopics(Object.values(topics));
    const verdict = await oracle.verify(messages, topics, `urn:reviews-bridge:${account}`);
    const fencedCommits = children.reduce((sum, c) => sum + (c.log().match(/FENCED: epoch/g) ?? []).length, 0);
    const exits = await Promise.all(replicas.map((c) => c.stop()));

    console.log(
      summary('leader SIGKILLed / SIGSTOPped with a standby', verdict, {
        rounds,
        'commits refused by the fence (thawed former leaders)': fencedCommits,
        history: stats,
        checkpoint: report,
        logs,
      }),
    );
    expect(violations(verdict)).toEqual([]);
    // A frozen former leader is fenced by the broker (transactional id) as well as by Redis: exactly once.
    expect(verdict.duplicates.extraDeliveries).toBe(0);
    expect(verdict.sequenceReuse).toEqual([]);
    expect(verdict.statusChangesDelivered + verdict.collapsed).toBe(verdict.truth.statusChanges);
    expect(report.regressions).toEqual([]);
    expect(exits.every((e) => e.code === 0)).toBe(true);
  });
});
