-- Marks and lists existing buckets (adopting a snapshot of the previous format, or one no changelog can restore).
-- KEYS[1] bucket manifest, KEYS[2..] snapshot buckets (a key the bucket pattern matched that names no bucket is
-- left alone).
local sealed = 0
for k = 2, #KEYS do
  local bucket = string.match(KEYS[k], ':s:(%d+)$')
  if bucket then
    redis.call('HSET', KEYS[k], 'm', '1')
    redis.call('HSET', KEYS[1], bucket, '1')
    sealed = sealed + 1
  end
end
return sealed
