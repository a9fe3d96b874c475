"""The Lua scripts that make each need one atomic step on Redis.

A script runs alone on the Redis server: nothing another replica does can
fall between its reads and its writes, so a sequence position, a token use
or a draw number is taken exactly once however many processes ask at once.
Times are Redis's own (``TIME``, in milliseconds), never a replica's clock,
so that every replica measures an outage window from the same instant.

The scripts name the keys they touch in ``KEYS`` where they are known up
front; the bounds (sessions and tokens beyond ``max_sessions``) delete keys
found at run time, which a single Redis (not a Redis Cluster) allows.

Keys, under the store's prefix ``P`` (``mockskill:`` + namespace):

- ``P s:<session>`` a hash per session: ``p<US><key><US><generation>`` the next
  position in a sequence's generation, ``d<US><scenario>`` the next draw number
  (``<US>`` is the unit separator, ``\\x1f``), ``s<US><scenario>`` the scenario state a
  step moved the session into; it expires when unused for the session TTL.
- ``P sessions`` a sorted set of the sessions by last use (``P clock``, a counter
  of uses: two in one millisecond keep their order): the least
  recently used beyond ``max_sessions`` are forgotten, as in memory.
- ``P t:<token>`` a hash per issued token: ``s`` its scopes, ``u`` uses left (-1:
  no bound); it expires with the token (``PEXPIRE``). ``P tokens``: the tokens by
  issue (the same counter), bounded like the sessions.
- ``P gen`` a hash: each restarted sequence's generation.
- ``P act`` a hash: each scenario's activation time (ms, Redis ``TIME``).
- ``P seed`` the server seed shared by every replica.
"""

from __future__ import annotations

NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

BOUND = """
local function bound(set, member, limit, prefix, clock)
  -- ranked by a counter, not the time: two uses in one millisecond keep their order
  if redis.call('ZADD', set, redis.call('INCR', clock), member) == 1 then
    local over = redis.call('ZCARD', set) - limit
    if over > 0 then
      -- the least recently used, never the one just used (it may tie on the millisecond)
      local oldest = redis.call('ZRANGE', set, 0, over)
      for _, name in ipairs(oldest) do
        if over > 0 and name ~= member then
          redis.call('ZREM', set, name)
          redis.call('DEL', prefix .. name)
          over = over - 1
        end
      end
    end
  end
end
"""

TAKE = (
    BOUND
    + """
-- KEYS: session hash, sessions set, activations hash, use counter
-- ARGV: session, position field, draw field ('' none), scenario,
--       outage start ms ('' none), outage end ms, max sessions, session TTL ms, session prefix
local position = -1
local out = false
if ARGV[5] ~= '' then
  local t = redis.call('TIME')  -- only for an outage window: Redis's clock, not a replica's
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local since = tonumber(redis.call('HGET', KEYS[3], ARGV[4]) or '0')
  local elapsed = now - since
  out = elapsed >= tonumber(ARGV[5]) and elapsed < tonumber(ARGV[6])
end
if not out then
  position = redis.call('HINCRBY', KEYS[1], ARGV[2], 1) - 1
end
local draw = -1
if ARGV[3] ~= '' then
  draw = redis.call('HINCRBY', KEYS[1], ARGV[3], 1) - 1
end
bound(KEYS[2], ARGV[1], tonumber(ARGV[7]), ARGV[9], KEYS[4])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return {position, draw}
"""
)

READ_STATE = """
-- KEYS: session hash; ARGV: state field. A read makes no session (nor makes it recent).
return redis.call('HGET', KEYS[1], ARGV[1])
"""

SET_STATE = (
    BOUND
    + """
-- KEYS: session hash, sessions set, use counter
-- ARGV: session, state field, state, max sessions, session TTL ms, session prefix
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
bound(KEYS[2], ARGV[1], tonumber(ARGV[4]), ARGV[6], KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""
)

ISSUE_TOKEN = (
    BOUND
    + """
-- KEYS: token hash, tokens set, use counter
-- ARGV: token, scopes, uses (-1: no bound), lifetime ms ('' none), max tokens, token prefix
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', ARGV[2], 'u', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
bound(KEYS[2], ARGV[1], tonumber(ARGV[5]), ARGV[6], KEYS[3])
return 1
"""
)

USE_TOKEN = """
-- KEYS: token hash, tokens set; ARGV: token
local issued = redis.call('HMGET', KEYS[1], 's', 'u')
if not issued[1] then
  return false
end
local uses = tonumber(issued[2])
if uses >= 0 then
  if uses == 0 then
    redis.call('DEL', KEYS[1])
    redis.call('ZREM', KEYS[2], ARGV[1])
    return false
  end
  redis.call('HSET', KEYS[1], 'u', uses - 1)
end
return issued[1]
"""

ACTIVATE = (
    NOW
    + """
-- KEYS: activations hash; ARGV: scenario names
for _, name in ipairs(ARGV) do
  redis.call('HSET', KEYS[1], name, now)
end
return now
"""
)

RESTART = """
-- KEYS: generations hash; ARGV: sequence keys. Returns every generation.
for _, key in ipairs(ARGV) do
  redis.call('HINCRBY', KEYS[1], key, 1)
end
return redis.call('HGETALL', KEYS[1])
"""

RESET_KEYS = """
-- KEYS: sessions set; ARGV: session prefix, one session ('' every one) or its name
-- after a '=' ('=NAME'), then the sequence keys whose positions start afresh.
local keys = {}
for i = 3, #ARGV do
  keys[ARGV[i]] = true
end
local sessions
if ARGV[2] == '' then
  sessions = redis.call('ZRANGE', KEYS[1], 0, -1)
else
  sessions = {string.sub(ARGV[2], 2)}
end
local dropped = 0
for _, session in ipairs(sessions) do
  local hash = ARGV[1] .. session
  for _, field in ipairs(redis.call('HKEYS', hash)) do
    local key = string.match(field, '^p\\31(.*)\\31%d+$')
    if key and keys[key] then
      redis.call('HDEL', hash, field)
      dropped = dropped + 1
    end
  end
end
return dropped
"""

RESET_ALL = """
-- KEYS: sessions set, tokens set; ARGV: session prefix, token prefix
local dropped = 0
for i, set in ipairs(KEYS) do
  for _, name in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    dropped = dropped + redis.call('DEL', ARGV[i] .. name)
  end
  redis.call('DEL', set)
end
return dropped
"""

SCRIPTS = {
    "take": TAKE,
    "read_state": READ_STATE,
    "set_state": SET_STATE,
    "issue_token": ISSUE_TOKEN,
    "use_token": USE_TOKEN,
    "activate": ACTIVATE,
    "restart": RESTART,
    "reset_keys": RESET_KEYS,
    "reset_all": RESET_ALL,
}
"""Every script by name: loaded (``SCRIPT LOAD``) when the store connects."""
