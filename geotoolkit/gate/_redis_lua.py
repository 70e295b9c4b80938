"""The Lua scripts of the Redis gate: each call is one atomic ``EVALSHA``.

They mirror ``geotoolkit.gate.fleet`` (the contract suite checks that they
agree). Keys: ``KEYS[1]`` the state hash (``tat``, ``pause_until``, ``epoch``,
``cause``, AIMD fields ``f``/``dec_at``/``thr_at``/``inc_at`` and ring buckets
``b0``..``b9`` as ``"stamp:requests:successes:throttled"``), ``KEYS[2]`` the
workers' heartbeat sorted set (score: expiry), ``KEYS[3]`` the cap counters
(``day``/``day:n``, ``month``/``month:n``). Floats travel as strings: Redis
truncates Lua numbers in replies to integers and ``tostring`` loses digits.

The shared-value scripts (``VALUE_*``) take one key, the values hash: field
``name`` -> ``"<expires_at>|<value>"``. Writes prune expired entries and push
the hash's own TTL to its longest-lived entry.
"""

from __future__ import annotations

from geotoolkit.gate.fleet import BUCKET_SECONDS, CREDIT_SECONDS, SLOTS

__all__ = ["ACQUIRE", "PAUSE", "PERIOD_TEST", "RECORD", "STATE", "STATS", "USAGE", "VALUES",
           "VALUE_DELETE", "VALUE_SET"]

_PROLOGUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local G = KEYS[1]
local v = redis.call('HMGET', G, 'tat', 'pause_until', 'epoch', 'f', 'dec_at', 'thr_at', 'inc_at')
local tat = tonumber(v[1]) or 0
local until_ = tonumber(v[2]) or 0
local epoch = tonumber(v[3]) or 0
local f = tonumber(v[4]) or 1
local dec_at = tonumber(v[5])
local thr_at = tonumber(v[6])
local inc_at = tonumber(v[7])
local SLOTS, BUCKET, CREDIT = __SLOTS__, __BUCKET__, __CREDIT__
local function fmt(x) return string.format('%.6f', x) end
local function num(x) if x == nil then return '' end return string.format('%.17g', x) end
local function keep(ttl)
  -- expire ttl seconds after the state stops mattering (never during a pause)
  local ms = math.ceil((math.max(tat, until_, now) - now + ttl) * 1000)
  redis.call('PEXPIRE', G, ms)
end
local function parse(s)
  if not s then return nil end
  local a, b, c, d = string.match(s, '^(%-?%d+):(%d+):(%d+):(%d+)$')
  if not a then return nil end
  return tonumber(a), tonumber(b), tonumber(c), tonumber(d)
end
local function count(r, s, th)
  if r + s + th <= 0 then return end
  local stamp = math.floor(now / BUCKET)
  local field = 'b' .. string.format('%d', stamp % SLOTS)
  local st, cr, cs, ct = parse(redis.call('HGET', G, field))
  if st ~= stamp then cr, cs, ct = 0, 0, 0 end
  redis.call('HSET', G, field, string.format('%d:%d:%d:%d', stamp, cr + r, cs + s, ct + th))
end
local function succeeded(s, ai)
  if s <= 0 then return end
  if inc_at == nil then inc_at = now return end
  if now <= inc_at then return end
  f = math.min(1, f + ai * math.min(now - inc_at, CREDIT))
  inc_at = now
end
local function stats_reply()
  local stamp = math.floor(now / BUCKET)
  local names = {}
  for i = 0, SLOTS - 1 do names[#names + 1] = 'b' .. i end
  local vals = redis.call('HMGET', G, unpack(names))
  local r, s, th, oldest = 0, 0, 0, nil
  for i = 1, SLOTS do
    local st, cr, cs, ct = parse(vals[i])
    if st and st > stamp - SLOTS and st <= stamp then
      r, s, th = r + cr, s + cs, th + ct
      if oldest == nil or st < oldest then oldest = st end
    end
  end
  local window = SLOTS * BUCKET
  if oldest then window = math.max(BUCKET, math.min(window, now - oldest * BUCKET)) end
  local cause = ''
  if until_ > now then cause = redis.call('HGET', G, 'cause') or '' end
  local workers = redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf')
  return {fmt(now), fmt(window), r, s, th, num(f), fmt(until_), cause, workers}
end
-- Howard Hinnant's civil-from-days and days-from-civil (proleptic Gregorian, UTC)
local function civil(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end
local function days(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end
local function period(at, kind)
  local z = math.floor(at / 86400)
  local y, m, d = civil(z)
  if kind == 'month' then
    local ny, nm = y, m + 1
    if nm > 12 then ny, nm = y + 1, 1 end
    return string.format('%04d-%02d', y, m), days(ny, nm, 1) * 86400
  end
  return string.format('%04d-%02d-%02d', y, m, d), (z + 1) * 86400
end
"""

_PROLOGUE = (
    _PROLOGUE.replace("__SLOTS__", str(SLOTS))
    .replace("__BUCKET__", repr(BUCKET_SECONDS))
    .replace("__CREDIT__", repr(CREDIT_SECONDS))
)

# ARGV: interval, horizon, ttl, requests, successes, throttled, increase/s, cap (-1: none),
# period. Returns {wait, now, reserved, epoch, factor, used, label, resets_at, capped}.
ACQUIRE = _PROLOGUE + """
local interval, horizon, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local succ = tonumber(ARGV[5])
count(tonumber(ARGV[4]), succ, tonumber(ARGV[6]))
succeeded(succ, tonumber(ARGV[7]))
local cap, kind = tonumber(ARGV[8]), ARGV[9]
local used, label, resets, capped = -1, '', 0, 0
if cap >= 0 then
  label, resets = period(now, kind)
  local u = redis.call('HMGET', KEYS[3], kind, kind .. ':n')
  used = 0
  if u[1] == label then used = tonumber(u[2]) or 0 end
  if used >= cap then capped = 1 end
end
local slot = math.max(now, tat, until_)
local wait = slot - now
local reserved = 0
if capped == 0 and wait <= horizon then
  reserved = 1
  tat = slot + interval / f
  if cap >= 0 then
    used = used + 1
    redis.call('HSET', KEYS[3], kind, label, kind .. ':n', used)
    local ms = math.ceil((resets - now + 86400) * 1000)
    if redis.call('PTTL', KEYS[3]) < ms then redis.call('PEXPIRE', KEYS[3], ms) end
  end
end
redis.call('HSET', G, 'tat', fmt(tat), 'f', num(f), 'inc_at', num(inc_at))
keep(ttl)
return {fmt(wait), fmt(now), reserved, epoch, num(f), used, label, fmt(resets), capped}
"""

# ARGV: seconds, ttl, cause, rate_limited (0/1), decrease, min_factor, hold, recent,
# requests, successes, throttled. Returns {remaining, now}.
PAUSE = _PROLOGUE + """
local seconds = math.max(tonumber(ARGV[1]), 0)
local old_until = until_
local cut = false
if ARGV[4] == '1' and now >= old_until then
  local prev = thr_at
  thr_at = now
  if dec_at == nil or now - dec_at >= tonumber(ARGV[7]) then
    local beta, recent = tonumber(ARGV[5]), tonumber(ARGV[8])
    local mult = 1  -- a first 429 only pauses
    if prev ~= nil then
      mult = beta
      if now - prev > recent then mult = 1 - (1 - beta) * recent / (now - prev) end
    end
    if mult < 1 then
      f = math.max(tonumber(ARGV[6]), f * mult)
      dec_at = now
      cut = true
    end
  end
end
until_ = math.max(until_, now + seconds)
if until_ > old_until then
  if now >= old_until then
    tat = until_  -- a new pause: cancel the reservations
    epoch = epoch + 1
  else
    tat = math.max(tat, until_)  -- extending a running one
  end
  redis.call('HSET', G, 'cause', ARGV[3])
end
if cut then inc_at = until_ end
redis.call('HSET', G, 'tat', fmt(tat), 'pause_until', fmt(until_), 'epoch', epoch, 'f', num(f),
  'dec_at', num(dec_at), 'thr_at', num(thr_at), 'inc_at', num(inc_at))
count(tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]))
keep(tonumber(ARGV[2]))
return {fmt(until_ - now), fmt(now)}
"""

# ARGV: ttl, requests, successes, throttled, increase/s, worker ('' : none), leaving (0/1),
# heartbeat seconds. Returns the stats (see STATS).
RECORD = _PROLOGUE + """
local req, succ, thr = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if req + succ + thr > 0 then
  count(req, succ, thr)
  succeeded(succ, tonumber(ARGV[5]))
  redis.call('HSET', G, 'f', num(f), 'inc_at', num(inc_at))
  keep(tonumber(ARGV[1]))
end
local worker, beat = ARGV[6], tonumber(ARGV[8])
if worker ~= '' and ARGV[7] == '1' then
  redis.call('ZREM', KEYS[2], worker)
elseif worker ~= '' then
  redis.call('ZADD', KEYS[2], now + beat, worker)
  redis.call('PEXPIRE', KEYS[2], math.ceil(beat * 2000))
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', fmt(now))
return stats_reply()
"""

# Read-only. Returns {now, window, requests, successes, throttled, factor, pause_until, cause,
# workers}.
STATS = _PROLOGUE + """
return stats_reply()
"""

# Read-only. Returns {now, tat, pause_until, epoch}.
STATE = _PROLOGUE + """
return {fmt(now), fmt(tat), fmt(until_), epoch}
"""

# Read-only; KEYS[3] only. ARGV: period. Returns {label, used, resets_at}.
USAGE = _PROLOGUE + """
local label, resets = period(now, ARGV[1])
local u = redis.call('HMGET', KEYS[3], ARGV[1], ARGV[1] .. ':n')
local used = 0
if u[1] == label then used = tonumber(u[2]) or 0 end
return {label, used, fmt(resets)}
"""

#: For tests: the period of an arbitrary instant (ARGV: at, kind) -> {label, resets_at}.
PERIOD_TEST = _PROLOGUE + """
local label, resets = period(tonumber(ARGV[1]), ARGV[2])
return {label, fmt(resets)}
"""

_VALUES_PROLOGUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local V = KEYS[1]
local function entry(s)
  -- "<expires_at>|<value>" -> expires_at, value (nil for anything else)
  if not s then return nil end
  local bar = string.find(s, '|', 1, true)
  if not bar then return nil end
  return tonumber(string.sub(s, 1, bar - 1)), string.sub(s, bar + 1)
end
"""

# ARGV: name, value, ttl seconds, only_if_absent (0/1). Returns 1 if stored, else 0.
VALUE_SET = _VALUES_PROLOGUE + """
local name, ttl = ARGV[1], tonumber(ARGV[3])
local all = redis.call('HGETALL', V)
local longest, held = now, false
for i = 1, #all, 2 do
  local exp = entry(all[i + 1])
  if exp == nil or exp <= now then
    redis.call('HDEL', V, all[i])
  elseif all[i] == name then
    held = true
  elseif exp > longest then
    longest = exp
  end
end
if held and ARGV[4] == '1' then return 0 end
local exp = now + ttl
redis.call('HSET', V, name, string.format('%.6f', exp) .. '|' .. ARGV[2])
longest = math.max(longest, exp)
redis.call('PEXPIRE', V, string.format('%d', math.ceil((longest - now) * 1000)))
return 1
"""

# Read-only. ARGV: prefix. Returns {name1, value1, name2, value2, ...} (live entries only).
VALUES = _VALUES_PROLOGUE + """
local prefix = ARGV[1]
local all = redis.call('HGETALL', V)
local out = {}
for i = 1, #all, 2 do
  local exp, value = entry(all[i + 1])
  if exp ~= nil and exp > now and string.sub(all[i], 1, #prefix) == prefix then
    out[#out + 1] = all[i]
    out[#out + 1] = value
  end
end
return out
"""

# ARGV: name, check (0/1), expected value. Returns 1 if a live value was deleted, else 0.
VALUE_DELETE = _VALUES_PROLOGUE + """
local exp, value = entry(redis.call('HGET', V, ARGV[1]))
if exp == nil then return 0 end
if exp <= now then
  redis.call('HDEL', V, ARGV[1])
  return 0
end
if ARGV[2] == '1' and value ~= ARGV[3] then return 0 end
redis.call('HDEL', V, ARGV[1])
return 1
"""
