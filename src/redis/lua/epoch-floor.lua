-- Raises the account's epoch counter to at least a floor restored from Kafka, so that a Redis that lost its keys
-- never issues an epoch that a former leader already used (fencing survives the loss).
-- KEYS[1] epoch counter; ARGV[1] floor. Returns 1 when it raised the counter.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
