import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { recordDigest } from '../../src/core/record-digest.js';
import { accountKeys } from '../../src/redis/connection.js';
import { checkDeployment, type Violation } from './checker.js';
import { VirtualClock } from './clock.js';
import { Deployment } from './deployment.js';
import { SimKafka } from './kafka.js';
import { SimRedisServer } from './redis.js';
import { runSeed } from './simulate.js';
import { SimUpstream } from './upstream.js';
import { World } from './world.js';

// The checker's "each dead letter once" (property 10) against Redis evictions: losing a bad record's dead-letter
// memory costs one more copy of that dead letter (docs/exactly-once.md), and nothing more.

const START = Date.UTC(2026, 10, 27);

function world() {
  const clock = new VirtualClock(START);
  const w = new World(clock, fc.sample(fc.scheduler(), 1)[0]!, START);
  const kafka = new SimKafka(() => clock.now(), 60_000);
  const redis = new SimRedisServer(() => clock.now());
  const upstream = new SimUpstream(w, 'id-asc', 5, 0);
  const main = new Deployment('main', w, redis, kafka, upstream, { BRIDGE_ACCOUNT: 'acct' }, {}, () => 0.5);
  const keys = accountKeys(main.config.redis.keyPrefix, main.config.account);
  const bad = [
    { id: 7, raw: { id: 7, rating: 'x' } },
    { id: 8, raw: { id: 8, rating: 'y' } },
    // Review 7's record broken another way later: another bad record under the same key.
    { id: 7, raw: { id: 7, rating: 'z' } },
  ];
  upstream.malformedEver.push(...bad.map((b) => ({ ...b, from: START, to: START + 20_000 })));
  let txn = 0;
  const at = (ms: number): void => {
    clock.at(START + ms, () => undefined);
    clock.fireNext();
  };
  return {
    // The dead letter of bad record `n` committed at `ms`, and its memory written as the bridge writes it.
    deadLetter(ms: number, n: number): void {
      at(ms);
      const producer = `p${++txn}`;
      kafka.initProducer(producer);
      const { id, raw } = bad[n]!;
      const value = JSON.stringify({ reason: 'schema', pass: 'incremental', detected_at: ms, record: raw });
      kafka.send(producer, 1, [
        { topic: main.config.kafka.topics.deadLetter, message: { key: String(id), value }, bytes: 0 },
      ]);
      kafka.end(producer, true);
      redis.set(keys.deadLettered(recordDigest(raw)), { t: 'str', v: '1' }, 86_400_000);
    },
    // allkeys-lru at `ms` under a maxmemory of 0 (every key goes at the next command), or of one byte less than
    // used (the least recently used key goes).
    evict(ms: number, which: 'all' | 'oldest'): void {
      at(ms);
      redis.maxmemory = which === 'all' ? 0 : redis.used() - 1;
      redis.run('exists', ['any']);
      redis.maxmemory = null;
    },
    check(): Violation | null {
      const target = { name: 'main', config: main.config, kafka, upstream, redis, disturbed: [], start: START };
      return checkDeployment({ ...target, end: clock.now() }, { events: 0, reviews: 0 });
    },
  };
}

describe('each dead letter once (property 10), with bad records listed again and their memory evicted', () => {
  it('allows one more copy of a dead letter whose memory was evicted between the two', () => {
    const w = world();
    w.deadLetter(1_000, 0);
    w.evict(90_000, 'all');
    w.deadLetter(200_000, 0);
    expect(w.check()).toBeNull();
  });

  it('allows no third copy after a single eviction', () => {
    const w = world();
    w.deadLetter(1_000, 0);
    w.evict(90_000, 'all');
    w.deadLetter(200_000, 0);
    w.deadLetter(300_000, 0);
    expect(w.check()?.property).toBe('each dead letter once');
  });

  it("allows no repeat when only another record's memory was evicted", () => {
    const w = world();
    w.deadLetter(1_000, 0);
    w.deadLetter(2_000, 1);
    // Review 7's memory is the least recently used key: it goes, review 8's stays.
    w.evict(90_000, 'oldest');
    w.deadLetter(200_000, 1);
    expect(w.check()?.detail).toMatch(/^dead letter 8 published at 2000 and again at 200000 ms/);
  });

  it('tells two bad records of one review apart (each is dead-lettered once)', () => {
    const w = world();
    w.deadLetter(1_000, 0);
    w.deadLetter(30_000, 2);
    expect(w.check()).toBeNull();
  });

  it('allows no repeat before the eviction', () => {
    const w = world();
    w.deadLetter(1_000, 0);
    w.deadLetter(50_000, 0);
    w.evict(90_000, 'all');
    expect(w.check()?.property).toBe('each dead letter once');
  });

  it('passes seed 55024, whose review 593 broke twice, stamped out of range each time with another date', async () => {
    // The classes in the order of the run that found it (the order draws the plan): the defaults then, and these two.
    const faults = [
      ...['crash', 'freeze', 'redis-flush', 'redis-failover', 'kafka-send', 'compaction', 'upstream-faults'],
      ...['malformed', 'clock-offset', 'listing-order', 'redis-partial-loss', 'redis-refuse-writes'],
      ...['kafka-commit-lost', 'foreign-deployment', 'kafka-only-fence', 'redis-lost-reply', 'kafka-txn-timeout'],
      ...['kafka-partial-send', 'tombstone-purge', 'topic-configs', 'late-visibility', 'stamps-ahead'],
      ...['redis-eviction', 'date-header-apart'],
    ] as const;
    const result = await runSeed(55024, { faults });
    expect(result.stats.events).toBeGreaterThan(0);
    expect(result.violation).toBeNull();
  });
});
