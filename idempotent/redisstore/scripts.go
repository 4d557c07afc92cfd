package redisstore

import "github.com/redis/go-redis/v9"

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

// claimScript implements Store.Claim.
//
// ARGV: [1] lease, [2] now (epoch s), [3] now (epoch ms), [4] key expiry
// (epoch ms), [5] the new record's payload fingerprint ("" for none), [6...]
// the new record's field/value pairs.
//
// The liveness rule is storage.Record.Replaceable: an expired record, or a
// lapsed INPROGRESS one whose fingerprint is absent or equal to the claim's
// (when the claim carries one).
//
// Replies: {'claimed', tookover 0|1}; {'own'} (a live record with the caller's
// lease, nothing written); {'refused', HGETALL of the live record};
// {'wrongtype', type}; {'past', server ms}.
var claimScript = redis.NewScript(luaHelpers + `
local tookover = 0
if kind == 'hash' then
  local f = redis.call('HMGET', key, 'status', 'expiration', 'in_progress_expiration', 'lease', 'validation')
  local exp, lease_end = int(f[2]), int(f[3])
  local same_payload = ARGV[5] == '' or not f[5] or f[5] == '' or f[5] == ARGV[5]
  local claimable = (exp ~= nil and exp < tonumber(ARGV[2])) or
    (f[1] == 'INPROGRESS' and lease_end ~= nil and lease_end < tonumber(ARGV[3]) and same_payload)
  if not claimable then
    if f[4] == ARGV[1] then
      return {'own'}
    end
    return {'refused', redis.call('HGETALL', key)}
  end
  if f[1] == 'INPROGRESS' and f[4] ~= ARGV[1] then
    tookover = 1
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
redis.call('PEXPIREAT', key, ARGV[4])
return {'claimed', tookover}
`)

// completeScript implements Store.Complete.
//
// ARGV: [1] lease, [2] key expiry (epoch ms), [3] status, [4] expiration
// (epoch s), [5] data ("" for none).
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
  redis.call('HDEL', key, 'in_progress_expiration', 'data')
else
  redis.call('HSET', key, 'data', ARGV[5])
  redis.call('HDEL', key, 'in_progress_expiration')
end
redis.call('PEXPIREAT', key, ARGV[2])
return {'ok'}
`)

// releaseScript implements Store.Release.
//
// ARGV: [1] lease.
//
// Replies: {'ok'}; {'gone'}; {'lost', status ("" if none)}; {'wrongtype', type}.
var releaseScript = redis.NewScript(luaHelpers + `
if kind == 'none' then
  return {'gone'}
end
local f = redis.call('HMGET', key, 'lease', 'status')
if f[1] ~= ARGV[1] then
  return {'lost', f[2] or ''}
end
redis.call('DEL', key)
return {'ok'}
`)

// scripts lists every script, for LoadScripts.
var scripts = []*redis.Script{claimScript, completeScript, releaseScript}
