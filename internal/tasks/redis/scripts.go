package redis

import goredis "github.com/redis/go-redis/v9"

// group is the consumer group every instance of a name reads with.
const group = "gpuguard"

// lib is the prelude of every script: KEYS[1] is the stream P.
const lib = `
local P = KEYS[1]
local G = 'gpuguard'
local function tk(t) return P .. ':task:' .. t end
local function cnt(f, d) redis.call('HINCRBY', P .. ':counts', f, d) end
local function group()
  redis.pcall('XGROUP', 'CREATE', P, G, '0', 'MKSTREAM')
end
local function entry(t)
  local id = redis.call('XADD', P, '*', 'ticket', t)
  redis.call('HSET', tk(t), 'entry', id)
  return id
end
-- body is the key of body id's chunks ('' for none: false).
local function body(id)
  if not id or id == '' then return false end
  return P .. ':body:' .. id
end
-- unbody deletes the bodies named by fields of hash h.
local function unbody(h, ...)
  for _, f in ipairs({...}) do
    local k = body(redis.call('HGET', h, f))
    if k then redis.call('DEL', k) end
  end
end
local function unstream(h)
  local id = redis.call('HGET', h, 'entry')
  if id and id ~= '' then
    redis.call('XACK', P, G, id)
    redis.call('XDEL', P, id)
  end
end
-- attempt counts one failed or timed-out delivery of running task t.
local function attempt(t, reason, retry, max)
  local h = tk(t)
  local n = redis.call('HINCRBY', h, 'attempts', 1)
  redis.call('ZREM', P .. ':running', t)
  cnt('running', -1)
  redis.call('HSET', h, 'last_error', reason, 'leased_at', 0, 'holder', '')
  if n >= max then
    redis.call('HSET', h, 'state', 'dead', 'not_before', 0)
    unstream(h)
    redis.call('HSET', h, 'entry', '')
    cnt('dead', 1)
  else
    redis.call('HSET', h, 'state', 'queued', 'not_before', retry)
    redis.call('ZADD', P .. ':delayed', retry, t)
    cnt('queued', 1)
  end
  return redis.call('HGETALL', h)
end
`

// ARGV: ticket tool priority bytes payload enqueued maxTasks body
// bodySize. Returns 1 stored (or stored before), 0 full; the body's chunks
// (written before, expiring) are kept with the task, or deleted.
var enqueueScript = goredis.NewScript(lib + `
local t = ARGV[1]
local b = body(ARGV[8])
if redis.call('EXISTS', tk(t)) == 1 then
  if b then redis.call('DEL', b) end
  return 1
end
local c = redis.call('HMGET', P .. ':counts', 'queued', 'running')
if (tonumber(c[1]) or 0) + (tonumber(c[2]) or 0) >= tonumber(ARGV[7]) then
  if b then redis.call('DEL', b) end
  return 0
end
if b then redis.call('PERSIST', b) end
group()
redis.call('HSET', tk(t), 'ticket', t, 'tool', ARGV[2], 'priority', ARGV[3], 'bytes', ARGV[4], 'payload', ARGV[5],
  'state', 'queued', 'attempts', 0, 'last_error', '', 'enqueued', ARGV[6], 'not_before', 0,
  'leased_at', 0, 'finished', 0, 'holder', '', 'body', ARGV[8], 'body_size', ARGV[9])
entry(t)
redis.call('ZADD', P .. ':all', ARGV[6], t)
redis.call('ZADD', P .. ':ready', ARGV[6], t)
cnt('queued', 1)
return 1
`)

// ARGV: now. Returns {1, hash} for the oldest due task, or {0, wake}.
var peekScript = goredis.NewScript(lib + `
local now = tonumber(ARGV[1])
for _, t in ipairs(redis.call('ZRANGEBYSCORE', P .. ':delayed', '-inf', now)) do
  redis.call('ZREM', P .. ':delayed', t)
  local e = redis.call('HGET', tk(t), 'enqueued')
  if e then redis.call('ZADD', P .. ':ready', e, t) end
end
local head = redis.call('ZRANGE', P .. ':ready', 0, 0)
if head[1] then return {1, redis.call('HGETALL', tk(head[1]))} end
local w = redis.call('ZRANGE', P .. ':delayed', 0, 0, 'WITHSCORES')
if w[2] then return {0, w[2]} end
return {0, '0'}
`)

// ARGV: ticket now consumer. Returns the hash, or false if not queued and due.
var leaseScript = goredis.NewScript(lib + `
local t, now, me = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local h = tk(t)
if redis.call('HGET', h, 'state') ~= 'queued' then return false end
if redis.call('ZSCORE', P .. ':ready', t) then
  redis.call('ZREM', P .. ':ready', t)
elseif tonumber(redis.call('HGET', h, 'not_before')) <= now then
  redis.call('ZREM', P .. ':delayed', t)
else
  return false
end
group()
local id = redis.call('HGET', h, 'entry')
if not id or id == '' then id = entry(t) end
-- Read the group forward until the entry is pending (entries read past
-- on the way stay queued: a queued task's pending entry is harmless).
local p = redis.call('XPENDING', P, G, id, id, 1)
while #p == 0 do
  local r = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', 100, 'STREAMS', P, '>')
  if not r then
    id = entry(t)
    redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', 100, 'STREAMS', P, '>')
  end
  p = redis.call('XPENDING', P, G, id, id, 1)
end
redis.call('XCLAIM', P, G, me, 0, id, 'JUSTID')
redis.call('HSET', h, 'state', 'running', 'leased_at', now, 'holder', me, 'not_before', 0)
redis.call('ZADD', P .. ':running', now, t)
cnt('queued', -1)
cnt('running', 1)
return redis.call('HGETALL', h)
`)

// ARGV: ticket now consumer. Returns 1, or 0 if not running.
var extendScript = goredis.NewScript(lib + `
local t, now, me = ARGV[1], ARGV[2], ARGV[3]
local h = tk(t)
if redis.call('HGET', h, 'state') ~= 'running' then return 0 end
redis.call('HSET', h, 'leased_at', now, 'holder', me)
redis.call('ZADD', P .. ':running', now, t)
local id = redis.call('HGET', h, 'entry')
redis.pcall('XCLAIM', P, G, me, 0, id, 'JUSTID')
return 1
`)

// ARGV: ticket result now resultBody resultBodySize. Returns 1, or 0 if
// not running (the result body's chunks are then deleted). The request
// body goes: a done task never runs again.
var ackScript = goredis.NewScript(lib + `
local t = ARGV[1]
local h = tk(t)
local b = body(ARGV[4])
if redis.call('HGET', h, 'state') ~= 'running' then
  if b then redis.call('DEL', b) end
  return 0
end
if b then redis.call('PERSIST', b) end
unstream(h)
unbody(h, 'body')
redis.call('HSET', h, 'state', 'done', 'finished', ARGV[3], 'result', ARGV[2], 'leased_at', 0, 'holder', '', 'entry', '',
  'body', '', 'body_size', 0, 'result_body', ARGV[4], 'result_size', ARGV[5])
redis.call('ZREM', P .. ':running', t)
redis.call('ZADD', P .. ':done', ARGV[3], t)
cnt('running', -1)
cnt('done', 1)
return 1
`)

// ARGV: ticket reason retry max. Returns the hash, or false if not running.
var failScript = goredis.NewScript(lib + `
if redis.call('HGET', tk(ARGV[1]), 'state') ~= 'running' then return false end
return attempt(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
`)

// ARGV: now visibility minIdleMs consumer max reason. Returns the hashes
// of the tasks put back or dead.
var expireScript = goredis.NewScript(lib + `
local now, vis, me, max = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5])
group()
local out = {}
local r = redis.call('XAUTOCLAIM', P, G, me, ARGV[3], '0-0', 'COUNT', 1000)
for _, e in ipairs(r[2]) do
  if e and e[2] then
    local t = e[2][2]
    local h = tk(t)
    if redis.call('HGET', h, 'state') == 'running' and tonumber(redis.call('HGET', h, 'leased_at')) + vis <= now then
      table.insert(out, attempt(t, ARGV[6], 0, max))
    end
  end
end
return out
`)

// ARGV: consumer max reason. Returns the hashes of the tasks put back or dead.
var recoverScript = goredis.NewScript(lib + `
local me, max = ARGV[1], tonumber(ARGV[2])
local out = {}
for _, t in ipairs(redis.call('ZRANGE', P .. ':running', 0, -1)) do
  if redis.call('HGET', tk(t), 'holder') == me then
    table.insert(out, attempt(t, ARGV[3], 0, max))
  end
end
return out
`)

// ARGV: ticket. Returns the hash as it was, or false if unknown.
var dropScript = goredis.NewScript(lib + `
local t = ARGV[1]
local h = tk(t)
local st = redis.call('HGET', h, 'state')
if not st then return false end
local all = redis.call('HGETALL', h)
unstream(h)
unbody(h, 'body', 'result_body')
for _, z in ipairs({'all', 'ready', 'delayed', 'running', 'done'}) do redis.call('ZREM', P .. ':' .. z, t) end
redis.call('DEL', h)
cnt(st, -1)
return all
`)

// ARGV: ticket. Returns 1, 0 not dead, -1 unknown.
var retryScript = goredis.NewScript(lib + `
local t = ARGV[1]
local h = tk(t)
local st = redis.call('HGET', h, 'state')
if not st then return -1 end
if st ~= 'dead' then return 0 end
group()
entry(t)
redis.call('HSET', h, 'state', 'queued', 'attempts', 0, 'not_before', 0)
redis.call('ZADD', P .. ':ready', redis.call('HGET', h, 'enqueued'), t)
cnt('dead', -1)
cnt('queued', 1)
return 1
`)

// ARGV: before. Returns how many done tasks were deleted.
var purgeScript = goredis.NewScript(lib + `
local old = redis.call('ZRANGEBYSCORE', P .. ':done', '-inf', '(' .. ARGV[1])
for _, t in ipairs(old) do
  unbody(tk(t), 'body', 'result_body')
  redis.call('DEL', tk(t))
  redis.call('ZREM', P .. ':done', t)
  redis.call('ZREM', P .. ':all', t)
end
cnt('done', -#old)
return #old
`)
