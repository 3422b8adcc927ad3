-- Marks and lists existing buckets (adopting a snapshot of the previous format, or one no changelog can restore).
-- KEYS[1] bucket manifest, KEYS[2..] snapshot buckets.
for k = 2, #KEYS do
  redis.call('HSET', KEYS[k], 'm', '1')
  redis.call('HSET', KEYS[1], string.match(KEYS[k], ':(%d+)$'), '1')
end
return #KEYS - 1
