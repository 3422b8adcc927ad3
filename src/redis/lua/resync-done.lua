-- Clears a request once carried out (the active resync, an applied checkpoint change), unless it is another request
-- by now.
-- KEYS[1] active request; ARGV[1] the completed request (JSON, as stored). Returns 1 when it cleared it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
