-- Removes snapshot entries of reviews deleted upstream, fenced by the lease epoch like commit.lua. An entry is
-- removed only if it still holds the value the deletion was decided on: a poll that saw the review again in the
-- meantime has rewritten it, and then the review is not gone. A removed review's review.deleted sequence is kept in
-- the gone hash, so that a comeback continues after it.
-- KEYS[1] epoch counter, KEYS[2] entry count, KEYS[3] gone hash, KEYS[4..] snapshot buckets
-- ARGV[1] epoch, then (bucket index into KEYS from 4, field, expected value, review id, deleted sequence) tuples.
local current = redis.call('GET', KEYS[1])
if not current then
  -- The epoch counter only vanishes with the account's keys (a flush, an empty replica): restore from Kafka.
  return redis.error_reply('LOST: the account keys are gone')
end
if current ~= ARGV[1] then
  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))
end

local removed = 0
for i = 2, #ARGV, 5 do
  local key = KEYS[3 + tonumber(ARGV[i])]
  if redis.call('HGET', key, ARGV[i + 1]) == ARGV[i + 2] then
    removed = removed + redis.call('HDEL', key, ARGV[i + 1])
    redis.call('HSET', KEYS[3], ARGV[i + 3], ARGV[i + 4])
  end
end
if removed > 0 then
  redis.call('DECRBY', KEYS[2], removed)
end
return removed
