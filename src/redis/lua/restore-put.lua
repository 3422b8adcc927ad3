-- Writes one batch of entries restored from the changelog, fenced by the lease epoch as commit.lua is: a leader
-- frozen in the middle of its restore, whose epoch has since been superseded, would otherwise write the older
-- entries it read over the ones its successor committed, and nothing would notice (the successor then publishes
-- their changes again). The batch also lists the deleted reviews' sequences and takes the restore's next token
-- (see src/redis/snapshot-restore.ts), in the same atomic step. It marks and lists every bucket it writes to (see
-- commit.lua on partial loss).
-- KEYS[1] epoch counter, KEYS[2] checkpoint hash, KEYS[3] deleted reviews' sequences (gone), KEYS[4] bucket
-- manifest, KEYS[5..] snapshot buckets
-- ARGV[1] epoch; ARGV[2] '1' to check the buckets first (a tail restore onto the existing snapshot: writing into a
-- bucket that vanished would recreate it in part and hide the loss); '2' a full restore in progress: the manifest
-- must still hold its field 'r' (written when the restore cleared the account; gone, the manifest was evicted under
-- the restore and no longer lists the buckets written before) and the buckets are checked as for a tail (a bucket
-- evicted during the restore and written again by a later batch would hold only part of its entries); ARGV[3] the
-- restore token to write ('' none); ARGV[4] number of (review id, sequence) pairs G for the gone hash, then G
-- pairs; then (bucket index into KEYS from 5, field, value) triples; an empty value deletes the field (a review
-- deleted upstream).
local current = redis.call('GET', KEYS[1])
if not current then
  return redis.error_reply('LOST: the account keys are gone')
end
if current ~= ARGV[1] then
  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))
end
local mode = ARGV[2]
if mode == '2' and redis.call('HEXISTS', KEYS[4], 'r') == 0 then
  return redis.error_reply('LOST-PART: the bucket manifest of the account vanished from Redis during its restore')
end
if mode == '2' or (mode == '1' and redis.call('HEXISTS', KEYS[4], 'v') == 1) then
  for k = 5, #KEYS do
    local bucket = string.match(KEYS[k], ':(%d+)$')
    if redis.call('HEXISTS', KEYS[4], bucket) == 1 and redis.call('HEXISTS', KEYS[k], 'm') == 0 then
      return redis.error_reply('LOST-PART: snapshot bucket ' .. bucket .. ' of the account vanished from Redis')
    end
  end
end
local gone_count = tonumber(ARGV[4])
local first = 5 + gone_count * 2
for i = 5, first - 1, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
end
local marked = {}
for i = first, #ARGV, 3 do
  local k = 4 + tonumber(ARGV[i])
  local key = KEYS[k]
  if ARGV[i + 2] == '' then
    redis.call('HDEL', key, ARGV[i + 1])
  else
    redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2])
    if not marked[k] then
      marked[k] = true
      if redis.call('HSETNX', key, 'm', '1') == 1 then
        redis.call('HSET', KEYS[4], string.match(key, ':(%d+)$'), '1')
      end
    end
  end
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], 'restore_token', ARGV[3])
end
return 0
