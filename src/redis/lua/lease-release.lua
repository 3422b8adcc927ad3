-- Releases the lease if this holder still has it, so a standby can take over at once on a clean shutdown.
-- KEYS[1] lease; ARGV[1] holder id
local value = redis.call('GET', KEYS[1])
if value and string.match(value, '^(.*)|%d+$') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
