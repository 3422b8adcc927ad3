import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';
import { SimRedisServer } from '../../sim/redis.js';
import { CONFIRM_COPY_SCRIPT, type RedisValue } from '../../sim/lua-models.js';

// The simulation's models of the Lua scripts (test/sim/lua-models.ts) against the scripts themselves on the real
// Redis: the same keys, the same arguments, then the same reply (or error reply) and the same keys afterwards.
// A script changed without its model fails here, so the simulated world cannot drift from production.

const redis: BridgeRedis = connectRedis(redisUrl());
afterAll(() => redis.quit());

type State = Record<string, RedisValue | null>;

const digits = fc.constantFrom('0', '1', '2', '5', '7', '10', '12');
const bytes = fc.uint8Array({ minLength: 1, maxLength: 6 }).map((a) => Buffer.from(a));
const hashOf = (fields: fc.Arbitrary<string>, values: fc.Arbitrary<Buffer>) =>
  fc
    .array(fc.tuple(fields, values), { maxLength: 5 })
    .map((pairs): RedisValue | null => (pairs.length === 0 ? null : { t: 'hash', v: new Map(pairs) }));
const strOf = (values: fc.Arbitrary<string>) =>
  fc.option(
    values.map((v): RedisValue => ({ t: 'str', v })),
    { nil: null },
  );
const ckptField = fc.constantFrom('txn', 'watermark', 'initial_done', 'sweep_cursor', 'clo:0', 'restore_token');

/** Loads `state` under `prefix` in Redis and in a fresh model; returns the model. */
async function load(prefix: string, state: State): Promise<SimRedisServer> {
  const model = new SimRedisServer(() => Date.now());
  for (const [name, value] of Object.entries(state)) {
    if (!value) continue;
    const key = `${prefix}${name}`;
    if (value.t === 'str') {
      await redis.set(key, value.v);
      model.data.set(key, { ...value });
    } else if (value.t === 'hash') {
      await redis.hset(key, ...[...value.v].flat());
      model.data.set(key, { t: 'hash', v: new Map(value.v) });
    } else {
      await redis.zadd(key, ...[...value.v].flatMap(([m, score]) => [score, m]));
      model.data.set(key, { t: 'zset', v: new Map(value.v) });
    }
  }
  return model;
}

/** A key's value as comparable text (null when absent). */
function show(value: RedisValue | null | undefined): string | null {
  if (!value) return null;
  if (value.t === 'str') return `str:${value.v}`;
  // A sorted set by its members (the scores are the two clocks', which differ by the test's own run time).
  if (value.t === 'zset') return `zset:${[...value.v.keys()].sort().join(',')}`;
  return `hash:${[...value.v]
    .map(([f, v]) => `${f}=${v.toString('hex')}`)
    .sort()
    .join(',')}`;
}

async function real(key: string): Promise<string | null> {
  const type = await redis.type(key);
  if (type === 'none') return null;
  if (type === 'string') return `str:${await redis.get(key)}`;
  if (type === 'zset') return `zset:${(await redis.zrange(key, '0', '-1')).sort().join(',')}`;
  const h = await redis.hgetallBuffer(key);
  return `hash:${Object.entries(h)
    .map(([f, v]) => `${f}=${v.toString('hex')}`)
    .sort()
    .join(',')}`;
}

const outcome = async (run: () => Promise<unknown> | unknown): Promise<string> => {
  try {
    return `ok:${JSON.stringify(await run())}`;
  } catch (err) {
    return `error:${(err as Error).message}`;
  }
};

/** Runs the script and its model on the same state and arguments; expects the same reply and keys. */
async function compare(
  state: State,
  script: (keys: (name: string) => string) => { real: () => Promise<unknown>; model: string; args: unknown[] },
): Promise<void> {
  const prefix = `${uniqueName('lua-model')}:`;
  const model = await load(prefix, state);
  const { real: runReal, model: name, args } = script((n) => `${prefix}${n}`);
  const [a, b] = [await outcome(runReal), await outcome(() => model.run(name, args))];
  expect(b).toBe(a);
  for (const key of Object.keys(state)) expect(show(model.get(`${prefix}${key}`))).toBe(await real(`${prefix}${key}`));
  await redis.del(...Object.keys(state).map((k) => `${prefix}${k}`));
}

const RUNS = { numRuns: 60 };

describe('the simulation’s Lua models match the scripts on the real Redis', () => {
  // Bucket keys end with `:s:<n>` as the store's do (the scripts read the bucket's number from the key).
  const bucketFields = fc.constantFrom('0', '1', '2', 'm');
  const manifest = hashOf(fc.constantFrom('v', '1', '2', '3'), fc.constant(Buffer.from('1')));

  it('commit.lua (fence, expect_txn, partial-loss markers, entries, checkpoint rules)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          epoch: strOf(fc.constantFrom('5', '6')),
          checkpoint: hashOf(
            fc.oneof(ckptField, fc.constant('m')),
            digits.map((d) => Buffer.from(d)),
          ),
          count: strOf(digits),
          manifest,
          's:1': hashOf(bucketFields, bytes),
          's:2': hashOf(bucketFields, bytes),
        }),
        fc.constantFrom('5', '6'),
        fc.array(
          fc.tuple(
            fc.constantFrom(
              'txn',
              'watermark',
              'watermark',
              'watermark_rewind',
              'initial_done',
              'expect_txn',
              'sweep_cursor',
              'expect_restore',
              'restore_token',
              'sealed',
              'm',
            ),
            fc.oneof(digits, digits, fc.constant('')),
          ),
          { maxLength: 4 },
        ),
        fc.array(fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2', '3'), bytes), { maxLength: 5 }),
        async (state, epoch, pairs, triples) => {
          await compare(state, (k) => {
            const keys = [k('epoch'), k('checkpoint'), k('count'), k('manifest'), k('s:1'), k('s:2')];
            const args = [
              keys.length,
              ...keys,
              epoch,
              String(pairs.length),
              ...pairs.flat(),
              ...triples.flatMap(([i, f, v]) => [String(i), f, v]),
            ];
            return { real: () => redis.bridgeCommit(...args), model: 'bridgeCommit', args };
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('remove.lua (fence, remove only what still holds the decided value, the gone hash)', async () => {
    const value = fc.constantFrom('aa', 'bb').map((h) => Buffer.from(h, 'hex'));
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          epoch: strOf(fc.constantFrom('5', '6')),
          count: strOf(digits),
          gone: hashOf(fc.constantFrom('7', '8'), bytes),
          's:1': hashOf(fc.constantFrom('0', '1', '2'), value),
          's:2': hashOf(fc.constantFrom('0', '1', '2'), value),
        }),
        fc.constantFrom('5', '6'),
        fc.array(
          fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2'), value, fc.constantFrom('7', '8'), digits),
          { maxLength: 5 },
        ),
        async (state, epoch, tuples) => {
          await compare(state, (k) => {
            const keys = [k('epoch'), k('count'), k('gone'), k('s:1'), k('s:2')];
            const args = [
              keys.length,
              ...keys,
              epoch,
              ...tuples.flatMap(([i, f, v, id, seq]) => [String(i), f, v, id, seq]),
            ];
            return { real: () => redis.bridgeRemove(...args), model: 'bridgeRemove', args };
          });
        },
      ),
      RUNS,
    );
  });

  it('restore-put.lua and seal-buckets.lua (markers, manifest, the check before a tail restore)', async () => {
    const value = fc.oneof(bytes, fc.constant(Buffer.alloc(0)));
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          manifest,
          's:1': hashOf(bucketFields, bytes),
          's:2': hashOf(bucketFields, bytes),
          other: hashOf(fc.constantFrom('0', '1'), bytes),
        }),
        fc.constantFrom('put', 'seal') as fc.Arbitrary<'put' | 'seal'>,
        fc.constantFrom('0', '1'),
        fc.array(fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2'), value), { maxLength: 5 }),
        async (state, op, verify, triples) => {
          await compare(state, (k) => {
            if (op === 'seal') {
              const keys = [k('manifest'), k('s:1'), k('s:2'), k('other')];
              const args = [keys.length, ...keys];
              return { real: () => redis.bridgeSealBuckets(...args), model: 'bridgeSealBuckets', args };
            }
            const keys = [k('manifest'), k('s:1'), k('s:2')];
            const args = [keys.length, ...keys, verify, ...triples.flatMap(([i, f, v]) => [String(i), f, v])];
            return { real: () => redis.bridgeRestorePut(...args), model: 'bridgeRestorePut', args };
          });
        },
      ),
      RUNS,
    );
  });

  it("the fingerprint key's confirm script (src/redis/fingerprint-key.ts)", async () => {
    const secret = fc.constantFrom('k1', 'k2');
    await fc.assert(
      fc.asyncProperty(
        fc.record({ key: strOf(secret), copies: hashOf(fc.constantFrom('c1', 'c2'), bytes) }),
        secret,
        fc.constantFrom('c1', 'c2'),
        async (state, held, copy) => {
          await compare(state, (k) => {
            const args = [CONFIRM_COPY_SCRIPT, 2, k('key'), k('copies'), held, copy, 'digest'];
            return { real: () => redis.eval(...(args as [string, number, ...string[]])), model: 'eval', args };
          });
        },
      ),
      RUNS,
    );
  });

  it('lease-acquire.lua, lease-release.lua and epoch-floor.lua', async () => {
    // Epoch counters far above the clock (and always present), so that the script's TIME and the model's clock
    // cannot differ in a reply; the clock branch (a counter below the time) is left to the snapshot-store tests.
    const epoch = fc.constantFrom('4000000000000', '4000000000007');
    const holder = fc.constantFrom('a', 'b', 'a|b');
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          lease: fc.option(
            fc.tuple(holder, epoch).map(([h, e]): RedisValue => ({ t: 'str', v: `${h}|${e}` })),
            { nil: null },
          ),
          epoch: epoch.map((v): RedisValue => ({ t: 'str', v })),
        }),
        holder,
        fc.constantFrom('acquire', 'release', 'floor') as fc.Arbitrary<'acquire' | 'release' | 'floor'>,
        fc.constantFrom('3999999999999', '4000000000003', '4000000000009'),
        async (state, who, op, floor) => {
          await compare(state, (k) => {
            if (op === 'acquire') {
              const args = [k('lease'), k('epoch'), who, 60_000];
              return {
                real: () => redis.bridgeLeaseAcquire(k('lease'), k('epoch'), who, 60_000),
                model: 'bridgeLeaseAcquire',
                args,
              };
            }
            if (op === 'release')
              return {
                real: () => redis.bridgeLeaseRelease(k('lease'), who),
                model: 'bridgeLeaseRelease',
                args: [k('lease'), who],
              };
            return {
              real: () => redis.bridgeEpochFloor(k('epoch'), floor),
              model: 'bridgeEpochFloor',
              args: [k('epoch'), floor],
            };
          });
        },
      ),
      RUNS,
    );
  });

  it('replica-beat.lua (beat, leave, replicas silent past the ttl forgotten)', async () => {
    // Scores far from the ttl's edge (recent, or a minute old for a 10 s ttl), so that Redis's TIME and the model's
    // clock agree on who is live.
    const now = Date.now();
    const member = fc.constantFrom('r1', 'r2', 'r3');
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          registry: fc
            .array(fc.tuple(member, fc.constantFrom(now - 60_000, now - 100, now - 50)), { maxLength: 3 })
            .map((pairs): RedisValue | null => (pairs.length === 0 ? null : { t: 'zset', v: new Map(pairs) })),
        }),
        member,
        fc.constantFrom('beat', 'leave') as fc.Arbitrary<'beat' | 'leave'>,
        async (state, who, mode) => {
          await compare(state, (k) => ({
            real: () => redis.bridgeReplicaBeat(k('registry'), who, 10_000, mode),
            model: 'bridgeReplicaBeat',
            args: [k('registry'), who, 10_000, mode],
          }));
        },
      ),
      RUNS,
    );
  });

  it('resync-take.lua and resync-done.lua', async () => {
    const request = fc.constantFrom('{"id":"1"}', '{"id":"2"}');
    await fc.assert(
      fc.asyncProperty(
        fc.record({ pending: strOf(request), active: strOf(request) }),
        fc.boolean(),
        request,
        async (state, take, done) => {
          await compare(state, (k) =>
            take
              ? {
                  real: () => redis.bridgeResyncTake(k('pending'), k('active')),
                  model: 'bridgeResyncTake',
                  args: [k('pending'), k('active')],
                }
              : {
                  real: () => redis.bridgeResyncDone(k('active'), done),
                  model: 'bridgeResyncDone',
                  args: [k('active'), done],
                },
          );
        },
      ),
      RUNS,
    );
  });
});
