package redis_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
)

// deleteConfig is the sink of the delete tests: set writes n:<key> = N,
// hset the field <key> of the hash h; retractions by Count.Retract.
func deleteConfig(url, mode string, delivery connector.Delivery) redis.Config[dbtest.Count] {
	cfg := redis.Config[dbtest.Count]{URL: url, BatchRows: 3, Delivery: delivery, Retracts: dbtest.Retracts}
	switch mode {
	case "hset":
		cfg.Command = redis.CommandHSet
		cfg.Op = func(c dbtest.Count) (redis.Op, error) {
			return redis.Op{Key: "h", Field: c.Key, Value: strconv.FormatInt(c.N, 10)}, nil
		}
	default:
		cfg.Command = redis.CommandSet
		cfg.Op = func(c dbtest.Count) (redis.Op, error) {
			return redis.Op{Key: "n:" + c.Key, Value: strconv.FormatInt(c.N, 10)}, nil
		}
	}
	return cfg
}

// redisRows lists what the sink of mode wrote as "key|n" lines in key
// order, read with redis-cli.
func redisRows(t *testing.T, srv *dbtest.RedisServer, db int, mode string) string {
	t.Helper()
	cli := func(args ...string) []string {
		t.Helper()
		out, err := srv.Client(db, args...)
		if err != nil {
			t.Fatal(err)
		}
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	var rows []string
	if mode == "hset" {
		kv := cli("HGETALL", "h")
		for i := 0; i+1 < len(kv); i += 2 {
			rows = append(rows, kv[i]+"|"+kv[i+1])
		}
	} else {
		for _, k := range cli("KEYS", "n:*") {
			rows = append(rows, strings.TrimPrefix(k, "n:")+"|"+strings.Join(cli("GET", k), ""))
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}

// Retractions delete their keys (SET: DEL) or fields (HSET: HDEL) in
// both deliveries, through every way a commit takes: merged commands in
// the commit script, SETs streamed into the open MULTI, commands staged
// in Redis (dbtest.DeletesApplied, read with redis-cli).
func TestDeletes(t *testing.T) {
	for _, c := range []struct {
		name, mode string
		delivery   connector.Delivery
		restore    func() func()
	}{
		{"set/exactly-once", "set", connector.ExactlyOnce, nil},
		{"set/exactly-once/multi", "set", connector.ExactlyOnce, func() func() { return redis.SetStreamMerged(2) }},
		{"set/exactly-once/staged", "set", connector.ExactlyOnce, func() func() { return redis.SetMaxMerged(2) }},
		{"hset/exactly-once", "hset", connector.ExactlyOnce, nil},
		{"hset/exactly-once/staged", "hset", connector.ExactlyOnce, func() func() { return redis.SetMaxMerged(2) }},
		{"set/at-least-once", "set", connector.AtLeastOnce, nil},
		{"hset/at-least-once", "hset", connector.AtLeastOnce, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.restore != nil {
				defer c.restore()()
			}
			url, srv, db := dbtest.Redis(t)
			dbtest.DeletesApplied(t, c.delivery, func() flow.Sink[dbtest.Count] {
				s, err := redis.NewSink(deleteConfig(url, c.mode, c.delivery))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				bind(t, s, "deletes", nil)
				return s
			}, func() string { return redisRows(t, srv, db, c.mode) })
		})
	}
}

// A counter's retraction takes its increment back.
func TestCounterRetraction(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	cfg := sinkConfig(url, "incr")
	cfg.Retracts = dbtest.Retracts
	s, err := redis.NewSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bind(t, s, "counter", nil)
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "counter", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for id, recs := range [][]dbtest.Count{
		{{Key: "a"}, {Key: "a"}, {Key: "a"}, {Key: "a", Retract: true}, {Key: "b"}},
		{{Key: "a", Retract: true}, {Key: "b", Retract: true}},
	} {
		for _, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Prepare(ctx, int64(id+1)); err != nil {
			t.Fatal(err)
		}
		if err := cp.Commit(ctx, flow.CommitRecord{Job: "counter", Checkpoint: int64(id + 1), Manifest: "m", Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			if got, _ := srv.Client(db, "MGET", "c:a", "c:b"); got != "2\n1" {
				t.Errorf("after three increments of a, one taken back, and one of b: %q, want 2 and 1", got)
			}
		}
	}
	if got, _ := srv.Client(db, "MGET", "c:a", "c:b"); got != "1\n0" {
		t.Errorf("after one more of a and b's taken back: %q, want 1 and 0", got)
	}
}

// At-least-once deletes are fenced per attempt: a zombie's late SET does
// not bring back a key the new attempt deleted, nor does its late
// retraction delete the new attempt's value.
func TestZombieDeletesFenced(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	open := func(s *redis.Sink[dbtest.Count], first int64) flow.SinkWriter[dbtest.Count] {
		w, err := s.Open(ctx, flow.SinkContext{Job: "zombie", UID: "out", Parallelism: 1, FirstCheckpoint: first})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	newSink := func() *redis.Sink[dbtest.Count] {
		s, err := redis.NewSink(deleteConfig(url, "set", connector.AtLeastOnce))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "zombie", nil)
		return s
	}
	write := func(w flow.SinkWriter[dbtest.Count], id int64, c dbtest.Count) error {
		if err := w.Write(ctx, c); err != nil {
			return err
		}
		_, err := w.Prepare(ctx, id)
		return err
	}
	want := func(when, v string) {
		t.Helper()
		if got := redisRows(t, srv, db, "set"); got != v {
			t.Errorf("%s: %q, want %q", when, got, v)
		}
	}
	old := newSink()
	zombie := open(old, 1)
	zombie2 := open(old, 1) // another writer of the old attempt, sharing its token
	if err := write(zombie, 1, dbtest.Count{Key: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	w := open(newSink(), 1)
	if err := write(w, 1, dbtest.Count{Key: "a", N: 1, Retract: true}); err != nil {
		t.Fatal(err)
	}
	want("after the new attempt's delete", "")
	if err := write(zombie, 2, dbtest.Count{Key: "a", N: 2}); err == nil {
		t.Error("the zombie's late SET was taken without an error")
	} else {
		dbtest.CheckError(t, err, "fenced")
	}
	want("after the zombie's late SET", "")
	if err := write(w, 2, dbtest.Count{Key: "a", N: 10}); err != nil {
		t.Fatal(err)
	}
	if err := write(zombie2, 2, dbtest.Count{Key: "a", N: 10, Retract: true}); err == nil {
		t.Error("a late retraction of an older attempt was taken without an error")
	}
	want("after the zombie's late retraction", "a|10")
}
