import { pino, type Logger } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { ReviewEvent } from '../../src/core/events.js';
import {
  bridgeForTest,
  eventually,
  initialLoadDone,
  simulatorForTest,
  startTestBridge,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { deleteTopic, readAll, testKafka } from '../helpers/kafka.js';
import { uniqueName } from '../helpers/services.js';
import { readAccountStatus } from '../../src/redis/account-status.js';
import { connectRedisFromConfig } from '../../src/redis/connection.js';

// Deployments that share a Kafka cluster (issue 36, items 1 and 2), on the real services with read_committed
// readers: two single-account deployments with the default changelog settings each get their own changelog and
// complete feed; a deployment pointed at another's changelog, a changelog topic with cleanup.policy=delete and a
// changelog topic deleted and created again under a deployment are each refused at start with one line naming the
// topic and the setting, and nothing is published.
// Identity first (issue 46, item 4): a second installation with the deployment id of a live one and its own Redis
// state (a twin), or another deployment of the same account on the same topics, fences nothing and writes nothing
// to Kafka: one line names the settings, /readyz is 503 naming the refusal, `status` shows it, and the first
// deployment goes on with no takeover in its log.

/** A logger that keeps the bridge's log lines (JSON) for the test to read. */
function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

/** A test bridge logging to `logger`, stopped when the test finishes. */
async function loggedBridge(env: Record<string, string>, logger: Logger): Promise<TestBridge> {
  const b = await startTestBridge(env, {}, logger);
  onTestFinished(() => b.stop());
  return b;
}

/** Waits for the refusal the bridge logs (one line, kind setting) and returns its message. */
async function refusal(lines: Array<Record<string, unknown>>): Promise<string> {
  return eventually(
    async () => {
      const line = lines.find((l) => l.refused === true);
      return line ? String(line.msg) : undefined;
    },
    60_000,
    'the start to be refused',
  );
}

/** An environment with the default changelog settings (KAFKA_TOPIC_CHANGELOG unset) and its own Redis prefix. */
function defaultChangelogEnv(url: string, overrides: Record<string, string> = {}): Record<string, string> {
  const env = testEnv(url, { REDIS_KEY_PREFIX: uniqueName('rbdep'), ...overrides });
  delete env.KAFKA_TOPIC_CHANGELOG;
  return env;
}

/** Every created event of a bridge's topic, read_committed; fails unless each review has exactly one. */
async function createdOnce(b: TestBridge, count: number): Promise<number[]> {
  const records = await readAll([b.topics.created], { untilCount: count, idleMs: 1_000, timeoutMs: 60_000 });
  const ids = records.map((r) => (JSON.parse(r.value) as ReviewEvent).data.review.id);
  expect(new Set(ids).size).toBe(ids.length);
  return ids.sort((x, y) => x - y);
}

/** The simulator's review ids 1..n (dense). */
const ids = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

/** Changes review `id`'s client status upstream. */
function flip(sim: Awaited<ReturnType<typeof simulatorForTest>>, id: number): void {
  const from = sim.control.get(id)!.client_publication_status;
  sim.control.setStatus(id, { client: from === 'REJECTED' ? 'APPROVED' : 'REJECTED' });
}

describe('deployments sharing a Kafka cluster', () => {
  it('two deployments keep their own changelogs and complete feeds; one pointed at the other is refused', async () => {
    const [simA, simB] = await Promise.all([
      simulatorForTest({ reviewCount: 120, seed: 361 }),
      simulatorForTest({ reviewCount: 170, seed: 362 }),
    ]);
    const envA = defaultChangelogEnv(simA.url);
    const envB = defaultChangelogEnv(simB.url);
    const a = await bridgeForTest(envA);
    const b = await bridgeForTest(envB);
    await Promise.all([initialLoadDone(a), initialLoadDone(b)]);

    // Each has its own changelog topic and transactional id, without anyone having set them.
    expect(a.topics.changelog).toMatch(/^reviews-bridge\.changelog\.d[0-9a-f]{12}$/);
    expect(b.topics.changelog).toMatch(/^reviews-bridge\.changelog\.d[0-9a-f]{12}$/);
    expect(a.topics.changelog).not.toBe(b.topics.changelog);
    expect(a.config.kafka.transactionalId).not.toBe(b.config.kafka.transactionalId);

    // Both feeds complete: every review once, a change made afterwards delivered to its own deployment's reader.
    flip(simA, 5);
    flip(simB, 7);
    expect(await createdOnce(a, 120)).toEqual(ids(120));
    expect(await createdOnce(b, 170)).toEqual(ids(170));
    const changedA = await readAll([a.topics.statusChanged], { untilCount: 1, idleMs: 1_000, timeoutMs: 30_000 });
    const changedB = await readAll([b.topics.statusChanged], { untilCount: 1, idleMs: 1_000, timeoutMs: 30_000 });
    expect(changedA.map((m) => m.key)).toEqual(['5']);
    expect(changedB.map((m) => m.key)).toEqual(['7']);

    // A third deployment (B's account, its own event topics and Redis prefix: on B's, B's heartbeats refuse it
    // first, see the twin test below) told to use A's changelog: the checkpoint there is A's, so it refuses to
    // start, naming the topic and the settings, and publishes nothing.
    const { logger, lines } = capturingLogger();
    const ownTopics = Object.entries(testEnv(simB.url)).filter(([k]) => k.startsWith('KAFKA_TOPIC_'));
    const intruderEnv = {
      ...envB,
      ...Object.fromEntries(ownTopics),
      REDIS_KEY_PREFIX: uniqueName('rbdep'),
      KAFKA_TOPIC_CHANGELOG: a.topics.changelog,
    };
    const intruder = await loggedBridge(intruderEnv, logger);
    const line = await refusal(lines);
    expect(line).toContain(`changelog topic ${a.topics.changelog}`);
    expect(line).toContain(`deployment ${a.config.kafka.identity!.deployment}`);
    expect(line).toContain('KAFKA_TOPIC_CHANGELOG');
    expect((await intruder.store.checkpoint()).initialDone).toBe(false);
    expect(await createdOnce(b, 170)).toHaveLength(170);
  });

  it('refuses a changelog topic with cleanup.policy=delete, and leaves it as it is', async () => {
    const sim = await simulatorForTest({ reviewCount: 30, seed: 363 });
    const env = testEnv(sim.url);
    const admin = testKafka().admin();
    await admin.connect();
    try {
      await admin.createTopics({
        // kafkajs' own wait trips over a broker that has not heard of the topic yet; the bridge waits for leaders.
        waitForLeaders: false,
        topics: [
          {
            topic: env.KAFKA_TOPIC_CHANGELOG!,
            numPartitions: 3,
            replicationFactor: 1,
            configEntries: [{ name: 'cleanup.policy', value: 'delete' }],
          },
        ],
      });
      const { logger, lines } = capturingLogger();
      const b = await loggedBridge(env, logger);
      const line = await refusal(lines);
      expect(line).toContain(`changelog topic ${env.KAFKA_TOPIC_CHANGELOG!} has cleanup.policy=delete`);
      expect(line).toContain('KAFKA_TOPIC_CHANGELOG');
      expect((await b.store.checkpoint()).initialDone).toBe(false);
      // The bridge created its event topics a moment ago: their offsets may answer NOT_LEADER for a while.
      const created = await eventually(
        () => readAll([b.topics.created], { timeoutMs: 10_000 }).catch(() => undefined),
        30_000,
        'the created topic to be readable',
      );
      expect(created).toEqual([]);
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: 2, name: env.KAFKA_TOPIC_CHANGELOG!, configNames: ['cleanup.policy'] }],
      });
      expect(resources[0]!.configEntries[0]!.configValue).toBe('delete');
    } finally {
      await admin.disconnect();
    }
  });

  it('detects a changelog topic deleted and created again under a deployment, and refuses to start', async () => {
    const sim = await simulatorForTest({ reviewCount: 90, seed: 364 });
    const env = testEnv(sim.url);
    const first = await bridgeForTest(env);
    await initialLoadDone(first);
    await first.stop();

    await deleteTopic(env.KAFKA_TOPIC_CHANGELOG!);
    // The bridge creates it again (compacted, as it would any missing topic): an empty changelog, whereas Redis
    // reflects the commits of the first one. Trusted, a later full restore would rebuild a partial snapshot.
    const { logger, lines } = capturingLogger();
    const second = await loggedBridge(env, logger);
    const line = await refusal(lines);
    expect(line).toContain(`changelog topic ${env.KAFKA_TOPIC_CHANGELOG!}`);
    expect(line).toContain('deleted and created again');
    expect(line).toContain('KAFKA_TOPIC_CHANGELOG');
    const created = await readAll([second.topics.created], { timeoutMs: 10_000 });
    expect(created).toHaveLength(90);

    // A deliberate reset of the paused account (what `reviews-bridge reset` and POST .../reset do) starts it over on
    // the new topic: a new initial load.
    await second.store.pause();
    expect(await second.store.reset()).toBe(true);
    await second.store.resume();
    await initialLoadDone(second);
    const again = await readAll([second.topics.created], { untilCount: 180, idleMs: 1_000, timeoutMs: 60_000 });
    expect(again).toHaveLength(180);
  });

  it('refuses a twin (same deployment id, its own Redis) and another deployment of the account before either touches Kafka', async () => {
    const sim = await simulatorForTest({ reviewCount: 60, seed: 365 });
    // Heartbeats every 2 s: a live installation has written one in the last three intervals whatever it does.
    const env = testEnv(sim.url, { BRIDGE_DEPLOYMENT_ID: uniqueName('dtwin'), HEARTBEAT_INTERVAL_MS: '2000' });
    const first = capturingLogger();
    const a = await loggedBridge({ ...env, REDIS_KEY_PREFIX: uniqueName('rbtwin') }, first.logger);
    await initialLoadDone(a);
    // The first deployment heartbeats (what the intruders read back before they act).
    await readAll([a.topics.heartbeat], { untilCount: 1, timeoutMs: 30_000 });

    for (const intruder of [
      // The same settings and its own Redis: the same deployment id, another Redis instance.
      { env: { ...env, REDIS_KEY_PREFIX: uniqueName('rbtwin') }, setting: 'BRIDGE_DEPLOYMENT_ID' },
      // Another deployment (its own derived id) of the same account on the same topics.
      {
        env: { ...env, BRIDGE_DEPLOYMENT_ID: '', REDIS_KEY_PREFIX: uniqueName('rbtwin') },
        setting: 'KAFKA_TOPIC_STATE',
      },
    ]) {
      const { logger, lines } = capturingLogger();
      const b = await loggedBridge(intruder.env, logger);
      const line = await refusal(lines);
      expect(line).toContain(intruder.setting);
      expect(line).toContain('nothing was fenced or written');
      // /readyz: not ready, naming the refusal; `status`: the refusal and the replica refused.
      const readyz = await eventually(
        async () => {
          const res = await fetch(`${b.app.ops.url}/readyz`);
          const body = (await res.json()) as { checks: Record<string, unknown> };
          return body.checks.leadership_refused ? { status: res.status, body } : undefined;
        },
        30_000,
        'readyz to name the refusal',
      );
      expect(readyz.status).toBe(503);
      expect(String(readyz.body.checks.leadership_refused)).toContain(intruder.setting);
      const redis = connectRedisFromConfig(b.config.redis);
      try {
        const status = await readAccountStatus(
          redis,
          { account: b.config.account, keyPrefix: b.config.redis.keyPrefix },
          null,
        );
        expect(status.refused?.setting).toBe(intruder.setting);
      } finally {
        await redis.quit();
      }
      const metrics = await (await fetch(`${b.app.ops.url}/metrics`)).text();
      expect(metrics).toMatch(
        new RegExp(`^reviews_bridge_leadership_refused\\{[^}]*setting="${intruder.setting}"[^}]*\\} 1$`, 'm'),
      );
      expect((await b.store.checkpoint()).initialDone).toBe(false);
      await b.stop();
    }

    // The first deployment was never fenced: a change made now is delivered once, and its log has no takeover.
    flip(sim, 9);
    const changed = await readAll([a.topics.statusChanged], { untilCount: 1, idleMs: 1_000, timeoutMs: 30_000 });
    expect(changed.map((m) => m.key)).toEqual(['9']);
    expect(await createdOnce(a, 60)).toEqual(ids(60));
    // The start's own warning of a generated fingerprint key (the tests' setting) is not about the intruders.
    const keyWarning = (l: { setting?: unknown }) => String(l.setting ?? '').startsWith('FINGERPRINT_');
    const takeovers = first.lines.filter(
      (l) => !keyWarning(l) && (Number(l.level) >= 40 || /fenced|taken by another/.test(String(l.msg))),
    );
    expect(takeovers.map((l) => l.msg)).toEqual([]);
    // Every heartbeat in the topic is the first deployment's: the intruders wrote nothing.
    const all = await readAll([a.topics.heartbeat], { idleMs: 1_000, timeoutMs: 30_000 });
    expect(new Set(all.map((m) => m.headers['bridge-redis-instance']))).toHaveProperty('size', 1);
    expect(new Set(all.map((m) => m.headers['bridge-deployment']))).toEqual(new Set([env.BRIDGE_DEPLOYMENT_ID]));
  });
});
