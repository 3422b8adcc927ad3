import { describe, expect, it } from 'vitest';
import { newRedis, uniqueName } from '../../helpers/services.js';

// Proves the test Redis (scripts/redis.sh, or whatever REDIS_URL names) serves what the snapshot store relies on:
// plain commands, pipelines (one round trip for a page of ids), and Lua scripts (atomic fenced commits).

describe('Redis', () => {
  it('round-trips SET/GET with a per-test key prefix', async () => {
    const prefix = `${uniqueName('it-redis')}:`;
    const redis = newRedis({ keyPrefix: prefix });
    expect(await redis.set('greeting', 'grüße', 'PX', 60_000)).toBe('OK');
    expect(await redis.get('greeting')).toBe('grüße');
    expect(await redis.get('missing')).toBeNull();
    // The prefix really isolates: an unprefixed client sees the full key.
    const raw = newRedis();
    expect(await raw.get(`${prefix}greeting`)).toBe('grüße');
  });

  it('runs a pipeline in one round trip and returns every reply in order', async () => {
    const redis = newRedis({ keyPrefix: `${uniqueName('it-pipe')}:` });
    const results = await redis
      .pipeline()
      .hset('review:1', { status: 'APPROVED', seq: '1' })
      .hset('review:2', { status: 'PENDING', seq: '4' })
      .hgetall('review:1')
      .hmget('review:2', 'status', 'seq')
      .hgetall('review:3')
      .exec();
    expect(results).toEqual([
      [null, 2],
      [null, 2],
      [null, { status: 'APPROVED', seq: '1' }],
      [null, ['PENDING', '4']],
      [null, {}],
    ]);
  });

  it('evaluates a Lua script atomically (compare-and-set of an epoch-fenced checkpoint)', async () => {
    const prefix = `${uniqueName('it-lua')}:`;
    const redis = newRedis();
    // Writes the checkpoint only if the caller's epoch is not older than the stored one.
    const script = `
      local current = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
      if tonumber(ARGV[1]) < current then return 0 end
      redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'cursor', ARGV[2])
      return 1`;
    const key = `${prefix}checkpoint`;
    expect(await redis.eval(script, 1, key, '2', 'page-7')).toBe(1);
    expect(await redis.eval(script, 1, key, '1', 'page-3')).toBe(0);
    expect(await redis.eval(script, 1, key, '2', 'page-8')).toBe(1);
    expect(await redis.hgetall(key)).toEqual({ epoch: '2', cursor: 'page-8' });
  });

  it('applies MULTI/EXEC as one step', async () => {
    const redis = newRedis({ keyPrefix: `${uniqueName('it-multi')}:` });
    const results = await redis.multi().set('a', '1').incr('a').get('a').exec();
    expect(results).toEqual([
      [null, 'OK'],
      [null, 2],
      [null, '2'],
    ]);
  });
});
