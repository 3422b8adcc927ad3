-- Acquires or renews the account's lease. Returns the holder's epoch, or 0 when another replica holds it.
-- A new holder gets a new epoch (the fencing token every commit checks).
-- KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] holder id, ARGV[2] ttl in ms
local value = redis.call('GET', KEYS[1])
if value then
  local holder, epoch = string.match(value, '^(.*)|(%d+)$')
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(epoch)
  end
  return 0
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. epoch, 'PX', ARGV[2])
return epoch
