package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// redisStats is a script that returns, for the values of the keys
// matching ARGV[1] (strings, or with ARGV[2] = "hash" the fields of
// hashes), how many there are and the least and greatest.
const redisStats = `local vals = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if ARGV[2] == 'hash' then
    for _, v in ipairs(redis.call('HVALS', k)) do table.insert(vals, v) end
  else table.insert(vals, redis.call('GET', k)) end
end
local mn, mx
for _, v in ipairs(vals) do
  local n = tonumber(v)
  if not mn or n < mn then mn = n end
  if not mx or n > mx then mx = n end
end
return {#vals, mn or 0, mx or 0}`

// TestCrashKafkaToRedis: `onceflow run` from Kafka into Redis, SIGKILLed
// at random moments. redis-cli, Redis' own client, then finds each key's
// count exactly: INCRBY by one per input record (Redis is the commit point:
// a single duplicate or loss changes a total), HSET of a count job's
// counts, and at-least-once SETs of them, fenced per attempt.
func TestCrashKafkaToRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	url, srv, db := dbtest.Redis(t)
	t.Setenv("E2E_REDIS_URL", url)
	perKey := records / e2eKeys
	want := fmt.Sprintf("%d|%d|%d", e2eKeys, perKey, perKey)
	runDBCrashes(t, records, kills, []dbCase{
		{name: "rd-incr", sink: `  redis:
    url: ${E2E_REDIS_URL}
    command: incrby
    key: record.key
    key-prefix: "c:"`, query: "c:*", want: want},
		{name: "rd-count", pipeline: countPipeline, sink: `  redis:
    url: ${E2E_REDIS_URL}
    command: hset
    key: record.key
    key-prefix: "h:"
    field: record.key
    value: record.value`, query: "h:* hash", want: want},
		{name: "rd-fenced", pipeline: countPipeline, sink: `  redis:
    url: ${E2E_REDIS_URL}
    command: set
    key: record.key
    key-prefix: "n:"
    value: record.value
  delivery: at-least-once`, query: "n:*", want: want},
	}, func(q string) (string, error) {
		args := append([]string{"EVAL", redisStats, "0"}, strings.Fields(q)...)
		out, err := srv.Client(db, args...)
		return strings.ReplaceAll(out, "\n", "|"), err
	})
	if stages, _ := srv.Client(db, "KEYS", "onceflow:stage:*"); stages != "" {
		t.Errorf("stages left behind after the jobs ended: %q", stages)
	}
}
