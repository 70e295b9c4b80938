"""The Redis gate's one Lua script: a batch of primitives, atomically, on the server's ``TIME``.

``ARGV`` is a flat list of operations, each an opcode and its arguments; each
operation takes its Redis keys, in order, from ``KEYS``. The reply holds one
result per operation::

    R ttl interval horizon         KEYS: state         {wait, now, reserved, epoch}
    P ttl seconds cause            KEYS: state         {now, pause_until, previous_until, epoch}
    S                              KEYS: state         {now, tat, pause_until, epoch, cause}
    A n ttl delta1..deltan         KEYS: n counters    {value1..valuen}
    C n                            KEYS: n counters    {value or nil, ...}
    V name value ttl mode expected KEYS: values        1 stored / 0   (mode: set, absent, equal)
    L prefix                       KEYS: values        {name1, value1, ...} (live ones)
    D name check expected          KEYS: values        1 deleted / 0

The state is a hash (``tat``, ``pause_until``, ``epoch``, ``cause``) that expires
``ttl`` seconds after it stops mattering (never during a pause); a counter is a
string key (``INCRBY``) living ``ttl`` seconds from its last change; the values
are a hash, field ``name`` -> ``"<expires_at>|<value>"``, whose writes prune
expired fields and push the hash's own TTL to its longest-lived field. Floats
travel as strings: Redis truncates Lua numbers in replies to integers, and
``tostring`` loses digits.
"""

from __future__ import annotations

__all__ = ["BATCH"]

BATCH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local a, k, ops, out = 0, 0, {}, {}
local function arg() a = a + 1 return ARGV[a] end
local function num() return tonumber(arg()) end
local function key() k = k + 1 return KEYS[k] end
local function fmt(x) return string.format('%.6f', x) end
local function pacing(G)
  local v = redis.call('HMGET', G, 'tat', 'pause_until', 'epoch', 'cause')
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, v[4] or ''
end
local function keep(G, tat, till, ttl)
  redis.call('PEXPIRE', G, math.ceil((math.max(tat, till, now) - now + ttl) * 1000))
end
local function entry(s)
  if not s then return nil end
  local bar = string.find(s, '|', 1, true)
  if not bar then return nil end
  return tonumber(string.sub(s, 1, bar - 1)), string.sub(s, bar + 1)
end
function ops.R()
  local G, ttl, interval, horizon = key(), num(), num(), num()
  local tat, till, epoch = pacing(G)
  local slot, reserved = math.max(now, tat, till), 0
  if slot - now <= horizon then
    reserved = 1
    redis.call('HSET', G, 'tat', fmt(slot + interval))
    keep(G, slot + interval, till, ttl)
  end
  return {fmt(slot - now), fmt(now), reserved, epoch}
end
function ops.P()
  local G, ttl, seconds, cause = key(), num(), math.max(num(), 0), arg()
  local tat, till, epoch = pacing(G)
  local previous = till
  till = math.max(till, now + seconds)
  if till > previous then
    if now >= previous then tat, epoch = till, epoch + 1 else tat = math.max(tat, till) end
    redis.call('HSET', G, 'tat', fmt(tat), 'pause_until', fmt(till), 'epoch', epoch, 'cause', cause)
  end
  keep(G, tat, till, ttl)
  return {fmt(now), fmt(till), fmt(previous), epoch}
end
function ops.S()
  local tat, till, epoch, cause = pacing(key())
  return {fmt(now), fmt(tat), fmt(till), epoch, cause}
end
function ops.A()
  local n, ms, r = num(), math.ceil(num() * 1000), {}
  for i = 1, n do
    local C = key()
    r[i] = redis.call('INCRBY', C, arg())
    redis.call('PEXPIRE', C, ms)
  end
  return r
end
function ops.C()
  local n, r = num(), {}
  for i = 1, n do r[i] = redis.call('GET', key()) or false end  -- false: a nil reply
  return r
end
function ops.V()
  local V, name, value, ttl, mode, expected = key(), arg(), arg(), num(), arg(), arg()
  local all = redis.call('HGETALL', V)
  local longest, held = now, nil
  for i = 1, #all, 2 do
    local exp, v = entry(all[i + 1])
    if exp == nil or exp <= now then
      redis.call('HDEL', V, all[i])
    elseif all[i] == name then
      held = v
    elseif exp > longest then
      longest = exp
    end
  end
  if (mode == 'absent' and held ~= nil) or (mode == 'equal' and held ~= expected) then
    return 0
  end
  redis.call('HSET', V, name, fmt(now + ttl) .. '|' .. value)
  longest = math.max(longest, now + ttl)
  redis.call('PEXPIRE', V, string.format('%d', math.ceil((longest - now) * 1000)))
  return 1
end
function ops.L()
  local V, prefix, r = key(), arg(), {}
  local all = redis.call('HGETALL', V)
  for i = 1, #all, 2 do
    local exp, v = entry(all[i + 1])
    if exp ~= nil and exp > now and string.sub(all[i], 1, #prefix) == prefix then
      r[#r + 1] = all[i]
      r[#r + 1] = v
    end
  end
  return r
end
function ops.D()
  local V, name, check, expected = key(), arg(), arg(), arg()
  local exp, v = entry(redis.call('HGET', V, name))
  if exp == nil then return 0 end
  if exp <= now then
    redis.call('HDEL', V, name)
    return 0
  end
  if check == '1' and v ~= expected then return 0 end
  redis.call('HDEL', V, name)
  return 1
end
while a < #ARGV do out[#out + 1] = ops[arg()]() end
return out
"""
