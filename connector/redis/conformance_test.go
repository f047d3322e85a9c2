package redis_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// conformance is the sink conformance suite's harness of the Redis sink:
// HSET counts <key> <n>, read with redis-cli. Redis cannot prepare a
// transaction, so the suite's two-phase subtests do not run (redis.Spec).
func conformance() sinktest.Harness {
	type server struct {
		srv *dbtest.RedisServer
		db  int
	}
	// By URL, for the readers; a sync.Map: the crash subtests run in
	// parallel.
	var servers sync.Map
	cli := func(t *testing.T, url string, args ...string) string {
		t.Helper()
		v, _ := servers.Load(url)
		s := v.(server)
		out, err := s.srv.Client(s.db, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return sinktest.Harness{
		Spec: redis.Spec,
		Server: func(t *testing.T, _ bool) string {
			url, srv, db := dbtest.Redis(t)
			servers.Store(url, server{srv, db})
			return url
		},
		NewSink: func(url string, c sinktest.Config) (flow.Sink[dbtest.Count], error) {
			return redis.NewSink(conformanceConfig(url, c))
		},
		Rows: func(t *testing.T, url string) []sinktest.Row {
			var rows []sinktest.Row
			lines := strings.Split(cli(t, url, "HGETALL", "counts"), "\n")
			for i := 0; i+1 < len(lines); i += 2 {
				rows = append(rows, sinktest.Row{Key: lines[i], Value: lines[i+1]})
			}
			return rows
		},
		// url's database only: the suite's crash subtests run in parallel.
		Isolated: true,
		Leftovers: func(t *testing.T, url, _, _ string) string {
			if stages := cli(t, url, "KEYS", "onceflow:stage:*"); stages != "" {
				return "stages " + strings.ReplaceAll(stages, "\n", ", ")
			}
			return ""
		},
		DeadLetters: func(t *testing.T, url, job string) int {
			n, _ := strconv.Atoi(cli(t, url, "HLEN", "onceflow:dead:"+job))
			return n
		},
		Refused:         []string{"is not a count"},
		Unreachable:     "redis://u:" + dbtest.Secret + "@127.0.0.1:1/0",
		UnreachableSays: []string{"is the Redis server at redis://u:xxxxx@127.0.0.1:1/0 running"},
	}
}

func conformanceConfig(url string, c sinktest.Config) redis.Config[dbtest.Count] {
	cfg := redis.Config[dbtest.Count]{URL: url, Command: redis.CommandHSet, BatchRows: 500,
		Op: func(r dbtest.Count) (redis.Op, error) {
			if c.Refuse && r.N%10 == 0 {
				return redis.Op{}, fmt.Errorf("record %s: value %d is not a count", r.Key, r.N)
			}
			return redis.Op{Key: "counts", Field: r.Key, Value: strconv.FormatInt(r.N, 10)}, nil
		}}
	if c.Delivery == connector.AtLeastOnce {
		cfg.Delivery = redis.DeliveryAtLeastOnce
	}
	if c.Refuse {
		cfg.BatchRows = 37
	}
	if c.DeadLetters {
		cfg.DeadLetters = &redis.DeadLetters[dbtest.Count]{Of: dbtest.RejectsDeadLetters}
	}
	return cfg
}

// The sink conformance suite (internal/sinktest): exactly-once and
// at-least-once under crashes, replays, refused values and an
// unreachable server.
func TestConformance(t *testing.T) { sinktest.Conformance(t, conformance()) }
