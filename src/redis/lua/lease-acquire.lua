-- Acquires or renews the account's lease. Returns the holder's epoch, or 0 when another replica holds it.
-- A new holder gets a new epoch (the fencing token every commit checks): one above every epoch issued before, and
-- at least the server's clock in ms. The clock part matters after a failover: asynchronous replication may have
-- lost the counter's last increment, and without it the new primary would hand that epoch out a second time.
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
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if epoch < now then
  epoch = now
  redis.call('SET', KEYS[2], string.format('%d', epoch))
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%d', epoch), 'PX', ARGV[2])
return epoch
