-- Writes entries restored from the changelog (not fenced: the restore's finish is), marking and listing every
-- bucket it writes to (see commit.lua on partial loss).
-- KEYS[1] bucket manifest, KEYS[2..] snapshot buckets
-- ARGV[1] '1' to check the buckets first (a tail restore onto the existing snapshot: writing into a bucket that
-- vanished would recreate it in part and hide the loss); '2' a full restore in progress: the manifest must still
-- hold its field 'r' (written when the restore cleared the account; gone, the manifest was evicted under the
-- restore and no longer lists the buckets written before) and the buckets are checked as for a tail (a bucket
-- evicted during the restore and written again by a later batch would hold only part of its entries); then
-- (bucket index into KEYS from 2, field, value) triples; an empty value deletes the field (a review deleted
-- upstream).
if ARGV[1] == '2' and redis.call('HEXISTS', KEYS[1], 'r') == 0 then
  return redis.error_reply('LOST-PART: the bucket manifest of the account vanished from Redis during its restore')
end
if ARGV[1] == '2' or (ARGV[1] == '1' and redis.call('HEXISTS', KEYS[1], 'v') == 1) then
  for k = 2, #KEYS do
    local bucket = string.match(KEYS[k], ':(%d+)$')
    if redis.call('HEXISTS', KEYS[1], bucket) == 1 and redis.call('HEXISTS', KEYS[k], 'm') == 0 then
      return redis.error_reply('LOST-PART: snapshot bucket ' .. bucket .. ' of the account vanished from Redis')
    end
  end
end
local marked = {}
for i = 2, #ARGV, 3 do
  local k = 1 + tonumber(ARGV[i])
  local key = KEYS[k]
  if ARGV[i + 2] == '' then
    redis.call('HDEL', key, ARGV[i + 1])
  else
    redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2])
    if not marked[k] then
      marked[k] = true
      if redis.call('HSETNX', key, 'm', '1') == 1 then
        redis.call('HSET', KEYS[1], string.match(key, ':(%d+)$'), '1')
      end
    end
  end
end
return 0
