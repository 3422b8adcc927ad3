-- Stores one page's snapshot entries and the checkpoint in one atomic step, fenced by the lease epoch:
-- a paused former leader whose epoch has been superseded cannot write (and so cannot move a checkpoint back).
-- KEYS[1] epoch counter, KEYS[2] checkpoint hash, KEYS[3] entry count, KEYS[4..] snapshot buckets
-- ARGV[1] epoch, ARGV[2] number of checkpoint pairs N, then N (field, value) pairs, then
-- (bucket index into KEYS from 4, field, value) triples for the entries.
-- Checkpoint rules: an empty value deletes the field; 'watermark' only ever grows; the pseudo-field
-- 'expect_txn' is not written but checked first: the checkpoint's changelog transaction must be that one, or Redis
-- lost commits (a failover to a replica that had not received them) and must be brought up to Kafka first; the
-- pseudo-field 'expect_restore' likewise: the checkpoint's 'restore_token' must be that one, or Redis lost writes
-- of the restore this commit finishes.
local current = redis.call('GET', KEYS[1])
if not current then
  -- The epoch counter only vanishes with the account's keys (a flush, an empty replica): restore from Kafka.
  return redis.error_reply('LOST: the account keys are gone')
end
if current ~= ARGV[1] then
  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))
end

local pairs_count = tonumber(ARGV[2])
local first_entry = 3 + pairs_count * 2
for i = 3, first_entry - 1, 2 do
  if ARGV[i] == 'expect_txn' then
    local txn = redis.call('HGET', KEYS[2], 'txn') or '0'
    if txn ~= ARGV[i + 1] then
      return redis.error_reply('LOST: Redis holds changelog transaction ' .. txn .. ', expected ' .. ARGV[i + 1])
    end
  elseif ARGV[i] == 'expect_restore' then
    if redis.call('HGET', KEYS[2], 'restore_token') ~= ARGV[i + 1] then
      return redis.error_reply('LOST: Redis lost writes of the restore it was to finish')
    end
  end
end
local added = 0
for i = first_entry, #ARGV, 3 do
  local key = KEYS[3 + tonumber(ARGV[i])]
  added = added + redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2])
end
if added > 0 then
  redis.call('INCRBY', KEYS[3], added)
end

for i = 3, first_entry - 1, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if field == 'expect_txn' or field == 'expect_restore' then
    -- checked above
  elseif value == '' then
    redis.call('HDEL', KEYS[2], field)
  elseif field == 'watermark' then
    local old = tonumber(redis.call('HGET', KEYS[2], field) or '-1')
    if tonumber(value) > old then
      redis.call('HSET', KEYS[2], field, value)
    end
  else
    redis.call('HSET', KEYS[2], field, value)
  end
end
return added
