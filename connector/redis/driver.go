package redis

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// driver is Redis' part of a sqlsink.Sink: rows are (key, field, value)
// triples of one Command.
type driver struct {
	opts    *goredis.Options
	url     string // redacted, for messages
	command Command
	prefix  string
	log     *slog.Logger
	// keepDead is whether rejected records are kept, in the hash
	// deadKeyName (default <prefix>dead:<job>).
	keepDead    bool
	deadKeyName string

	// mu guards the at-least-once writers' token: the attempt (its first
	// checkpoint id) that took it, and the token.
	mu         sync.Mutex
	tokenFirst int64
	token      int64
}

func (d *driver) deadKey(job string) string {
	if d.deadKeyName != "" {
		return d.deadKeyName
	}
	return d.prefix + "dead:" + job
}

// deadFields returns b's dead letters as hash fields and values.
func deadFields(b sqlsink.Batch) []any {
	var out []any
	for _, x := range b.Dead {
		v, _ := json.Marshal(deadValue{Key: text(x.Key), Value: text(x.Value), Error: x.Error, At: x.At.UTC(), Epoch: b.Epoch})
		out = append(out, x.Sink+"/"+x.ID, string(v))
	}
	return out
}

// deadValue is what the dead-letter hash keeps of a record.
type deadValue struct {
	Key   *string   `json:"key"`
	Value *string   `json:"value"`
	Error string    `json:"error"`
	At    time.Time `json:"rejected_at"`
	Epoch int64     `json:"epoch"`
}

// text is b as a JSON string: itself when it is UTF-8, else base64 with a
// "base64:" prefix; nil for nil.
func text(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	if !utf8.Valid(b) {
		s = "base64:" + base64.StdEncoding.EncodeToString(b)
	}
	return &s
}

var _ sqlsink.Driver = (*driver)(nil)

func (d *driver) Name() string { return "redis" }

// SetLogger is where the persistence warning goes (sqlsink.LoggerSetter).
func (d *driver) SetLogger(l *slog.Logger) { d.log = l }

// ownKey is whether key is, or could be, one of the keys the sink keeps
// for itself: a command on it could break a commit half way.
func (d *driver) ownKey(key string) bool {
	if d.deadKeyName != "" && key == d.deadKeyName {
		return true
	}
	for _, kind := range []string{"progress:", "epoch:", "attempt:", "stage:", "dead:"} {
		if strings.HasPrefix(key, d.prefix+kind) {
			return true
		}
	}
	return false
}

func (d *driver) progressKey(job string) string { return d.prefix + "progress:" + job }
func (d *driver) epochKey(job string) string    { return d.prefix + "epoch:" + job }
func (d *driver) attemptKey(job, uid string) string {
	return d.prefix + "attempt:" + job + ":" + uid
}
func (d *driver) stageKey(job string, fence int64) string {
	return d.prefix + "stage:" + job + ":" + strconv.FormatInt(fence, 10)
}

// stageTTL bounds how long the stage of an instance that died (or was
// fenced) before its commit stays in memory; a live instance's stage is
// refreshed by every write and dropped at every commit.
const stageTTL = 24 * time.Hour

func (d *driver) client() *goredis.Client { return goredis.NewClient(d.opts) }

// explain adds what to do to the errors users meet.
func (d *driver) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"), strings.Contains(msg, "i/o timeout"):
		return fmt.Errorf("%w (is the Redis server at %s running and reachable?)", err, d.url)
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%w (give the password in the URL: redis://user:password@host:port/db)", err)
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%w (the sink's user needs the commands it runs: EVALSHA/EVAL, RPUSH, HGETALL, HINCRBY, DEL, EXPIRE, and the record commands)", err)
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return fmt.Errorf("%w (a key the sink writes holds another type: command %s needs %s keys)", err, d.command, map[bool]string{true: "hash", false: "string"}[d.command.hash()])
	case strings.Contains(msg, "CROSSSLOT"), strings.HasPrefix(msg, "MOVED"):
		return fmt.Errorf("%w (Redis Cluster is not supported: the sink's scripts touch keys of several slots; use a single server or a primary with replicas)", err)
	}
	return err
}

// readRecord reads the job's progress hash: its record (or start mark)
// and fence.
func (d *driver) readRecord(ctx context.Context, c *goredis.Client, job string) (flow.CommitRecord, int64, error) {
	m, err := c.HGetAll(ctx, d.progressKey(job)).Result()
	if err != nil {
		return flow.CommitRecord{}, 0, fmt.Errorf("read the progress hash %s: %w", d.progressKey(job), d.explain(err))
	}
	fence, _ := strconv.ParseInt(m["fence"], 10, 64)
	cp, _ := strconv.ParseInt(m["checkpoint"], 10, 64)
	if cp <= 0 && m["state_id"] == "" {
		return flow.CommitRecord{}, fence, nil // no record, no start mark
	}
	ms, _ := strconv.ParseInt(m["time_ms"], 10, 64)
	return flow.CommitRecord{Job: job, Checkpoint: cp, Manifest: m["manifest"], Incarnation: m["incarnation"], StateID: m["state_id"], Time: time.UnixMilli(ms)}, fence, nil
}

// Peek reads the job's progress hash without fencing anyone.
func (d *driver) Peek(ctx context.Context, job string) (flow.CommitRecord, error) {
	c := d.client()
	defer c.Close()
	rec, _, err := d.readRecord(ctx, c, job)
	return rec, err
}

// Recover increments the fence of the job's progress hash: a commit
// applies nothing unless the fence is its own, and a script runs alone,
// so no earlier instance can commit afterwards. It drops the stages the
// previous instances left.
func (d *driver) Recover(ctx context.Context, job string) (flow.CommitRecord, sqlsink.TxConn, error) {
	c := d.client()
	fence, err := c.HIncrBy(ctx, d.progressKey(job), "fence", 1).Result()
	if err != nil {
		c.Close()
		return flow.CommitRecord{}, nil, fmt.Errorf("fence the earlier instances of job %q in %s: %w", job, d.progressKey(job), d.explain(err))
	}
	rec, _, err := d.readRecord(ctx, c, job)
	if err != nil {
		c.Close()
		return flow.CommitRecord{}, nil, err
	}
	if err := c.Del(ctx, d.stageKey(job, fence), d.stageKey(job, fence-1)).Err(); err != nil {
		c.Close()
		return flow.CommitRecord{}, nil, fmt.Errorf("drop the stage of the previous instance: %w", d.explain(err))
	}
	d.checkPersistence(ctx, c)
	c.Close()
	// The transaction's client never retries: go-redis sends a command
	// again when the connection drops after sending it, and a commit
	// script sent twice would apply its increments twice.
	o := *d.opts
	o.MaxRetries = -1
	return rec, &txConn{d: d, c: goredis.NewClient(&o), job: job, fence: fence, stage: d.stageKey(job, fence)}, nil
}

// checkPersistence warns when the server may lose acknowledged writes on a
// crash (see the package doc). Servers that hide CONFIG are not checked.
func (d *driver) checkPersistence(ctx context.Context, c *goredis.Client) {
	if d.log == nil {
		return
	}
	m, err := c.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return
	}
	if m["appendonly"] != "yes" || m["appendfsync"] != "always" {
		d.log.Warn("the Redis server can lose acknowledged writes when it crashes: run it with appendonly yes and appendfsync always for exactly-once across a crash of Redis (a lost commit makes the job refuse to start until you choose a checkpoint)",
			"appendonly", m["appendonly"], "appendfsync", m["appendfsync"], "server", d.url)
	}
}

// OpenUpsert opens an at-least-once writer's client. The first writer of
// an attempt (first, the attempt's first checkpoint id, names it) takes
// a new token, which fences the writers of every attempt before it.
func (d *driver) OpenUpsert(ctx context.Context, job, uid string, first int64) (sqlsink.UpsertConn, error) {
	c := d.client()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect: %w", d.explain(err))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.token == 0 || d.tokenFirst != first {
		key := d.attemptKey(job, uid)
		t, err := takeTokenScript.Run(ctx, c, []string{key, d.epochKey(job)}).Int64()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("take a token in %s: %w", key, d.explain(err))
		}
		d.tokenFirst, d.token = first, t
	}
	return &upsertConn{d: d, c: c, job: job, uid: uid, token: d.token}, nil
}

// attemptFenced is the error of an at-least-once writer whose token was
// replaced: restarting would replace the other's in turn, so the job
// stops.
func (d *driver) attemptFenced(job, uid string, err error) error {
	return flow.Unrecoverable(fmt.Errorf("%w: another instance of job %q took over the Redis sink %s (the key %s): two instances of the job run at once, stop one", err, job, uid, d.attemptKey(job, uid)))
}

// fencedErr turns the scripts' refusal of a fenced instance into an error
// wrapping sqlsink.ErrFenced; nil for other errors.
func fencedErr(err error) error {
	msg, ok := strings.CutPrefix(err.Error(), "ONCEFLOW_FENCED ")
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %s", sqlsink.ErrFenced, msg)
}

// The commands travel to the scripts packed: a blob is a MessagePack
// array of strings, (key, field, value) for each of up to blobCommands
// commands, which the scripts unpack with Redis' bundled cmsgpack. A
// retraction's value is false (not a string): DEL of the key, HDEL of
// the field. The commands of one blob have distinct keys (fields). One
// argument per thousand commands instead of three per command is less for
// the server to parse and for Lua to hold.

// commitScript applies the stage, then the commands in ARGV, keeps the
// dead letters and records the checkpoint, under the fence. KEYS:
// progress hash, stage, dead-letter hash. ARGV: fence, command,
// checkpoint, manifest, incarnation, state id, time (ms), the number of
// dead letters, the stage's expected length (in blobs), the dead letters'
// (field, value) pairs, then blobs.
//
// Redis does not undo the writes of a script that fails half way, and a
// commit must apply all of its commands or none. HSET is checked key by
// key before anything is written. Counters are not: each INCRBY (HINCRBY)
// runs under pcall, and when one fails (a key of another type, a value
// that is not an integer, an overflow) the increments already applied are
// taken back, newest first, before the script returns. No other client
// runs while a script does, so nobody sees them. Checking first cost a
// TYPE and a GET per counter, three calls where the compensation costs
// one. The one thing a taken-back increment cannot restore is whether a
// counter that ends at 0 existed: it is deleted, which INCRBY and HINCRBY
// read the same as 0.
var commitScript = goredis.NewScript(`
local fence = redis.call('HGET', KEYS[1], 'fence')
if fence ~= ARGV[1] then
  return redis.error_reply('ONCEFLOW_FENCED the progress hash has fence ' .. tostring(fence) .. ', this instance ' .. ARGV[1])
end
local cmd = ARGV[2]
` + checkLua + `
local n = redis.call('LLEN', KEYS[2])
if n ~= tonumber(ARGV[9]) then
  return redis.error_reply('ONCEFLOW_STAGE the stage ' .. KEYS[2] .. ' holds ' .. n .. ' elements, and this instance staged ' .. ARGV[9] .. ' (did it expire?)')
end
local dead = tonumber(ARGV[8])
local from = 10 + 2 * dead
-- blob is the i-th blob (from 0), unpacked: the stage's, then ARGV's.
-- The stage is read a window of 64 blobs at a time. A blob that does not
-- unpack gives nil and why.
local blobs = n + #ARGV - from + 1
local winFrom, win = -1, {}
local function blob(i)
  local raw
  if i < n then
    if i < winFrom or i >= winFrom + #win then
      winFrom = i - i % 64
      win = redis.call('LRANGE', KEYS[2], winFrom, winFrom + 63)
    end
    raw = win[i - winFrom + 1]
  else
    raw = ARGV[from + i - n]
  end
  local ok, c = pcall(cmsgpack.unpack, raw)
  if not ok or type(c) ~= 'table' then
    return nil, 'element ' .. i .. ' of the commit (the stage ' .. KEYS[2] .. ' holds ' .. n .. ') is damaged: ' .. tostring(c)
  end
  return c
end
local bad = nil
if dead > 0 then bad = wrong(KEYS[3], 'hash', 'HSETNX') end
if not bad and cmd == 'hset' then
  for i = 0, blobs - 1 do
    if bad then break end
    local c, e = blob(i)
    if not c then return redis.error_reply('ONCEFLOW_DAMAGED ' .. e) end
    bad = check(c)
  end
end
if bad then return redis.error_reply('ONCEFLOW_BADKEY ' .. bad) end
-- apply runs the commands of c. On a counter that fails it returns the
-- server's error and where.
local function apply(c)
  if cmd == 'set' then
    local kvs = {}
    for j = 1, #c, 3 do
      if c[j+2] == false then redis.call('DEL', c[j])
      else
        kvs[#kvs + 1] = c[j]
        kvs[#kvs + 1] = c[j+2]
      end
    end
    if #kvs > 0 then redis.call('MSET', unpack(kvs)) end
    return
  end
  for j = 1, #c, 3 do
    if cmd == 'hset' then
      if c[j+2] == false then redis.call('HDEL', c[j], c[j+1])
      else redis.call('HSET', c[j], c[j+1], c[j+2]) end
    else
      local r
      if cmd == 'incrby' then r = redis.pcall('INCRBY', c[j], c[j+2])
      else r = redis.pcall('HINCRBY', c[j], c[j+1], c[j+2]) end
      if type(r) == 'table' and r.err then return r.err, j end
    end
  end
end
-- fail takes back what blobs 0 to i applied (of blob i, the commands
-- before index at) and returns the error reply.
local function fail(i, c, at, reply)
  takeBack(c, at - 3)
  for k = i - 1, 0, -1 do
    local prev = blob(k)
    takeBack(prev, #prev - 2)
  end
  return redis.error_reply(reply)
end
for i = 0, blobs - 1 do
  local c, e = blob(i)
  if not c then return fail(i, {}, 1, 'ONCEFLOW_DAMAGED ' .. e) end
  local err, at = apply(c)
  if err then
    local why = counterError(c[at], c[at+1], err)
    -- Errors of the server (OOM, READONLY, an ACL refusal, ...) are not
    -- the key's: they go back as they are, for the job to retry.
    if why then return fail(i, c, at, 'ONCEFLOW_BADKEY ' .. why) end
    return fail(i, c, at, err)
  end
end
if n > 0 then redis.call('DEL', KEYS[2]) end
for j = 10, 9 + 2 * dead, 2 do redis.call('HSETNX', KEYS[3], ARGV[j], ARGV[j+1]) end
redis.call('HSET', KEYS[1], 'checkpoint', ARGV[3], 'manifest', ARGV[4], 'incarnation', ARGV[5], 'state_id', ARGV[6], 'time_ms', ARGV[7])
return blobs
`)

// checkLua defines, for the scripts, wrong (a key of another type than a
// command needs), check (the first of the HSETs in an unpacked blob whose
// key is not a hash), counterError and takeBack. cmd is the sink's
// command.
const checkLua = `
local function wrong(k, want, name)
  local t = redis.call('TYPE', k).ok
  if t ~= 'none' and t ~= want then
    return 'key ' .. k .. ' holds a ' .. t .. ', and ' .. name .. ' needs a ' .. want
  end
end
local function check(c)
  if cmd ~= 'hset' then return nil end
  for j = 1, #c, 3 do
    local e = wrong(c[j], 'hash', 'HSET')
    if e then return e end
  end
end
-- counterError says why an increment of key k (field f) failed with the
-- server's error e, when the key is to blame; nil for other errors.
local function counterError(k, f, e)
  local what = 'key ' .. k
  if cmd == 'hincrby' then what = 'field ' .. f .. ' of key ' .. k end
  if string.find(e, 'WRONGTYPE', 1, true) then
    if cmd == 'hincrby' then return wrong(k, 'hash', 'HINCRBY') or e end
    return wrong(k, 'string', 'INCRBY') or e
  end
  if string.find(e, 'would overflow', 1, true) then
    return 'counter ' .. what .. ' would overflow a 64-bit integer'
  end
  if string.find(e, 'not an integer', 1, true) then
    return what .. ' holds a value that is not an integer, and ' .. string.upper(cmd) .. ' needs one'
  end
end
-- takeBack undoes the increments of c up to index last, newest first; a
-- counter taken back to 0 is deleted.
local function takeBack(c, last)
  for j = last, 1, -3 do
    local k, f, by = c[j], c[j+1], c[j+2]
    local steps
    if by == '-9223372036854775808' then steps = {'4611686018427387904', '4611686018427387904'}
    elseif by == '0' then steps = {'0'}
    elseif string.sub(by, 1, 1) == '-' then steps = {string.sub(by, 2)}
    else steps = {'-' .. by} end
    local r = 0
    for _, s in ipairs(steps) do
      if cmd == 'incrby' then r = redis.call('INCRBY', k, s) else r = redis.call('HINCRBY', k, f, s) end
    end
    if r == 0 then
      if cmd == 'incrby' then redis.call('DEL', k) else redis.call('HDEL', k, f) end
    end
  end
end
`

// The at-least-once fence is per attempt of the job, not per key: the
// key onceflow:attempt:<job>:<sink uid> holds a token that the first
// writer of each attempt takes with INCR, and the writers of the attempt
// write only while the key still holds their token. A later attempt (a
// restart, another process) takes a new one, and the writers of the
// attempts before it are fenced. Tokens come from Redis, not from
// checkpoint ids: ids start again at 1 when a job's checkpoints are
// moved aside (onceflow offsets reset) or deleted, and an attempt that
// took no checkpoint shares its first id with the next.
// Before the attempt key, each key's epoch was kept in a hash beside
// it (onceflow:epoch:<job>): a write more per command, which cost as much
// server time as the values. Taking a token drops that hash.

// takeTokenScript takes a new token for an attempt. KEYS: the attempt
// key, the hash of per-key epochs older versions kept.
var takeTokenScript = goredis.NewScript(`
redis.call('UNLINK', KEYS[2])
return redis.call('INCR', KEYS[1])
`)

// upsertScript applies a batch if the attempt key holds the writer's
// token (taking the key when it is missing: deleted by hand). KEYS: the
// attempt key. ARGV: the token, command, then blobs; the SETs of a blob
// go in one MSET.
var upsertScript = goredis.NewScript(`
local t = redis.call('GET', KEYS[1])
if t and t ~= ARGV[1] then
  return redis.error_reply('ONCEFLOW_FENCED the attempt key holds token ' .. t .. ', this writer\'s is ' .. ARGV[1])
end
local cmd = ARGV[2]
local hash = cmd == 'hset'
` + checkLua + `
local cs = {}
for i = 3, #ARGV do
  cs[#cs + 1] = cmsgpack.unpack(ARGV[i])
  local bad = check(cs[#cs])
  if bad then return redis.error_reply('ONCEFLOW_BADKEY ' .. bad) end
end
if not t then redis.call('SET', KEYS[1], ARGV[1]) end
local n = 0
for _, c in ipairs(cs) do
  if hash then
    for j = 1, #c, 3 do
      if c[j+2] == false then redis.call('HDEL', c[j], c[j+1])
      else redis.call('HSET', c[j], c[j+1], c[j+2]) end
    end
  else
    local kvs = {}
    for j = 1, #c, 3 do
      if c[j+2] == false then redis.call('DEL', c[j])
      else
        kvs[#kvs + 1] = c[j]
        kvs[#kvs + 1] = c[j+2]
      end
    end
    if #kvs > 0 then redis.call('MSET', unpack(kvs)) end
  end
  n = n + #c / 3
end
return n
`)

// txConn gathers an instance's commands between commits and applies them
// with its progress in one script. Within a commit only the end state is
// visible, so the commands are merged as they come: the last value of a
// key (or hash field) for SET and HSET, the sum of the increments for the
// counters. When more than maxMerged keys are pending the merged commands
// move to the stage, a list in Redis that the script applies first.
type txConn struct {
	d     *driver
	c     *goredis.Client
	job   string
	fence int64
	stage string
	// merged holds the pending commands, idx where each key (and field)
	// is in it; staged is whether the stage holds commands.
	merged []merged
	idx    map[string]int
	staged bool
	// dead holds the pending dead letters as hash fields and values.
	dead []any
	// multi is the connection of the open MULTI that SETs stream into,
	// nil when none is open.
	multi *goredis.Conn
	// stagedLen is how many blobs the stage holds: the commit checks
	// it, so a stage that expired (or was written twice) fails the
	// commit instead of losing (or doubling) commands.
	stagedLen int
}

// Fence is the fence Recover took (sqlsink.Fencer).
func (c *txConn) Fence() int64 { return c.fence }

type merged struct {
	key, field, value string
	by                int64
	// del: the last command of the key (field) is a retraction's DEL
	// (HDEL).
	del bool
}

// maxMerged bounds the keys a txConn merges in memory (about 100 bytes
// each) before it stages them in Redis; a variable for the tests.
var maxMerged = 100_000

// Write merges b's rows into the pending commands.
func (t *txConn) Write(ctx context.Context, b sqlsink.Batch) error {
	t.dead = append(t.dead, deadFields(b)...)
	if t.idx == nil {
		t.idx = make(map[string]int)
	}
	counter := t.d.command.Counter()
	for ri, r := range b.Rows {
		key, field, value := r[0].(string), r[1].(string), r[2].(string)
		del := b.Retract != nil && b.Retract[ri]
		id := key
		if t.d.command.hash() {
			id = key + "\x00" + field
		}
		i, ok := t.idx[id]
		if !ok {
			i = len(t.merged)
			t.idx[id] = i
			t.merged = append(t.merged, merged{key: key, field: field})
		}
		if counter {
			n, _ := strconv.ParseInt(value, 10, 64) // formatted by the sink
			if del {
				// A retraction takes its row's increment back.
				if n == math.MinInt64 {
					return flow.Unrecoverable(fmt.Errorf("the retraction of an increment of %s by %d cannot be taken back within a 64-bit integer", key, n))
				}
				n = -n
			}
			sum := t.merged[i].by + n
			if (n > 0 && sum < t.merged[i].by) || (n < 0 && sum > t.merged[i].by) {
				return flow.Unrecoverable(fmt.Errorf("the increments of %s in one checkpoint overflow a 64-bit integer", key))
			}
			t.merged[i].by = sum
		} else {
			t.merged[i].value, t.merged[i].del = value, del
		}
	}
	switch {
	case t.d.command == CommandSet && len(t.merged) >= streamMerged:
		return t.stream(ctx)
	case len(t.merged) >= maxMerged:
		return t.stageMerged(ctx)
	}
	return nil
}

// streamMerged is how many keys a SET sink merges before it sends them
// into the open MULTI: the server queues them while the job goes on, so
// that a large checkpoint is not sent all at its commit. It is above the
// key counts jobs usually update again and again within a checkpoint,
// whose merging it would undo (a variable for the tests).
var streamMerged = 50_000

// beginMulti opens the transaction SETs stream into: WATCH the progress
// and dead-letter hashes, check the fence and the dead-letter hash's
// type, MULTI. A Recover after the WATCH changes the progress hash, and
// the EXEC then applies nothing.
func (t *txConn) beginMulti(ctx context.Context) error {
	if t.multi != nil {
		return nil
	}
	// Closing an ephemeral connection discards it: one left in MULTI or
	// WATCH must not serve another command.
	conn := t.c.EphemeralConn()
	progress, dead := t.d.progressKey(t.job), t.d.deadKey(t.job)
	err := conn.Do(ctx, "WATCH", progress, dead).Err()
	var f int64
	if err == nil {
		f, err = conn.HGet(ctx, progress, "fence").Int64()
	}
	var typ string
	if err == nil {
		typ, err = conn.Type(ctx, dead).Result()
	}
	if err == nil && f != t.fence {
		err = fmt.Errorf("%w: the progress hash has fence %d, this instance %d", sqlsink.ErrFenced, f, t.fence)
	}
	if err == nil && typ != "none" && typ != "hash" {
		err = flow.Unrecoverable(fmt.Errorf("key %s holds a %s, and the dead letters need a hash: delete or rename the key", dead, typ))
	}
	if err == nil {
		err = conn.Do(ctx, "MULTI").Err()
	}
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("open the transaction: %w", t.d.explain(err))
	}
	t.multi = conn
	return nil
}

// stream sends the merged SETs into the open MULTI.
func (t *txConn) stream(ctx context.Context) error {
	if err := t.beginMulti(ctx); err != nil {
		return err
	}
	if len(t.merged) > 0 {
		_, err := t.multi.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, m := range t.merged {
				if m.del {
					p.Do(ctx, "DEL", m.key)
				} else {
					p.Do(ctx, "SET", m.key, m.value)
				}
			}
			return nil
		})
		if err != nil {
			t.closeMulti()
			return fmt.Errorf("send %d SETs into the transaction: %w", len(t.merged), t.d.explain(err))
		}
	}
	t.merged = t.merged[:0]
	clear(t.idx)
	return nil
}

// closeMulti drops the open MULTI: its connection is discarded, and the
// server discards the transaction with it.
func (t *txConn) closeMulti() {
	if t.multi != nil {
		_ = t.multi.Close()
		t.multi = nil
	}
}

// blobCommands is how many commands a blob holds at most, and blobBytes
// about how many bytes: a blob is one argument, and a server refuses
// arguments beyond proto-max-bulk-len (512 MB by default, often set
// lower). Within the scripts a blob's commands go to MSET and HSET through
// Lua's unpack, which takes at most 7999 values: 2 per command.
const (
	blobCommands = 1000
	blobBytes    = 4 << 20
)

// blobs appends to a the commands of ms packed as blobs (see
// commitScript); counter sends the sums.
func blobs(a []any, ms []merged, counter bool) []any {
	var body []byte
	n := 0
	flush := func() {
		b := msgpackArray(make([]byte, 0, 5+len(body)), 3*n)
		a = append(a, append(b, body...))
		body, n = body[:0], 0
	}
	var num [20]byte
	for _, m := range ms {
		body = msgpackString(body, m.key)
		body = msgpackString(body, m.field)
		switch {
		case counter:
			body = msgpackString(body, strconv.AppendInt(num[:0], m.by, 10))
		case m.del:
			body = append(body, 0xc2) // false
		default:
			body = msgpackString(body, m.value)
		}
		if n++; n == blobCommands || len(body) >= blobBytes {
			flush()
		}
	}
	if n > 0 {
		flush()
	}
	return a
}

// msgpackArray appends the header of a MessagePack array of n elements.
func msgpackArray(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

// msgpackString appends s as a MessagePack string.
func msgpackString[T string | []byte](b []byte, s T) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// stageMerged moves the merged commands to the stage.
func (t *txConn) stageMerged(ctx context.Context) error {
	p := t.c.Pipeline()
	packed := blobs(nil, t.merged, t.d.command.Counter())
	p.RPush(ctx, t.stage, packed...)
	p.Expire(ctx, t.stage, stageTTL)
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("stage %d commands in %s: %w", len(t.merged), t.stage, t.d.explain(err))
	}
	t.stagedLen += len(packed)
	t.merged, t.staged = t.merged[:0], true
	clear(t.idx)
	return nil
}

// Commit applies the stage and the merged commands and records rec
// atomically, under the fence. SETs that were not staged (most
// checkpoints of a SET sink) go in one MULTI/EXEC that WATCHes the
// progress hash, which Redis runs faster than a script's calls: a SET
// cannot fail once queued, and a Recover between the WATCH and the EXEC
// changes the hash, so the EXEC applies nothing. Everything else goes
// through commitScript, which applies all of the commit or nothing.
func (t *txConn) Commit(ctx context.Context, rec flow.CommitRecord) error {
	if rec.Checkpoint == 0 {
		// A start mark (flow.StartMarker), not a checkpoint's commit.
	} else if err := failpoint.Inject(failpoint.BeforeDBCommit); err != nil {
		return err
	}
	var err error
	if t.staged || t.d.command != CommandSet {
		a := append([]any{t.fence, string(t.d.command), rec.Checkpoint, rec.Manifest, rec.Incarnation, rec.StateID, rec.Time.UnixMilli(), len(t.dead) / 2, t.stagedLen}, t.dead...)
		err = commitScript.Run(ctx, t.c, []string{t.d.progressKey(t.job), t.stage, t.d.deadKey(t.job)}, blobs(a, t.merged, t.d.command.Counter())...).Err()
	} else {
		err = t.exec(ctx, rec)
	}
	t.merged, t.staged, t.dead, t.stagedLen = t.merged[:0], false, nil, 0
	clear(t.idx)
	if err != nil {
		if errors.Is(err, sqlsink.ErrFenced) {
			return err
		}
		if f := fencedErr(err); f != nil {
			return f
		}
		if bad := badKey(err); bad != nil {
			return bad
		}
		// A broken connection leaves the outcome unknown; Recover reads it
		// from the progress hash.
		return fmt.Errorf("commit: %w", t.d.explain(err))
	}
	return nil
}

// exec commits the SETs in the open MULTI (opening it if none is) with
// the dead letters and the record.
func (t *txConn) exec(ctx context.Context, rec flow.CommitRecord) error {
	if err := t.stream(ctx); err != nil {
		return err
	}
	progress := t.d.progressKey(t.job)
	_, err := t.multi.Pipelined(ctx, func(p goredis.Pipeliner) error {
		// Inside MULTI every reply is QUEUED: generic commands read it.
		for i := 0; i < len(t.dead); i += 2 {
			p.Do(ctx, "HSETNX", t.d.deadKey(t.job), t.dead[i], t.dead[i+1])
		}
		p.Do(ctx, "HSET", progress, "checkpoint", rec.Checkpoint, "manifest", rec.Manifest, "incarnation", rec.Incarnation, "state_id", rec.StateID, "time_ms", rec.Time.UnixMilli())
		return nil
	})
	if err == nil {
		err = t.multi.Do(ctx, "EXEC").Err()
	}
	conn := t.multi
	t.multi = nil
	if errors.Is(err, goredis.Nil) {
		// The watched hashes changed: nothing was applied.
		_ = conn.Close()
		return fmt.Errorf("%w: the progress hash changed while the transaction was open (a newer instance recovered)", sqlsink.ErrFenced)
	}
	if err != nil {
		_ = conn.Close()
		return err
	}
	return conn.Close()
}

// Rollback drops the pending commands, the open MULTI and the stage.
func (t *txConn) Rollback() {
	t.closeMulti()
	t.merged, t.dead = t.merged[:0], nil
	clear(t.idx)
	if t.staged {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = t.c.Del(ctx, t.stage).Err()
		t.staged, t.stagedLen = false, 0
	}
}

func (t *txConn) Close() error {
	t.closeMulti()
	return t.c.Close()
}

// upsertConn is an at-least-once writer's client; token is its attempt's.
type upsertConn struct {
	d     *driver
	c     *goredis.Client
	job   string
	uid   string
	token int64
}

// Upsert applies b unless a later attempt of the job took the attempt
// key; of the rows of one key (and field) only the last is sent, a
// retraction as a DEL (HDEL).
func (u *upsertConn) Upsert(ctx context.Context, b sqlsink.Batch) error {
	last := make(map[string]int, len(b.Rows))
	for i, r := range b.Rows {
		last[r[0].(string)+"\x00"+r[1].(string)] = i
	}
	ms := make([]merged, 0, len(last))
	for i, r := range b.Rows {
		if last[r[0].(string)+"\x00"+r[1].(string)] == i {
			ms = append(ms, merged{key: r[0].(string), field: r[1].(string), value: r[2].(string), del: b.Retract != nil && b.Retract[i]})
		}
	}
	a := blobs([]any{u.token, string(u.d.command)}, ms, false)
	if len(a) > 2 {
		if err := upsertScript.Run(ctx, u.c, []string{u.d.attemptKey(u.job, u.uid)}, a...).Err(); err != nil {
			if f := fencedErr(err); f != nil {
				return u.d.attemptFenced(u.job, u.uid, f)
			}
			if bad := badKey(err); bad != nil {
				return bad
			}
			return fmt.Errorf("write %d commands: %w", len(b.Rows), u.d.explain(err))
		}
	}
	if dead := deadFields(b); len(dead) > 0 {
		p := u.c.Pipeline()
		for i := 0; i < len(dead); i += 2 {
			p.HSetNX(ctx, u.d.deadKey(u.job), dead[i].(string), dead[i+1])
		}
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("keep %d dead letters in %s: %w", len(b.Dead), u.d.deadKey(u.job), u.d.explain(err))
		}
	}
	return nil
}

func (u *upsertConn) Close() error { return u.c.Close() }

// badKey turns the scripts' refusal of a key that holds the wrong type
// into an error restarting cannot fix (nothing was written); nil for
// other errors.
func badKey(err error) error {
	msg, ok := strings.CutPrefix(err.Error(), "ONCEFLOW_BADKEY ")
	if !ok {
		return nil
	}
	return flow.Unrecoverable(fmt.Errorf("nothing of the commit was written: %s; delete or rename the key, or give the sink a key prefix of its own", msg))
}
