-- Removes snapshot entries of reviews deleted upstream, fenced by the lease epoch like commit.lua. An entry is
-- removed only if it still holds the value the deletion was decided on: a poll that saw the review again in the
-- meantime has rewritten it, and then the review is not gone.
-- KEYS[1] epoch counter, KEYS[2] entry count, KEYS[3..] snapshot buckets
-- ARGV[1] epoch, then (bucket index into KEYS from 3, field, expected value) triples.
local current = redis.call('GET', KEYS[1])
if not current then
  -- The epoch counter only vanishes with the account's keys (a flush, an empty replica): restore from Kafka.
  return redis.error_reply('LOST: the account keys are gone')
end
if current ~= ARGV[1] then
  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))
end

local removed = 0
for i = 2, #ARGV, 3 do
  local key = KEYS[2 + tonumber(ARGV[i])]
  if redis.call('HGET', key, ARGV[i + 1]) == ARGV[i + 2] then
    removed = removed + redis.call('HDEL', key, ARGV[i + 1])
  end
end
if removed > 0 then
  redis.call('DECRBY', KEYS[2], removed)
end
return removed
