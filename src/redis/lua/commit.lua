-- Stores one page's snapshot entries and the checkpoint in one atomic step, fenced by the lease epoch:
-- a paused former leader whose epoch has been superseded cannot write (and so cannot move a checkpoint back).
-- KEYS[1] epoch counter, KEYS[2] checkpoint hash, KEYS[3] entry count, KEYS[4] bucket manifest, KEYS[5..] buckets
-- ARGV[1] epoch, ARGV[2] number of checkpoint pairs N, then N (field, value) pairs, then
-- (bucket index into KEYS from 5, field, value) triples for the entries.
-- Checkpoint rules: an empty value deletes the field; 'watermark' only ever grows ('watermark_rewind', an operator's
-- rewind, sets it as it is); the pseudo-field
-- 'expect_txn' is not written but checked first: the checkpoint's changelog transaction must be that one, or Redis
-- lost commits (a failover to a replica that had not received them) and must be brought up to Kafka first; the
-- pseudo-field 'expect_restore' likewise: the checkpoint's 'restore_token' must be that one, or Redis lost writes
-- of the restore this commit finishes.
-- Partial loss: a sealed account (checkpoint field 'm', manifest field 'v') lists every bucket in its manifest and
-- marks every bucket with a field 'm'. The pseudo-field 'sealed' (not written) asks for a sealed account; the field
-- 'm' seals it (a restore's finish: the manifest is complete). Some keys gone and others not (eviction, a key
-- deleted by hand) answer LOST-PART, before anything is written: a write would recreate a lost bucket in part and
-- hide the loss. An account with neither marker is of the previous format (or a test's): not checked.
-- The pseudo-field 'expect_manifest' (a restore's finish, not written) names a field the manifest must still hold:
-- 'r' (a full restore's, removed by the sealing) or 'v' (a tail's); gone, the manifest was evicted during the
-- restore and sealing it now would make every bucket it no longer lists read as new: LOST-PART.
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
local want_sealed, sealing = false, false
for i = 3, first_entry - 1, 2 do
  if ARGV[i] == 'expect_txn' then
    local txn = redis.call('HGET', KEYS[2], 'txn') or '0'
    if txn ~= ARGV[i + 1] then
      return redis.error_reply('LOST: Redis holds changelog transaction ' .. txn .. ', expected ' .. ARGV[i + 1])
    end
  elseif ARGV[i] == 'sealed' then
    want_sealed = true
  elseif ARGV[i] == 'm' then
    sealing = true
  elseif ARGV[i] == 'expect_manifest' then
    if redis.call('HEXISTS', KEYS[4], ARGV[i + 1]) == 0 then
      return redis.error_reply('LOST-PART: the bucket manifest of the account vanished from Redis during its restore')
    end
  elseif ARGV[i] == 'expect_restore' then
    if redis.call('HGET', KEYS[2], 'restore_token') ~= ARGV[i + 1] then
      return redis.error_reply('LOST: Redis lost writes of the restore it was to finish')
    end
  end
end
local has_mark = redis.call('HEXISTS', KEYS[2], 'm') == 1
local has_manifest = redis.call('HEXISTS', KEYS[4], 'v') == 1
if not sealing and (has_mark ~= has_manifest or (want_sealed and not has_mark)) then
  local gone = has_mark and 'the bucket manifest' or 'the checkpoint'
  return redis.error_reply('LOST-PART: ' .. gone .. ' of the account vanished from Redis')
end
if has_manifest and not sealing then
  for k = 5, #KEYS do
    local bucket = string.match(KEYS[k], ':(%d+)$')
    if redis.call('HEXISTS', KEYS[4], bucket) == 1 and redis.call('HEXISTS', KEYS[k], 'm') == 0 then
      return redis.error_reply('LOST-PART: snapshot bucket ' .. bucket .. ' of the account vanished from Redis')
    end
  end
end

local added = 0
for i = first_entry, #ARGV, 3 do
  local key = KEYS[4 + tonumber(ARGV[i])]
  added = added + redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2])
end
if added > 0 then
  redis.call('INCRBY', KEYS[3], added)
end
if has_manifest then
  -- A bucket created now is marked and listed in the same step.
  for k = 5, #KEYS do
    if redis.call('HSETNX', KEYS[k], 'm', '1') == 1 then
      redis.call('HSET', KEYS[4], string.match(KEYS[k], ':(%d+)$'), '1')
    end
  end
end

for i = 3, first_entry - 1, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if field == 'expect_txn' or field == 'sealed' or field == 'expect_restore' or field == 'expect_manifest' then
    -- checked above
  elseif value == '' then
    redis.call('HDEL', KEYS[2], field)
  elseif field == 'watermark_rewind' then
    -- An operator's rewind (only while paused): the one write that moves the watermark back.
    redis.call('HSET', KEYS[2], 'watermark', value)
  elseif field == 'watermark' then
    local old = tonumber(redis.call('HGET', KEYS[2], field) or '-1')
    if tonumber(value) > old then
      redis.call('HSET', KEYS[2], field, value)
    end
  else
    redis.call('HSET', KEYS[2], field, value)
  end
end
if sealing then
  redis.call('HSET', KEYS[4], 'v', '1')
  redis.call('HDEL', KEYS[4], 'r')
end
return added
