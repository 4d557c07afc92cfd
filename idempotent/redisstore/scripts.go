package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// Each Store operation is one Lua script, run atomically by the server with
// EVALSHA (falling back to EVAL when the server does not have it cached), so
// the check and the write of an operation can never be split by another
// client's command, and each costs one round trip.
//
// The scripts touch only KEYS[1], the record's key, so they run unchanged on
// Redis Cluster. They answer with a table whose first element is a tag the Go
// side switches on; no script raises an error for a stored value it cannot
// read (a corrupt record is reported, never a Lua runtime error).
//
// The liveness conditions use only the caller's clock (ARGV). The server's
// clock (TIME) is read for one thing: refusing a write whose key expiry has
// already passed, since PEXPIREAT with a past time deletes the key at once.

// luaHelpers is the common prologue of the scripts.
const luaHelpers = `
-- int parses a stored decimal integer strictly, as the Go side does; any
-- other value (missing, "1e3", " 12", "0x10") is nil.
local function int(v)
  if type(v) == 'string' and string.match(v, '^%-?%d+$') then
    return tonumber(v)
  end
  return nil
end

-- servernow is the server's time in epoch milliseconds.
local function servernow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return {'wrongtype', kind}
end
`

// validStepsLua is the claim script's check that a steps value it is about
// to keep decodes: the rules of decodeSteps (whole name/data netstring
// pairs, decimal lengths), so the claim never writes over a record whose
// steps the Go side would refuse. Lua patterns anchored with '^' match at
// init, so each length is read where the previous netstring ended.
const validStepsLua = `
local function validsteps(s)
  local i, parts = 1, 0
  while i <= #s do
    local digits = string.match(s, '^(%d+):', i)
    if not digits then return false end
    local start = i + #digits + 1
    local stop = start + tonumber(digits)
    if stop > #s or string.sub(s, stop, stop) ~= ',' then return false end
    i, parts = stop + 1, parts + 1
  end
  return parts % 2 == 0
end
`

// claimScript implements Store.Claim.
//
// ARGV: [1] lease, [2] now (epoch s), [3] now (epoch ms), [4] key expiry
// (epoch ms), [5] the new record's payload fingerprint ("" for none), [6...]
// the new record's field/value pairs.
//
// The liveness rule is storage.Record.Replaceable: an expired record, or a
// lapsed INPROGRESS one of this format (version storage.RecordVersion, a
// lease) whose fingerprint is absent or equal to the claim's (when the
// claim carries one). A foreign record is replaced only once it expires. The steps rule is storage.Record.Resumable:
// the new record keeps the stored steps only when the stored record is
// INPROGRESS, its expiration is readable and not past, and its fingerprint
// equals the claim's ("" for none on either side); every other claim
// drops them with the rest of the old hash. Steps about to be kept that do
// not decode refuse the claim without writing. The claim rewrites the whole
// hash, so the claimed record is never suspended.
//
// replaced tells what a claim replaced: 0 nothing of another owner's (no
// record, an expired COMPLETED one, or the caller's own), 1 another owner's
// INPROGRESS record (a takeover), 2 one its owner suspended (a resume).
//
// Replies: {'claimed', replaced 0|1|2, kept steps ("" for none)}; {'own',
// steps ("" for none)} (a live record with the caller's lease, nothing
// written; its steps if it is resumable); {'refused', HGETALL of the live
// record}; {'badsteps', steps}; {'wrongtype', type}; {'past', server ms}.
var claimScript = redis.NewScript(luaHelpers + validStepsLua + `
local record_version = ` + strconv.Itoa(storage.RecordVersion) + `
local replaced = 0
local steps = ''
if kind == 'hash' then
  local f = redis.call('HMGET', key, 'status', 'expiration', 'in_progress_expiration', 'lease', 'validation', 'suspended', 'version')
  local exp, lease_end = int(f[2]), int(f[3])
  local stored_fp = f[5] or ''
  local same_payload = ARGV[5] == '' or stored_fp == '' or stored_fp == ARGV[5]
  local ours = int(f[7]) == record_version and f[4] ~= false and f[4] ~= ''
  local claimable = (exp ~= nil and exp < tonumber(ARGV[2])) or
    (f[1] == 'INPROGRESS' and ours and lease_end ~= nil and lease_end < tonumber(ARGV[3]) and same_payload)
  local resumable = f[1] == 'INPROGRESS' and exp ~= nil and exp >= tonumber(ARGV[2]) and stored_fp == ARGV[5]
  if resumable then
    steps = redis.call('HGET', key, 'steps') or ''
  end
  if not claimable then
    if f[4] == ARGV[1] then
      return {'own', steps}
    end
    return {'refused', redis.call('HGETALL', key)}
  end
  -- Only steps this claim writes back are checked; the Go side decodes
  -- every steps value it receives, the own record's included.
  if not validsteps(steps) then
    return {'badsteps', steps}
  end
  if f[1] == 'INPROGRESS' and f[4] ~= ARGV[1] then
    replaced = 1
    if f[6] == '1' then
      replaced = 2
    end
  end
end
local srv = servernow()
if tonumber(ARGV[4]) <= srv then
  return {'past', srv}
end
if kind == 'hash' then
  redis.call('DEL', key)
end
redis.call('HSET', key, unpack(ARGV, 6))
if steps ~= '' then
  redis.call('HSET', key, 'steps', steps)
end
redis.call('PEXPIREAT', key, ARGV[4])
return {'claimed', replaced, steps}
`)

// completeScript implements Store.Complete. It drops the record's steps
// and its suspended mark: a completed record replays its response, and
// nothing resumes it.
//
// ARGV: [1] lease, [2] key expiry (epoch ms), [3] status, [4] expiration
// (epoch s), [5] data ("" for none), [6] trace context ("" for none).
//
// Replies: {'ok'}; {'gone'}; {'lost'} (another lease, or none);
// {'wrongtype', type}; {'past', server ms}.
var completeScript = redis.NewScript(luaHelpers + `
if kind == 'none' then
  return {'gone'}
end
if redis.call('HGET', key, 'lease') ~= ARGV[1] then
  return {'lost'}
end
local srv = servernow()
if tonumber(ARGV[2]) <= srv then
  return {'past', srv}
end
redis.call('HSET', key, 'status', ARGV[3], 'expiration', ARGV[4])
if ARGV[5] == '' then
  redis.call('HDEL', key, 'in_progress_expiration', 'data', 'steps', 'suspended')
else
  redis.call('HSET', key, 'data', ARGV[5])
  redis.call('HDEL', key, 'in_progress_expiration', 'steps', 'suspended')
end
if ARGV[6] == '' then
  redis.call('HDEL', key, 'trace')
else
  redis.call('HSET', key, 'trace', ARGV[6])
end
redis.call('PEXPIREAT', key, ARGV[2])
return {'ok'}
`)

// releaseScript implements Store.Release.
//
// ARGV: [1] lease.
//
// Replies: {'ok'}; {'gone'}; {'lost', status ("" if none)}; {'done',
// status} (the caller's record, not INPROGRESS: kept); {'wrongtype', type}.
var releaseScript = redis.NewScript(luaHelpers + `
if kind == 'none' then
  return {'gone'}
end
local f = redis.call('HMGET', key, 'lease', 'status')
if f[1] ~= ARGV[1] then
  return {'lost', f[2] or ''}
end
if f[2] ~= 'INPROGRESS' then
  return {'done', f[2] or ''}
end
redis.call('DEL', key)
return {'ok'}
`)

// appendStepScript implements Store.AppendStep.
//
// ARGV: [1] lease, [2] the step, encoded (encodeStep), [3] the store's
// MaxItemBytes.
//
// The size is measured as completedSize does, on the hash as it would be
// with the step: the key plus every field name and value. It is read here,
// not in Go, because only the server knows the record's current size
// without a second round trip. The key's expiry is left as the claim set
// it: HSET keeps it.
//
// Replies: {'ok'}; {'gone'}; {'lost', status ("" if none)} (another lease,
// or none); {'done', status} (the caller's record, not INPROGRESS);
// {'toolarge', size with the step}; {'wrongtype', type}.
var appendStepScript = redis.NewScript(luaHelpers + `
if kind == 'none' then
  return {'gone'}
end
local f = redis.call('HMGET', key, 'lease', 'status')
if f[1] ~= ARGV[1] then
  return {'lost', f[2] or ''}
end
if f[2] ~= 'INPROGRESS' then
  return {'done', f[2] or ''}
end
local size, has = #key + #ARGV[2], false
for _, field in ipairs(redis.call('HKEYS', key)) do
  size = size + #field + redis.call('HSTRLEN', key, field)
  if field == 'steps' then
    has = true
  end
end
if not has then
  size = size + #'steps'
end
if size > tonumber(ARGV[3]) then
  return {'toolarge', size}
end
local cur = redis.call('HGET', key, 'steps') or ''
redis.call('HSET', key, 'steps', cur .. ARGV[2])
return {'ok'}
`)

// suspendScript implements Store.Suspend: it moves the lease end and sets
// the suspended field to "1", keeping every other field, the steps and the
// key's expiry (HSET keeps it).
//
// ARGV: [1] lease, [2] lease end (epoch ms).
//
// Replies: {'ok'}; {'gone'}; {'lost', status ("" if none)}; {'done',
// status}; {'wrongtype', type}.
var suspendScript = redis.NewScript(luaHelpers + `
if kind == 'none' then
  return {'gone'}
end
local f = redis.call('HMGET', key, 'lease', 'status')
if f[1] ~= ARGV[1] then
  return {'lost', f[2] or ''}
end
if f[2] ~= 'INPROGRESS' then
  return {'done', f[2] or ''}
end
redis.call('HSET', key, 'in_progress_expiration', ARGV[2], 'suspended', '1')
return {'ok'}
`)

// scripts lists every script of the invocation path, for LoadScripts.
var scripts = []*redis.Script{claimScript, completeScript, releaseScript, appendStepScript, suspendScript}
