-- Takes the operator's resync request for the leader. The request moves to the "active" key, where it stays until
-- the resync completes (resync-done.lua): a leader killed in the middle leaves it there, and the next leader
-- resumes it instead of losing it.
-- KEYS[1] pending request, KEYS[2] active request. Returns the request to run (the active one first), or nil.
local active = redis.call('GET', KEYS[2])
if active then
  return active
end
local pending = redis.call('GET', KEYS[1])
if pending then
  redis.call('SET', KEYS[2], pending)
  redis.call('DEL', KEYS[1])
end
return pending
