-- The registry of live replicas: a sorted set of replica ids scored by their last beat (Redis's own clock, so that
-- replicas with skewed clocks agree on who is live). A beat records the caller and forgets replicas silent for
-- longer than the ttl; 'leave' removes the caller at a clean shutdown so the others take its share at once.
-- KEYS[1] registry; ARGV[1] replica id; ARGV[2] ttl ms; ARGV[3] 'beat' | 'leave'
-- Returns the live replica ids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
-- A deployment that is gone leaves no key behind for long.
redis.call('PEXPIRE', KEYS[1], ttl * 10)
return redis.call('ZRANGE', KEYS[1], 0, -1)
