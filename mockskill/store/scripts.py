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
- in the session's hash too, ``i<US><skill><US><key>`` an ``Idempotency-Key`` of a skill
  that honours it: ``<digest><US><ready ms><US><first answer>`` (no answer: reserved, in
  flight until the ready time); ``ik`` how many the session holds (at most the bound:
  past it, a new key is not remembered). They go with the session (a reset, its TTL).
- a rate limit's token bucket (:mod:`mockskill.engine.buckets`' sums, in :data:`TAKE`) is
  ``<tokens> <µs>``: its tokens and when they were counted (Redis ``TIME``, in
  microseconds). A session's bucket is a field of its session's hash,
  ``b<US><bucket key>`` (it goes with the session); any other is a key of its own,
  ``P b:<bucket key>``, that expires when the bucket is full again (``PX``: a full
  bucket and a fresh one are the same), ranked in ``P buckets`` by last spending
  (the same counter) and bounded like the sessions.
- ``P gen`` a hash: each restarted sequence's generation.
- ``P act`` a hash: each scenario's activation time (ms, Redis ``TIME``).
- ``P seed`` the server seed shared by every replica.
- a long-running task (:mod:`mockskill.engine.task_records`' records, in :data:`SUBMIT`
  and :data:`TOUCH`) is a hash ``P task:<session><US><number>``: ``s`` its skill, ``t``
  when it was submitted and ``u`` the time it is kept until (ms, Redis ``TIME`` with its
  microseconds as decimals), ``p`` its polls, ``e`` its cancels and inputs (one a line:
  ``<action> <at ms> <polls> <fits, comma-separated>``) and ``n`` how many, ``c`` its
  callback (the Submit's, opaque), ``k<key>`` each delivery claimed (:data:`CLAIM`); ``x`` when
  the key expires (``PEXPIRE``: as long again as it is kept, moved only when a Touch keeps
  it past that; the keep time ``u`` is the truth, the expiry only clears what a fleet
  left). ``P tasks`` ranks the tasks by their keep time as the Submit or a sweep last
  saw it: a Submit first forgets those whose time is over (ranking again those a Touch
  kept longer since), then counts the rest against the cap (every replica's).
  ``P task-held:<session>`` is the set of a session's numbers held (what a session's
  reset forgets); ``P task-number`` counts the tasks ever submitted (the next task's
  number, store-wide: no reset forgets it, so no id is handed out twice).
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

SPEND = """
local function spend(held, capacity, refill, now)
  -- mockskill/engine/buckets.py's spend, in microseconds of Redis's clock: refill (never
  -- past the capacity), then a whole token or a refusal. Returns the tokens after, and
  -- {admitted (1 or 0), whole tokens left, ms to the next token, ms until full}.
  local tokens, at = capacity, now
  if held then
    local space = string.find(held, ' ', 1, true)
    tokens, at = tonumber(string.sub(held, 1, space - 1)), tonumber(string.sub(held, space + 1))
  end
  tokens = math.min(capacity, tokens + math.max(now - at, 0) / 1000000 * refill)
  local admitted = 0
  if tokens >= 1 then
    admitted, tokens = 1, tokens - 1
  end
  local next_ms = 0
  if tokens < 1 then
    next_ms = math.ceil((1 - tokens) / refill * 1000)
  end
  local full_ms = math.ceil((capacity - tokens) / refill * 1000)
  return tokens, {admitted, math.floor(tokens), next_ms, full_ms}
end
"""

TAKE = (
    BOUND
    + SPEND
    + """
-- KEYS: session hash, sessions set, activations hash, use counter; with a rate limit,
--       the bucket's holder (its session's hash, or its own key) and the buckets set
-- ARGV: session, position field, draw field ('' none), scenario,
--       outage start ms ('' none), outage end ms, max sessions, session TTL ms, session
--       prefix; with a rate limit: capacity, refill (tokens a second), the bucket's
--       field in its session's hash ('' its own key), its key, max buckets, bucket prefix
local spent = nil
if ARGV[10] then  -- the bucket first: without a token, nothing else is taken
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local own = ARGV[12] == ''
  local held
  if own then
    held = redis.call('GET', KEYS[5])
  else
    held = redis.call('HGET', KEYS[5], ARGV[12])
  end
  local tokens
  tokens, spent = spend(held, tonumber(ARGV[10]), tonumber(ARGV[11]), now)
  if spent[1] == 0 then
    return {-1, -1, spent[1], spent[2], spent[3], spent[4]}
  end
  local counted = string.format('%.17g %d', tokens, now)
  if own then
    redis.call('SET', KEYS[5], counted, 'PX', spent[4])
    bound(KEYS[6], ARGV[13], tonumber(ARGV[14]), ARGV[15], KEYS[4])
  else
    redis.call('HSET', KEYS[5], ARGV[12], counted)
  end
end
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
if spent then
  return {position, draw, spent[1], spent[2], spent[3], spent[4]}
end
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
-- KEYS: sessions set, tokens set, buckets set; ARGV: their keys' prefixes
local dropped = 0
for i, set in ipairs(KEYS) do
  for _, name in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    dropped = dropped + redis.call('DEL', ARGV[i] .. name)
  end
  redis.call('DEL', set)
end
return dropped
"""

IDEMPOTENCY = """
local function held_parts(held)
  local a = string.find(held, '\31', 1, true)
  local b = string.find(held, '\31', a + 1, true)
  return string.sub(held, 1, a - 1), tonumber(string.sub(held, a + 1, b - 1)),
    string.sub(held, b + 1)
end
"""

RECALL = (
    NOW
    + BOUND
    + IDEMPOTENCY
    + """
-- KEYS: session hash, sessions set, use counter
-- ARGV: session, field, digest, reserve ms, max keys, max sessions, session TTL ms,
--       session prefix. Returns {state, wait ms, first answer ('' none)}.
local state, wait, answer = 'new', 0, ''
local held = redis.call('HGET', KEYS[1], ARGV[2])
if held then
  local digest, ready, kept = held_parts(held)
  if kept == '' and now >= ready then  -- a reservation never settled: free again
    redis.call('HDEL', KEYS[1], ARGV[2])
    redis.call('HINCRBY', KEYS[1], 'ik', -1)
    held = false
  elseif digest ~= ARGV[3] then
    state = 'conflict'
  elseif kept == '' or now < ready then
    state, wait = 'in_flight', math.max(1, ready - now)
  else
    state, answer = 'replay', kept
  end
end
if not held and tonumber(redis.call('HGET', KEYS[1], 'ik') or '0') < tonumber(ARGV[5]) then
  local ready = string.format('%d', now + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3] .. '\31' .. ready .. '\31')
  redis.call('HINCRBY', KEYS[1], 'ik', 1)
end
bound(KEYS[2], ARGV[1], tonumber(ARGV[6]), ARGV[8], KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return {state, wait, answer}
"""
)

SETTLE = (
    NOW
    + IDEMPOTENCY
    + """
-- KEYS: session hash; ARGV: field, digest, first answer ('' it did not run: forget the
-- key), busy ms (until the answer is ready)
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then
  return 0
end
local digest, _, kept = held_parts(held)
if digest ~= ARGV[2] or kept ~= '' then
  return 0  -- another request's, or settled already
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'ik', -1)
else
  local ready = string.format('%d', now + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], ARGV[1], digest .. '\31' .. ready .. '\31' .. ARGV[3])
end
return 1
"""
)

PRECISE_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local now_text = string.format('%.3f', now)
"""
"""Redis's clock in milliseconds with its microseconds (a task's times are fractional, as
in memory), and as text: Lua turns a number into at most 14 digits, too few for these."""

SUBMIT = (
    PRECISE_NOW
    + """
-- KEYS: tasks set (by keep time), task counter, the session's held set
-- ARGV: session, skill, keep ms, live tasks at most, task prefix, held prefix, callback
-- Returns {number (-1: refused, at the cap), now}.
-- Forget the tasks kept until now or before. A Touch that keeps a task longer leaves its
-- rank as it was (one write less per poll): when it comes up, the task's own keep time
-- ranks it again (as the in-memory store's heap does).
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_text)) do
  local kept = redis.call('HGET', ARGV[5] .. member, 'u')
  if kept and tonumber(kept) > now then
    redis.call('ZADD', KEYS[1], kept, member)
  else
    local session, number = string.match(member, '^(.*)\\31(%d+)$')
    redis.call('DEL', ARGV[5] .. member)
    redis.call('SREM', ARGV[6] .. session, number)
    redis.call('ZREM', KEYS[1], member)
  end
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return {-1, now_text}
end
-- Store-wide, never again (a reset keeps the counter): an id is not handed out twice.
-- (As text with %d: Lua would write a large number in exponent form.)
local number = string.format('%d', redis.call('INCR', KEYS[2]) - 1)
local keep = tonumber(ARGV[3])
local until_text = string.format('%.3f', now + keep)
local member = ARGV[1] .. '\\31' .. number
local task = ARGV[5] .. member
-- The key outlives its keep time by as long again: a Touch moves its expiry only when
-- the keep time it asks passes it (not at every poll). The keep time is the truth.
local expiry = math.ceil(2 * keep) + 1
redis.call('HSET', task, 's', ARGV[2], 't', now_text, 'u', until_text, 'p', 0, 'e', '', 'n', 0,
  'x', string.format('%d', math.floor(now) + expiry), 'c', ARGV[7])
redis.call('PEXPIRE', task, expiry)
redis.call('SADD', KEYS[3], number)
redis.call('ZADD', KEYS[1], until_text, member)
return {tonumber(number), now_text}
"""
)

TOUCH = (
    PRECISE_NOW
    + """
-- KEYS: the task's hash, tasks set, the session's held set
-- ARGV: the task's member in the tasks set, its number, action (poll, cancel, input,
--       look), keep ms, skill, fits (comma-separated), events kept at most
-- Returns {skill, submitted, polls, events, now, callback}, or nil: no such task of this
-- skill.
local task = redis.call('HMGET', KEYS[1], 's', 't', 'u', 'p', 'e', 'n', 'x', 'c')
if not task[1] or task[1] ~= ARGV[5] then
  return false
end
local kept_until = tonumber(task[3])
if kept_until <= now then  -- its time is over: as good as forgotten
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('SREM', KEYS[3], ARGV[2])
  return false
end
local polls, events = tonumber(task[4]), task[5]
local changed = {}  -- one HSET of what changed
if ARGV[3] == 'poll' then
  polls = polls + 1
  changed = {'p', polls}
elseif ARGV[3] == 'look' then
  -- the courier's: what the task is now, nothing counted
elseif ARGV[3] == 'input' and ARGV[6] == '' then
  -- an input that fits no phase counts for nothing: not logged, no event spent
elseif tonumber(task[6]) < tonumber(ARGV[7]) then
  local event = ARGV[3] .. ' ' .. now_text .. ' ' .. polls .. ' ' .. ARGV[6]
  if events ~= '' then
    events = events .. '\\n'
  end
  events = events .. event
  changed = {'e', events, 'n', tonumber(task[6]) + 1}
end
local keep = tonumber(ARGV[4])
local wanted = now + keep
if wanted > kept_until then  -- (its rank in the tasks set is corrected when it comes up)
  changed[#changed + 1] = 'u'
  changed[#changed + 1] = string.format('%.3f', wanted)
  if wanted >= tonumber(task[7]) then
    local expiry = math.ceil(2 * keep) + 1
    changed[#changed + 1] = 'x'
    changed[#changed + 1] = string.format('%d', math.floor(now) + expiry)
    redis.call('PEXPIRE', KEYS[1], expiry)
  end
end
if #changed > 0 then
  redis.call('HSET', KEYS[1], unpack(changed))
end
return {task[1], task[2], polls, events, now_text, task[8] or ''}
"""
)

CLAIM = (
    PRECISE_NOW
    + """
-- KEYS: the task's hash; ARGV: the delivery's key
-- Returns 1: claimed now, first; 0: claimed before, or the task is not held (a claim never
-- makes a task's hash).
local kept = redis.call('HGET', KEYS[1], 'u')
if not kept or tonumber(kept) <= now then
  return 0
end
return redis.call('HSETNX', KEYS[1], 'k' .. ARGV[1], 1)
"""
)

RESET_TASKS = """
-- KEYS: tasks set; ARGV: task prefix, held prefix, one session ('' every one) or its name
-- after a '='. The task counter stays: a number is never handed out again.
if ARGV[3] == '' then
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local session = string.match(member, '^(.*)\\31%d+$')
    redis.call('DEL', ARGV[1] .. member, ARGV[2] .. session)
  end
  return redis.call('DEL', KEYS[1])
end
local session = string.sub(ARGV[3], 2)
local held = ARGV[2] .. session
for _, number in ipairs(redis.call('SMEMBERS', held)) do
  local member = session .. '\\31' .. number
  redis.call('DEL', ARGV[1] .. member)
  redis.call('ZREM', KEYS[1], member)
end
return redis.call('DEL', held)
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
    "recall": RECALL,
    "settle": SETTLE,
    "submit": SUBMIT,
    "touch": TOUCH,
    "claim": CLAIM,
    "reset_tasks": RESET_TASKS,
}
"""Every script by name: loaded (``SCRIPT LOAD``) when the store connects."""
