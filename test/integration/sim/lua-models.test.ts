import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type BridgeRedis } from '../../../src/redis/connection.js';
import { freePort, PrivateRedis } from '../../helpers/processes.js';
import { redisUrl, uniqueName } from '../../helpers/services.js';
import { SimRedisServer } from '../../sim/redis.js';
import { CONFIRM_COPY_SCRIPT, type RedisValue } from '../../sim/lua-models.js';

// The simulation's models of the Lua scripts (test/sim/lua-models.ts) against the scripts themselves on the real
// Redis: the same keys, the same arguments, then the same reply (or error reply) and the same keys afterwards.
// A script changed without its model fails here, so the simulated world cannot drift from production. Keys may
// carry a ttl (compared after the script, within a margin for the test's own run time) or hold a value of the wrong
// type; the lease's clock branch (an epoch counter below Redis's TIME) is compared within a margin; and every script
// runs once more on a Redis of the test's own over its maxmemory under noeviction, to compare the model's DENYOOM
// refusals with Redis 7's.

const redis: BridgeRedis = connectRedis(redisUrl());
afterAll(() => redis.quit());

type State = Record<string, RedisValue | null>;

/** The OOM error reply, as the model's refusal carries it. */
const OOM = "OOM command not allowed when used memory > 'maxmemory'.";

/** A Redis of this test's own (maxmemory is set on it: never on the shared one), with noeviction. */
let own: { server: PrivateRedis; redis: BridgeRedis } | null = null;
beforeAll(async () => {
  const server = new PrivateRedis(await freePort(), `lua-models-oom-${process.pid}`, 'none');
  server.wipe();
  await server.start();
  const client = connectRedis(server.url);
  await client.config('SET', 'maxmemory-policy', 'noeviction');
  own = { server, redis: client };
});
afterAll(async () => {
  await own?.redis.quit();
  await own?.server.stop();
});

/** How a key may be loaded: with a ttl (ms) in both, on Redis over its maxmemory (the own one). */
interface Setting {
  ttls?: Record<string, number>;
  oom?: boolean;
}

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
async function load(
  prefix: string,
  state: State,
  redis: BridgeRedis,
  ttls: Record<string, number> = {},
): Promise<SimRedisServer> {
  const model = new SimRedisServer(() => Date.now());
  for (const [name, value] of Object.entries(state)) {
    if (!value) continue;
    const key = `${prefix}${name}`;
    if (ttls[name] !== undefined) model.expires.set(key, Date.now() + ttls[name]);
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
    if (ttls[name] !== undefined) await redis.pexpire(key, ttls[name]);
  }
  return model;
}

/** A key's ttl, comparable: none (no key), persistent, or the ms left within a second's margin for the run time. */
function ttlMatches(model: number, real: number): boolean {
  if (model < 0 || real < 0) return model === real;
  return Math.abs(model - real) <= 1_000;
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

async function real(redis: BridgeRedis, key: string): Promise<string | null> {
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
    // An error raised by redis.call names the script and line (the model's names none): the reply is the rest.
    return `error:${(err as Error).message.replace(/ script: \S+, on @user_script:\d+\.$/, '')}`;
  }
};

/** A script run on a given Redis: its call there, the model's command name and arguments. */
type ScriptRun = { real: (on: BridgeRedis) => Promise<unknown>; model: string; args: unknown[] };

/**
 * Runs the script and its model on the same state and arguments; expects the same reply, keys and ttls. `oom`: on
 * the test's own Redis, over its maxmemory (noeviction) while the script runs.
 */
async function compare(
  state: State,
  script: (keys: (name: string) => string) => ScriptRun,
  setting: Setting = {},
): Promise<void> {
  const on = setting.oom ? own!.redis : redis;
  const prefix = `${uniqueName('lua-model')}:`;
  const model = await load(prefix, state, on, setting.ttls);
  const { real: runReal, model: name, args } = script((n) => `${prefix}${n}`);
  if (setting.oom) {
    model.refuseWrites = OOM;
    await on.config('SET', 'maxmemory', '1');
  }
  let a: string;
  try {
    a = await outcome(() => runReal(on));
  } finally {
    if (setting.oom) await on.config('SET', 'maxmemory', '0');
  }
  const b = await outcome(() => model.run(name, args));
  expect(b).toBe(a);
  for (const key of Object.keys(state)) {
    const k = `${prefix}${key}`;
    expect(show(model.get(k))).toBe(await real(on, k));
    const [m, r] = [Number(model.run('pttl', [k])), await on.pttl(k)];
    expect(ttlMatches(m, r), `ttl of ${key}: model ${m}, Redis ${r}`).toBe(true);
  }
  await on.del(...Object.keys(state).map((k) => `${prefix}${k}`));
}

/** Half the runs on Redis over its maxmemory, some keys with a ttl. */
const setting = (names: readonly string[]): fc.Arbitrary<Setting> =>
  fc.record({
    oom: fc.boolean(),
    ttls: fc.dictionary(fc.constantFrom(...names), fc.constantFrom(5_000, 60_000), { maxKeys: 2 }),
  });

/** A key of the wrong type now and then (a string where a hash is, and the other way). */
const orWrong = (right: fc.Arbitrary<RedisValue | null>, wrong: RedisValue): fc.Arbitrary<RedisValue | null> =>
  fc.oneof({ arbitrary: right, weight: 5 }, { arbitrary: fc.constant(wrong), weight: 1 });
const WRONG_STR: RedisValue = { t: 'str', v: 'wrong' };
const WRONG_HASH: RedisValue = { t: 'hash', v: new Map([['f', Buffer.from('wrong')]]) };

const RUNS = { numRuns: 60 };

describe('the simulation’s Lua models match the scripts on the real Redis', () => {
  // Bucket keys end with `:s:<n>` as the store's do (the scripts read the bucket's number from the key).
  const bucketFields = fc.constantFrom('0', '1', '2', 'm');
  // 'r': a full restore in progress (commit.lua's expect_manifest and restore-put.lua's mode '2' check it).
  const manifest = hashOf(fc.constantFrom('v', 'r', '1', '2', '3'), fc.constant(Buffer.from('1')));

  it('commit.lua (fence, expect_txn, partial-loss markers, entries, checkpoint rules)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          epoch: orWrong(strOf(fc.constantFrom('5', '6')), WRONG_HASH),
          checkpoint: orWrong(
            hashOf(
              fc.oneof(ckptField, fc.constant('m')),
              digits.map((d) => Buffer.from(d)),
            ),
            WRONG_STR,
          ),
          count: orWrong(strOf(digits), WRONG_HASH),
          manifest,
          's:1': orWrong(hashOf(bucketFields, bytes), WRONG_STR),
          's:2': hashOf(bucketFields, bytes),
        }),
        fc.constantFrom('5', '6'),
        fc.array(
          fc.oneof(
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
            fc.tuple(fc.constant('expect_manifest'), fc.constantFrom('r', 'v')),
          ),
          { maxLength: 4 },
        ),
        fc.array(fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2', '3'), bytes), { maxLength: 5 }),
        setting(['checkpoint', 'count', 's:1']),
        async (state, epoch, pairs, triples, set) => {
          await compare(
            state,
            (k) => {
              const keys = [k('epoch'), k('checkpoint'), k('count'), k('manifest'), k('s:1'), k('s:2')];
              const args = [
                keys.length,
                ...keys,
                epoch,
                String(pairs.length),
                ...pairs.flat(),
                ...triples.flatMap(([i, f, v]) => [String(i), f, v]),
              ];
              return { real: (on) => on.bridgeCommit(...args), model: 'bridgeCommit', args };
            },
            set,
          );
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
          epoch: orWrong(strOf(fc.constantFrom('5', '6')), WRONG_HASH),
          count: orWrong(strOf(digits), WRONG_HASH),
          gone: orWrong(hashOf(fc.constantFrom('7', '8'), bytes), WRONG_STR),
          's:1': orWrong(hashOf(fc.constantFrom('0', '1', '2'), value), WRONG_STR),
          's:2': hashOf(fc.constantFrom('0', '1', '2'), value),
        }),
        fc.constantFrom('5', '6'),
        fc.array(
          fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2'), value, fc.constantFrom('7', '8'), digits),
          { maxLength: 5 },
        ),
        setting(['count', 'gone', 's:1']),
        async (state, epoch, tuples, set) => {
          await compare(
            state,
            (k) => {
              const keys = [k('epoch'), k('count'), k('gone'), k('s:1'), k('s:2')];
              const args = [
                keys.length,
                ...keys,
                epoch,
                ...tuples.flatMap(([i, f, v, id, seq]) => [String(i), f, v, id, seq]),
              ];
              return { real: (on) => on.bridgeRemove(...args), model: 'bridgeRemove', args };
            },
            set,
          );
        },
      ),
      RUNS,
    );
  });

  it('restore-put.lua and seal-buckets.lua (fence, markers, manifest, the check before a tail restore, token, gone)', async () => {
    const value = fc.oneof(bytes, fc.constant(Buffer.alloc(0)));
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          epoch: orWrong(strOf(fc.constantFrom('5', '6')), WRONG_HASH),
          checkpoint: orWrong(hashOf(ckptField, bytes), WRONG_STR),
          gone: orWrong(hashOf(fc.constantFrom('7', '8'), bytes), WRONG_STR),
          manifest: orWrong(manifest, WRONG_STR),
          's:1': orWrong(hashOf(bucketFields, bytes), WRONG_STR),
          's:2': hashOf(bucketFields, bytes),
          other: hashOf(fc.constantFrom('0', '1'), bytes),
        }),
        fc.constantFrom('put', 'seal') as fc.Arbitrary<'put' | 'seal'>,
        fc.constantFrom('5', '6'),
        fc.constantFrom('0', '1', '2'),
        fc.constantFrom('', 'tok:1', 'tok:2'),
        fc.array(fc.tuple(fc.constantFrom('7', '8'), digits), { maxLength: 2 }),
        fc.array(fc.tuple(fc.constantFrom(1, 2), fc.constantFrom('0', '1', '2'), value), { maxLength: 5 }),
        setting(['epoch', 'checkpoint', 'gone', 'manifest', 's:1']),
        async (state, op, epoch, verify, token, gone, triples, set) => {
          await compare(
            state,
            (k) => {
              if (op === 'seal') {
                const keys = [k('manifest'), k('s:1'), k('s:2'), k('other')];
                const args = [keys.length, ...keys];
                return { real: (on) => on.bridgeSealBuckets(...args), model: 'bridgeSealBuckets', args };
              }
              const keys = [k('epoch'), k('checkpoint'), k('gone'), k('manifest'), k('s:1'), k('s:2')];
              const args = [
                ...[keys.length, ...keys, epoch, verify, token, String(gone.length), ...gone.flat()],
                ...triples.flatMap(([i, f, v]) => [String(i), f, v]),
              ];
              return { real: (on) => on.bridgeRestorePut(...args), model: 'bridgeRestorePut', args };
            },
            set,
          );
        },
      ),
      RUNS,
    );
  });

  it("the fingerprint key's confirm script (src/redis/fingerprint-key.ts)", async () => {
    const secret = fc.constantFrom('k1', 'k2');
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          key: orWrong(strOf(secret), WRONG_HASH),
          copies: orWrong(hashOf(fc.constantFrom('c1', 'c2'), bytes), WRONG_STR),
        }),
        secret,
        fc.constantFrom('c1', 'c2'),
        setting(['key', 'copies']),
        async (state, held, copy, set) => {
          await compare(
            state,
            (k) => {
              const args = [CONFIRM_COPY_SCRIPT, 2, k('key'), k('copies'), held, copy, 'digest'];
              return { real: (on) => on.eval(...(args as [string, number, ...string[]])), model: 'eval', args };
            },
            set,
          );
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
          lease: orWrong(
            fc.option(
              fc.tuple(holder, epoch).map(([h, e]): RedisValue => ({ t: 'str', v: `${h}|${e}` })),
              { nil: null },
            ),
            WRONG_HASH,
          ),
          epoch: orWrong(
            epoch.map((v): RedisValue => ({ t: 'str', v })),
            WRONG_HASH,
          ),
        }),
        holder,
        fc.constantFrom('acquire', 'release', 'floor') as fc.Arbitrary<'acquire' | 'release' | 'floor'>,
        fc.constantFrom('3999999999999', '4000000000003', '4000000000009'),
        setting(['lease', 'epoch']),
        async (state, who, op, floor, set) => {
          await compare(
            state,
            (k) => {
              if (op === 'acquire') {
                const args = [k('lease'), k('epoch'), who, 60_000];
                return {
                  real: (on) => on.bridgeLeaseAcquire(k('lease'), k('epoch'), who, 60_000),
                  model: 'bridgeLeaseAcquire',
                  args,
                };
              }
              if (op === 'release')
                return {
                  real: (on) => on.bridgeLeaseRelease(k('lease'), who),
                  model: 'bridgeLeaseRelease',
                  args: [k('lease'), who],
                };
              return {
                real: (on) => on.bridgeEpochFloor(k('epoch'), floor),
                model: 'bridgeEpochFloor',
                args: [k('epoch'), floor],
              };
            },
            set,
          );
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
        fc.boolean(),
        async (state, who, mode, oom) => {
          await compare(
            state,
            (k) => ({
              real: (on) => on.bridgeReplicaBeat(k('registry'), who, 10_000, mode),
              model: 'bridgeReplicaBeat',
              args: [k('registry'), who, 10_000, mode],
            }),
            { oom },
          );
        },
      ),
      RUNS,
    );
  });

  it('resync-take.lua and resync-done.lua', async () => {
    const request = fc.constantFrom('{"id":"1"}', '{"id":"2"}');
    await fc.assert(
      fc.asyncProperty(
        fc.record({ pending: orWrong(strOf(request), WRONG_HASH), active: orWrong(strOf(request), WRONG_HASH) }),
        fc.boolean(),
        request,
        setting(['pending', 'active']),
        async (state, take, done, set) => {
          await compare(
            state,
            (k) =>
              take
                ? {
                    real: (on) => on.bridgeResyncTake(k('pending'), k('active')),
                    model: 'bridgeResyncTake',
                    args: [k('pending'), k('active')],
                  }
                : {
                    real: (on) => on.bridgeResyncDone(k('active'), done),
                    model: 'bridgeResyncDone',
                    args: [k('active'), done],
                  },
            set,
          );
        },
      ),
      RUNS,
    );
  });

  it("lease-acquire.lua's clock branch: an epoch counter below Redis's TIME takes the time (within a margin)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(null, '0', '7', '1700000000000'), fc.boolean(), async (counter, oom) => {
        const on = oom ? own!.redis : redis;
        const prefix = `${uniqueName('lua-model')}:`;
        const state: State = { epoch: counter === null ? null : { t: 'str', v: counter } };
        const model = await load(prefix, state, on);
        const [lease, epoch] = [`${prefix}lease`, `${prefix}epoch`];
        if (oom) {
          model.refuseWrites = OOM;
          await on.config('SET', 'maxmemory', '1');
        }
        let a: string;
        try {
          a = await outcome(() => on.bridgeLeaseAcquire(lease, epoch, 'a', 60_000));
        } finally {
          if (oom) await on.config('SET', 'maxmemory', '0');
        }
        const b = await outcome(() => model.run('bridgeLeaseAcquire', [lease, epoch, 'a', 60_000]));
        if (oom) {
          expect(b).toBe(a);
        } else {
          // Both took their clock's time: the replies, the counters and the lease's epochs agree within a margin.
          const [ra, rb] = [Number(a.slice(3)), Number(b.slice(3))];
          expect(Math.abs(ra - rb)).toBeLessThan(2_000);
          expect(Math.abs(Number(await on.get(epoch)) - Number(show(model.get(epoch))!.slice(4)))).toBeLessThan(2_000);
          expect((await on.get(lease))!.split('|')[0]).toBe('a');
          expect(ttlMatches(Number(model.run('pttl', [lease])), await on.pttl(lease))).toBe(true);
        }
        await on.del(lease, epoch);
      }),
      { numRuns: 16 },
    );
  });
});
