package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// Every write that must be atomic runs as one Lua script on the keys of one
// slot: the keys of an episode, or the index keys. Times are time keys
// (see keys.go) compared as strings; ver is a per-episode version of the
// fields the index copies, taken from the server clock in microseconds so
// that it also grows across a delete and re-creation of the episode.

// luaBump sets and returns the next ver of the episode hash KEYS[1].
const luaBump = `
local function bump()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v = tonumber(redis.call('HGET', KEYS[1], 'ver') or '0')
  if now <= v then now = v + 1 end
  redis.call('HSET', KEYS[1], 'ver', now)
  return now
end
local function ensure(nonce)
  local inc = redis.call('HGET', KEYS[1], 'inc')
  if inc then return inc, false end
  redis.call('HSET', KEYS[1], 'inc', nonce)
  return nonce, true
end
`

// writeCalls appends call frames to an episode, all or nothing.
// KEYS: ep, log, ids. ARGV: expected incarnation ("" when the writer knows
// none), the log length its dedup state was built on (0 for none) and the
// SHA-1 of the frame then last, a fresh incarnation nonce, then (call id,
// started time key, frame) triples. It refuses ("stale", writing nothing)
// when the writer's view is out of date: the incarnation changed (the
// episode was deleted or expired and re-created), the frame it last saw is
// no longer where it was (the log expired, or Redis lost writes: a restart
// from an older snapshot, a failover to a lagging replica), it knows no
// incarnation but calls are stored (it must observe them first or it
// would store their history again), or a call is already stored.
// Otherwise it returns {"ok", incarnation, ver, first, meta, log length}.
var scriptWrite = newScript(luaBump + `
local cur = redis.call('HGET', KEYS[1], 'inc')
local n = redis.call('LLEN', KEYS[2])
if ARGV[1] == '' then
  if n > 0 then return {'stale'} end
elseif cur ~= ARGV[1] then
  return {'stale'}
end
local pos = tonumber(ARGV[2])
if pos > 0 then
  local f = redis.call('LINDEX', KEYS[2], pos - 1)
  if not f or redis.sha1hex(f) ~= ARGV[3] then return {'stale'} end
end
for i = 5, #ARGV, 3 do
  if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 1 then return {'stale'} end
end
local ttl = redis.call('PTTL', KEYS[1])
local inc, changed = ensure(ARGV[4])
local first = redis.call('HGET', KEYS[1], 'first')
local last = redis.call('HGET', KEYS[1], 'last')
for i = 5, #ARGV, 3 do
  redis.call('SADD', KEYS[3], ARGV[i])
  n = redis.call('RPUSH', KEYS[2], ARGV[i+2])
  local s = ARGV[i+1]
  if not first or s < first then first = s; changed = true end
  if not last or s > last then last = s end
end
redis.call('HSET', KEYS[1], 'first', first, 'last', last)
local ver
if changed then ver = bump() else ver = tonumber(redis.call('HGET', KEYS[1], 'ver')) end
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return {'ok', inc, ver, first, redis.call('HGET', KEYS[1], 'meta') or '', n}
`)

// putEpisode stores an episode's metadata and arms or clears its expiry.
// KEYS: ep, log, ids, events. ARGV: metadata JSON, incarnation nonce,
// expiry in ms (0: persist). Returns {ver, first}.
var scriptPutEpisode = newScript(luaBump + luaPutEpisode)

// createEpisode is putEpisode for an episode whose hash does not exist
// (no metadata, calls or events); for one that does it writes nothing and
// returns nil.
var scriptCreateEpisode = newScript(luaBump + `
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
` + luaPutEpisode)

const luaPutEpisode = `
ensure(ARGV[2])
redis.call('HSET', KEYS[1], 'meta', ARGV[1])
local ver = bump()
local ms = tonumber(ARGV[3])
for i = 1, #KEYS do
  if ms > 0 then redis.call('PEXPIRE', KEYS[i], ms) else redis.call('PERSIST', KEYS[i]) end
end
return {ver, redis.call('HGET', KEYS[1], 'first') or ''}
`

// appendEvent appends an event. KEYS: ep, events. ARGV: event JSON,
// incarnation nonce. Returns {seq, ver, first, meta}.
var scriptAppendEvent = newScript(luaBump + `
local _, created = ensure(ARGV[2])
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
local ver
if created then ver = bump() else ver = tonumber(redis.call('HGET', KEYS[1], 'ver')) end
return {n, ver, redis.call('HGET', KEYS[1], 'first') or '', redis.call('HGET', KEYS[1], 'meta') or ''}
`)

// indexPut replaces an episode's index entry if it is still the one the
// caller read (compare-and-set) and older than the new one.
// KEYS: entries, all, finished, then nNew filter sets of the new entry,
// then the filter sets of the old one. ARGV: id, old entry JSON ("" for
// none), new entry JSON, new member, new ver, finished ms ("" when not
// finished), nNew. Returns 1 when stored, 0 when the stored entry is as
// new, -1 when it changed since the caller read it.
var scriptIndexPut = newScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if cur ~= ARGV[2] then return -1 end
local nNew = tonumber(ARGV[7])
if cur ~= '' then
  local o = cjson.decode(cur)
  if o.v >= tonumber(ARGV[5]) then return 0 end
  redis.call('ZREM', KEYS[2], o.m)
  for i = 4 + nNew, #KEYS do redis.call('ZREM', KEYS[i], o.m) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[4])
for i = 4, 3 + nNew do redis.call('ZADD', KEYS[i], 0, ARGV[4]) end
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1]) else redis.call('ZREM', KEYS[3], ARGV[1]) end
return 1
`)

// indexDel removes an episode's index entry if it is still the one the
// caller read. KEYS: entries, all, finished, the entry's filter sets.
// ARGV: id, entry JSON. Returns 1 when removed.
var scriptIndexDel = newScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur ~= ARGV[2] then return 0 end
local o = cjson.decode(cur)
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], o.m) end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`)

// indexScan walks one index set in member order from a ZRANGEBYLEX start
// and returns the members whose entry is current and matches the filters.
// KEYS: set, entries. ARGV: start, task, group, status, how many to return,
// how many members to look at at most. Returns {resume, members...} where
// resume is the start of the next scan, "" when the set is exhausted.
var scriptIndexScan = newScript(`
local out = {}
local start, want, budget = ARGV[1], tonumber(ARGV[5]), tonumber(ARGV[6])
while budget > 0 do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, math.min(budget, 256))
  if #ms == 0 then start = ''; break end
  for _, m in ipairs(ms) do
    budget = budget - 1
    start = '(' .. m
    local e = redis.call('HGET', KEYS[2], string.sub(m, 22))
    if e then
      local o = cjson.decode(e)
      if o.m == m and (ARGV[2] == '' or o.t == ARGV[2]) and (ARGV[3] == '' or o.g == ARGV[3]) and (ARGV[4] == '' or o.s == ARGV[4]) then
        out[#out + 1] = m
        if #out >= want then return {start, unpack(out)} end
      end
    end
  end
end
return {start, unpack(out)}
`)

// script is Lua source with its SHA-1, run with EVALSHA and, when the
// server has not cached it (a restarted server, a new cluster node), EVAL.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// call is one script invocation in a pipeline.
type call struct {
	sc   *script
	keys []string
	args []any
	cmd  *redis.Cmd
}

// runPipeline sends calls and the commands extra adds in one pipeline (one
// round trip per node), then sends again, with EVAL, every call the server
// answered NOSCRIPT. It returns nothing: each call's result is in call.cmd
// and callers check every command they queued, since one command of a
// pipeline can fail while the others succeed.
func runPipeline(ctx context.Context, c redis.UniversalClient, calls []*call, extra func(redis.Pipeliner)) {
	p := c.Pipeline()
	for _, cl := range calls {
		cl.cmd = p.EvalSha(ctx, cl.sc.sha, cl.keys, cl.args...)
	}
	if extra != nil {
		extra(p)
	}
	p.Exec(ctx) // errors are per command
	var retry []*call
	for _, cl := range calls {
		if err := cl.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, cl)
		}
	}
	if len(retry) == 0 {
		return
	}
	p = c.Pipeline()
	for _, cl := range retry {
		cl.cmd = p.Eval(ctx, cl.sc.src, cl.keys, cl.args...)
	}
	p.Exec(ctx)
}

// run runs one script.
func run(ctx context.Context, c redis.UniversalClient, sc *script, keys []string, args ...any) *redis.Cmd {
	cl := &call{sc: sc, keys: keys, args: args}
	runPipeline(ctx, c, []*call{cl}, nil)
	return cl.cmd
}
