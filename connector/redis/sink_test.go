package redis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bind(t *testing.T, s *redis.Sink[dbtest.Count], job string, log *slog.Logger) {
	t.Helper()
	if err := s.BindJob(flow.JobInfo{Name: job, Checkpointing: flow.CheckpointSettings{Mode: flow.ExactlyOnce}, Logger: log}); err != nil {
		t.Fatal(err)
	}
}

// A zombie cannot commit once a newer instance recovered: its script sees
// a fence that is not its own, or its MULTI's EXEC finds the watched
// progress hash changed, and applies nothing.
func TestZombieIsFenced(t *testing.T) {
	t.Run("script", func(t *testing.T) { testZombieIsFenced(t, "incr", "c:") })
	t.Run("multi", func(t *testing.T) {
		defer redis.SetStreamMerged(1)() // the zombie's MULTI is open before the newer instance recovers
		testZombieIsFenced(t, "set", "n:")
	})
}

func testZombieIsFenced(t *testing.T, mode, prefix string) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	open := func() (flow.CommitPoint, flow.SinkWriter[dbtest.Count]) {
		cfg := sinkConfig(url, mode)
		cfg.BatchRows = 1 // each write reaches the transaction at once
		s, err := redis.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "zombie", nil)
		cp := s.CommitPoint()
		if _, err := cp.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: "zombie", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cp, w
	}
	oldCP, oldW := open()
	if err := oldW.Write(ctx, dbtest.Count{Key: "old", N: 1}); err != nil {
		t.Fatal(err)
	}
	newCP, newW := open()
	if err := newW.Write(ctx, dbtest.Count{Key: "new", N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := newW.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := newCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "m1", Time: time.Now()}); err != nil {
		t.Fatalf("the new instance's commit: %v", err)
	}
	_, werr := oldW.Prepare(ctx, 1)
	cerr := oldCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "zombie", Time: time.Now()})
	if werr == nil && cerr == nil {
		t.Fatal("the zombie committed after a newer instance recovered")
	}
	if cerr != nil && !errors.Is(cerr, redis.ErrFenced) {
		t.Errorf("the zombie's commit failed with %v, want ErrFenced", cerr)
	}
	old, _ := srv.Client(db, "GET", prefix+"old")
	if n, _ := srv.Client(db, "GET", prefix+"new"); old != "" || n != "1" {
		t.Errorf("%sold = %q, %snew = %q; want only the new instance's write", prefix, old, prefix, n)
	}
	if got, _ := srv.Client(db, "HMGET", "onceflow:progress:zombie", "checkpoint", "manifest", "fence"); got != "1\nm1\n2" {
		t.Errorf("progress hash: %q, want checkpoint 1, manifest m1, fence 2", got)
	}
	rec, err := newCP.Peek(ctx)
	if err != nil || rec.Checkpoint != 1 || rec.Manifest != "m1" {
		t.Errorf("Peek: %+v, %v; want checkpoint 1", rec, err)
	}
}

// At-least-once: the writers of an attempt share a token taken from
// Redis; a later attempt (a restart, or another process, even one whose
// checkpoint ids began again at 1) takes a new one, and the writers of
// the attempts before it write nothing and stop the job. Sinks of other
// uids have keys of their own.
func TestAttemptFence(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	for _, c := range []struct {
		name    string
		command redis.Command
		get     func(k string) []string
	}{
		{"set", redis.CommandSet, func(k string) []string { return []string{"GET", "n:" + k} }},
		{"hset", redis.CommandHSet, func(k string) []string { return []string{"HGET", "h", k} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := "fence-" + c.name
			// newSink is the Redis sink of one process of the job.
			newSink := func() *redis.Sink[dbtest.Count] {
				cfg := sinkConfig(url, "fenced")
				cfg.BatchRows = 3
				if c.command == redis.CommandHSet {
					cfg.Command = redis.CommandHSet
					cfg.Op = func(c dbtest.Count) (redis.Op, error) {
						return redis.Op{Key: "h", Field: c.Key, Value: strconv.FormatInt(c.N, 10)}, nil
					}
				}
				s, err := redis.NewSink(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				bind(t, s, job, nil)
				return s
			}
			open := func(s *redis.Sink[dbtest.Count], uid string, subtask int, first int64) flow.SinkWriter[dbtest.Count] {
				t.Helper()
				w, err := s.Open(ctx, flow.SinkContext{Job: job, UID: uid, Subtask: subtask, Parallelism: 2, FirstCheckpoint: first})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { w.Close() })
				return w
			}
			// write writes n to keys a, b and c, and flushes them at
			// barrier id.
			write := func(w flow.SinkWriter[dbtest.Count], id, n int64) error {
				for _, k := range []string{"a", "b", "c"} {
					if err := w.Write(ctx, dbtest.Count{Key: k, N: n}); err != nil {
						return err
					}
				}
				_, err := w.Prepare(ctx, id)
				return err
			}
			want := func(when, v string) {
				t.Helper()
				for _, k := range []string{"a", "b", "c"} {
					got, err := srv.Client(db, c.get(k)...)
					if err != nil {
						t.Fatal(err)
					}
					if got != v {
						t.Errorf("%s: %s = %q, want %s", when, k, got, v)
					}
				}
			}
			fenced := func(when string, err error) {
				t.Helper()
				if !errors.Is(err, redis.ErrFenced) || !errors.Is(err, flow.ErrUnrecoverable) {
					t.Errorf("%s: %v, want ErrFenced, unrecoverable", when, err)
				} else if !strings.Contains(err.Error(), "onceflow:attempt:"+job+":out") || !strings.Contains(err.Error(), "stop one") {
					t.Errorf("%s: %q does not name the attempt key and what to do", when, err)
				}
			}

			p1 := newSink()
			w0, w1 := open(p1, "out", 0, 5), open(p1, "out", 1, 5)
			if err := write(w0, 5, 50); err != nil {
				t.Fatal(err)
			}
			if err := write(w1, 5, 51); err != nil {
				t.Fatalf("the second writer of the attempt: %v", err)
			}
			want("the writers of one attempt", "51")

			// The process restarts the job: its next attempt fences the
			// writer of the last one (still open here).
			r0 := open(p1, "out", 0, 7)
			fenced("the last attempt's writer", write(w0, 6, 60))
			want("after the last attempt's writer", "51")
			if err := write(r0, 7, 70); err != nil {
				t.Fatal(err)
			}
			want("the restarted attempt", "70")

			// Another process, whose checkpoints were moved aside (ids
			// begin again at 1), takes over; the first is fenced.
			p2 := newSink()
			q0 := open(p2, "out", 0, 1)
			if err := write(q0, 1, 10); err != nil {
				t.Fatalf("a fresh start with ids from 1: %v", err)
			}
			fenced("the first process after another took over", write(r0, 8, 80))
			want("after the first process's write", "10")

			// A sink of another uid has a key of its own.
			o0 := open(p2, "other", 0, 1)
			if err := write(o0, 1, 11); err != nil {
				t.Fatal(err)
			}
			if err := write(q0, 2, 20); err != nil {
				t.Fatalf("after a sink of another uid opened: %v", err)
			}
			want("the taken-over process's next epoch", "20")

			// The attempt key deleted by hand: the next batch takes it.
			if _, err := srv.Client(db, "DEL", "onceflow:attempt:"+job+":out"); err != nil {
				t.Fatal(err)
			}
			if err := write(q0, 3, 30); err != nil {
				t.Fatalf("after the attempt key was deleted: %v", err)
			}
			want("after the attempt key was deleted", "30")
		})
	}
}

// An older version kept each key's epoch in a hash; taking a token drops
// it.
func TestOpenDropsPerKeyEpochs(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	if _, err := srv.Client(db, "HSET", "onceflow:epoch:legacy", "n:a", "3"); err != nil {
		t.Fatal(err)
	}
	s, err := redis.NewSink(sinkConfig(url, "fenced"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bind(t, s, "legacy", nil)
	w, err := s.Open(ctx, flow.SinkContext{Job: "legacy", UID: "out", Parallelism: 1, FirstCheckpoint: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, _ := srv.Client(db, "EXISTS", "onceflow:epoch:legacy"); got != "0" {
		t.Errorf("EXISTS onceflow:epoch:legacy = %q after a writer opened, want 0", got)
	}
	if got, _ := srv.Client(db, "GET", "onceflow:attempt:legacy:out"); got != "1" {
		t.Errorf("onceflow:attempt:legacy:out = %q, want 1 (the first token)", got)
	}
}

// The errors users meet say what is wrong and what to do, without the
// password.
func TestErrorsSayWhatToDo(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	op := func(c dbtest.Count) (redis.Op, error) { return redis.Op{Key: "k:" + c.Key, Value: "v"}, nil }
	for _, c := range []struct {
		name string
		cfg  redis.Config[dbtest.Count]
		want []string
	}{
		{"no url", redis.Config[dbtest.Count]{Command: redis.CommandSet, Op: op}, []string{"URL is empty", "redis://127.0.0.1:6379/0"}},
		{"bad url", redis.Config[dbtest.Count]{URL: "http://u:s3cret@host", Command: redis.CommandSet, Op: op}, []string{"URL http://u:xxxxx@host", "redis://[user:password@]host:port/db"}},
		{"no command", redis.Config[dbtest.Count]{URL: url, Op: op}, []string{"Command is empty", "set, hset, incrby or hincrby"}},
		{"unknown command", redis.Config[dbtest.Count]{URL: url, Command: "lpush", Op: op}, []string{`unknown command "lpush"`}},
		{"counter at least once", redis.Config[dbtest.Count]{URL: url, Command: redis.CommandIncrBy, Op: op, Delivery: redis.DeliveryAtLeastOnce}, []string{"a replayed increment would count twice", "use delivery exactly-once"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := redis.NewSink(c.cfg)
			dbtest.CheckError(t, err, c.want...)
		})
	}

	t.Run("unreachable server", func(t *testing.T) {
		s, err := redis.NewSink(redis.Config[dbtest.Count]{URL: "redis://u:s3cret@127.0.0.1:1/0", Command: redis.CommandSet, Op: op})
		if err != nil {
			t.Fatal(err)
		}
		bind(t, s, "errors", nil)
		_, err = s.CommitPoint().Recover(ctx)
		if err == nil || !strings.Contains(err.Error(), "is the Redis server at redis://u:xxxxx@127.0.0.1:1/0 running") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Recover against no server: %v", err)
		}
	})

	t.Run("wrong type", func(t *testing.T) {
		if _, err := srv.Client(db, "SET", "k:x", "a string"); err != nil {
			t.Fatal(err)
		}
		hop := func(c dbtest.Count) (redis.Op, error) {
			return redis.Op{Key: "k:" + c.Key, Field: "f", Value: "v"}, nil
		}
		s, err := redis.NewSink(redis.Config[dbtest.Count]{URL: url, Command: redis.CommandHSet, Op: hop, Delivery: redis.DeliveryAtLeastOnce})
		if err != nil {
			t.Fatal(err)
		}
		bind(t, s, "errors", nil)
		w, err := s.Open(ctx, flow.SinkContext{Job: "errors", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Write(ctx, dbtest.Count{Key: "x"}); err != nil {
			t.Fatal(err)
		}
		_, err = w.Prepare(ctx, 1)
		if err == nil || !strings.Contains(err.Error(), "key k:x holds a string, and HSET needs a hash") || !errors.Is(err, flow.ErrUnrecoverable) {
			t.Errorf("an HSET over a string: %v", err)
		}
		// The batch is lost with the declined checkpoint: the writer fails
		// from now on, so the job restarts from its last checkpoint
		// rather than committing positions past the batch later.
		if err := w.Write(ctx, dbtest.Count{Key: "y"}); err == nil || !strings.Contains(err.Error(), "the job must restart from its last checkpoint") {
			t.Errorf("a write after a failed batch: %v, want the writer's sticky failure", err)
		}
	})

	// With Redis as the commit point, a key of the wrong type fails the
	// commit and nothing of it stays written.
	t.Run("wrong type at commit", func(t *testing.T) {
		if _, err := srv.Client(db, "HSET", "c:bad", "f", "1"); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"c:text": "abc", "c:zeros": "007", "c:big": "9223372036854775807"} {
			if _, err := srv.Client(db, "SET", k, v); err != nil {
				t.Fatal(err)
			}
		}
		for _, key := range []string{"bad", "text", "zeros", "big"} {
			s, err := redis.NewSink(sinkConfig(url, "incr"))
			if err != nil {
				t.Fatal(err)
			}
			bind(t, s, "wrongtype-"+key, nil)
			cp := s.CommitPoint()
			if _, err := cp.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := s.Open(ctx, flow.SinkContext{Job: "wrongtype-" + key, Parallelism: 1, FirstCheckpoint: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"good", key} {
				if err := w.Write(ctx, dbtest.Count{Key: k}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Prepare(ctx, 1); err != nil {
				t.Fatal(err)
			}
			err = cp.Commit(ctx, flow.CommitRecord{Job: "wrongtype-" + key, Checkpoint: 1, Manifest: "m", Time: time.Now()})
			want := map[string]string{"bad": "key c:bad holds a hash, and INCRBY needs a string", "text": "key c:text holds a value that is not an integer",
				"zeros": "key c:zeros holds a value that is not an integer", "big": "counter key c:big would overflow a 64-bit integer"}[key]
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing of the commit was written") || !errors.Is(err, flow.ErrUnrecoverable) {
				t.Errorf("INCRBY over %s: %v", key, err)
			}
			if got, _ := srv.Client(db, "GET", "c:good"); got != "" {
				t.Errorf("the failed commit wrote c:good = %q", got)
			}
			if rec, err := cp.Peek(ctx); err != nil || rec.Checkpoint != 0 {
				t.Errorf("after the failed commit the record is %+v, %v", rec, err)
			}
			w.Close()
			s.Close()
		}
	})

	t.Run("empty key", func(t *testing.T) {
		s, err := redis.NewSink(redis.Config[dbtest.Count]{URL: url, Command: redis.CommandSet, Delivery: redis.DeliveryAtLeastOnce,
			Op: func(dbtest.Count) (redis.Op, error) { return redis.Op{}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		bind(t, s, "errors", nil)
		w, err := s.Open(ctx, flow.SinkContext{Job: "errors", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		err = w.Write(ctx, dbtest.Count{Key: "x"})
		if !errors.Is(err, flow.ErrUnrecoverable) || !strings.Contains(err.Error(), "empty key") {
			t.Errorf("a record without a key: %v, want an unrecoverable error naming the empty key", err)
		}
	})
}

// A server that can lose acknowledged writes on a crash is named in a
// warning at start.
func TestPersistenceWarning(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	recoverWith := func() string {
		var buf syncBuffer
		s, err := redis.NewSink(sinkConfig(url, "incr"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		bind(t, s, "persist", slog.New(slog.NewTextHandler(&buf, nil)))
		if _, err := s.CommitPoint().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if log := recoverWith(); strings.Contains(log, "lose acknowledged writes") {
		t.Errorf("a warning with appendfsync always:\n%s", log)
	}
	if _, err := srv.Client(db, "CONFIG", "SET", "appendfsync", "everysec"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = srv.Client(db, "CONFIG", "SET", "appendfsync", "always") }()
	if log := recoverWith(); !strings.Contains(log, "lose acknowledged writes") || !strings.Contains(log, "appendfsync=everysec") {
		t.Errorf("no warning with appendfsync everysec:\n%s", log)
	}
}

// A counter commit that fails on its last key takes back every increment
// it applied, from the stage and from the script's arguments, to plain
// counters and hash fields: the counters read as before, the ones it
// created are gone, and the checkpoint is not recorded.
func TestFailedCounterCommitTakesBack(t *testing.T) {
	defer redis.SetMaxMerged(3)() // 80 blobs in the stage: more than one window of 64
	url, srv, db := dbtest.Redis(t)
	for _, cmd := range []redis.Command{redis.CommandIncrBy, redis.CommandHIncrBy} {
		t.Run(string(cmd), func(t *testing.T) {
			ctx := ctxT(t) // a minute each: the reads fork redis-cli 120 times
			job := "takeback-" + string(cmd)
			key := func(k string) (string, string) {
				if cmd == redis.CommandHIncrBy {
					return job + ":h", k
				}
				return job + ":" + k, ""
			}
			read := func(k string) string {
				t.Helper()
				h, f := key(k)
				var got string
				var err error
				if f != "" {
					got, err = srv.Client(db, "HGET", h, f)
				} else {
					got, err = srv.Client(db, "GET", h)
				}
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			// Counters before the commit: some exist (one at the edge of
			// int64, one negative), the rest do not.
			before := map[string]string{"k0": "5", "k1": "-3", "k7": "9223372036854767000", "k13": "-9223372036854740000"}
			for k, v := range before {
				h, f := key(k)
				args := []string{"SET", h, v}
				if f != "" {
					args = []string{"HSET", h, f, v}
				}
				if _, err := srv.Client(db, args...); err != nil {
					t.Fatal(err)
				}
			}
			// The bad key: a list where a counter (or its hash) should be.
			bad := job + ":bad"
			if cmd == redis.CommandHIncrBy {
				bad = job + ":h"
				if _, err := srv.Client(db, "HSET", bad, "bad", "not a number"); err != nil {
					t.Fatal(err)
				}
			} else if _, err := srv.Client(db, "RPUSH", bad, "x"); err != nil {
				t.Fatal(err)
			}
			s, err := redis.NewSink(redis.Config[dbtest.Count]{URL: url, Command: cmd, BatchRows: 1,
				Op: func(c dbtest.Count) (redis.Op, error) {
					h, f := key(c.Key)
					return redis.Op{Key: h, Field: f, By: c.N}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bind(t, s, job, nil)
			cp := s.CommitPoint()
			if _, err := cp.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := s.Open(ctx, flow.SinkContext{Job: job, Parallelism: 1, FirstCheckpoint: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// 120 keys twice: the stage holds some keys twice, the
			// arguments hold keys the stage holds too. Increments of both
			// signs, up to near the edge of int64.
			for round := range 2 {
				for i := range 120 {
					n := int64(i*1000 + round + 1)
					if i%2 == 1 {
						n = -n
					}
					if i == 7 && round == 1 {
						n = 800
					}
					if err := w.Write(ctx, dbtest.Count{Key: "k" + strconv.Itoa(i), N: n}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Write(ctx, dbtest.Count{Key: "bad", N: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Prepare(ctx, 1); err != nil {
				t.Fatal(err)
			}
			err = cp.Commit(ctx, flow.CommitRecord{Job: job, Checkpoint: 1, Manifest: "m", Time: time.Now()})
			if err == nil || !strings.Contains(err.Error(), "nothing of the commit was written") || !errors.Is(err, flow.ErrUnrecoverable) {
				t.Fatalf("a commit over a bad key: %v", err)
			}
			want := "key " + job + ":bad holds a list, and INCRBY needs a string"
			if cmd == redis.CommandHIncrBy {
				want = "field bad of key " + job + ":h holds a value that is not an integer, and HINCRBY needs one"
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the commit failed with %v, want it to fail on the bad key: %s", err, want)
			}
			for i := range 120 {
				k := "k" + strconv.Itoa(i)
				if got := read(k); got != before[k] {
					t.Errorf("after the failed commit %s = %q, want %q", k, got, before[k])
				}
			}
			if rec, err := cp.Peek(ctx); err != nil || rec.Checkpoint != 0 {
				t.Errorf("after the failed commit the record is %+v, %v", rec, err)
			}
		})
	}
}

// An increment the server refuses for a reason of its own (here: out of
// memory) is taken back like one a key refuses, but fails the commit as an
// error to retry, not as a key to fix; and a record may not write the
// sink's own keys.
func TestServerErrorsAreNotTheKeys(t *testing.T) {
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	s, err := redis.NewSink(sinkConfig(url, "incr"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bind(t, s, "oom", nil)
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "oom", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, k := range []string{"a", "b"} {
		if err := w.Write(ctx, dbtest.Count{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(db, "CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	err = cp.Commit(ctx, flow.CommitRecord{Job: "oom", Checkpoint: 1, Manifest: "m", Time: time.Now()})
	if _, cerr := srv.Client(db, "CONFIG", "SET", "maxmemory", "0"); cerr != nil {
		t.Fatal(cerr)
	}
	if err == nil || !strings.Contains(err.Error(), "OOM") || errors.Is(err, flow.ErrUnrecoverable) || strings.Contains(err.Error(), "nothing of the commit") {
		t.Errorf("a commit the server refuses for memory: %v, want the server's OOM error, to retry", err)
	}
	if got, _ := srv.Client(db, "EXISTS", "c:a", "c:b"); got != "0" {
		t.Errorf("after the refused commit %s of c:a, c:b exist, want neither", got)
	}
	if rec, err := cp.Peek(ctx); err != nil || rec.Checkpoint != 0 {
		t.Errorf("after the refused commit the record is %+v, %v", rec, err)
	}
	for _, k := range []string{"onceflow:progress:oom", "onceflow:stage:oom:1", "onceflow:dead:x"} {
		s, err := redis.NewSink(redis.Config[dbtest.Count]{URL: url, Command: redis.CommandIncrBy,
			Op: func(dbtest.Count) (redis.Op, error) { return redis.Op{Key: k, By: 1}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		bind(t, s, "own", nil)
		if _, err := s.CommitPoint().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: "own", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Write(ctx, dbtest.Count{Key: "x"})
		if !errors.Is(err, flow.ErrUnrecoverable) || !strings.Contains(err.Error(), "one of the sink's own keys") {
			t.Errorf("a record writing %s: %v, want it refused as the sink's own key", k, err)
		}
		w.Close()
		s.Close()
	}
}

// A checkpoint with more keys than the sink merges in memory stages them
// in Redis and commits them with a script: the same end state, under the
// same fence, and no stage is left.
func TestStagedCommit(t *testing.T) {
	defer redis.SetMaxMerged(10)()
	url, srv, db := dbtest.Redis(t)
	ctx := ctxT(t)
	open := func() (flow.CommitPoint, flow.SinkWriter[dbtest.Count]) {
		s, err := redis.NewSink(sinkConfig(url, "incr"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "staged", nil)
		cp := s.CommitPoint()
		if _, err := cp.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: "staged", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cp, w
	}
	write := func(w flow.SinkWriter[dbtest.Count], id int64, keys int) {
		t.Helper()
		for i := range 2 * keys {
			if err := w.Write(ctx, dbtest.Count{Key: "k" + strconv.Itoa(i%keys)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Prepare(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	cp, w := open()
	write(w, 1, 25)
	if err := cp.Commit(ctx, flow.CommitRecord{Job: "staged", Checkpoint: 1, Manifest: "m1", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.Client(db, "MGET", "c:k0", "c:k24"); got != "2\n2" {
		t.Errorf("after a staged commit c:k0, c:k24 = %q, want 2 and 2", got)
	}
	if stages, _ := srv.Client(db, "KEYS", "onceflow:stage:*"); stages != "" {
		t.Errorf("a stage is left after the commit: %q", stages)
	}
	// A stage that is gone (it expired) fails the commit instead of
	// committing the rest without it.
	write(w, 2, 25)
	if _, err := srv.Client(db, "EVAL", "for _, k in ipairs(redis.call('KEYS', 'onceflow:stage:*')) do redis.call('DEL', k) end", "0"); err != nil {
		t.Fatal(err)
	}
	if err := cp.Commit(ctx, flow.CommitRecord{Job: "staged", Checkpoint: 2, Manifest: "m2", Time: time.Now()}); err == nil || !strings.Contains(err.Error(), "did it expire?") {
		t.Errorf("a commit whose stage is gone: %v", err)
	}
	if got, _ := srv.Client(db, "GET", "c:k0"); got != "2" {
		t.Errorf("after the failed commit c:k0 = %q, want 2", got)
	}
	cp, w = open()
	// A zombie's staged commit applies nothing.
	zcp, zw := cp, w
	newCP, _ := open()
	write(zw, 2, 25)
	if err := zcp.Commit(ctx, flow.CommitRecord{Job: "staged", Checkpoint: 2, Manifest: "z", Time: time.Now()}); !errors.Is(err, redis.ErrFenced) {
		t.Errorf("the zombie's staged commit: %v, want ErrFenced", err)
	}
	if got, _ := srv.Client(db, "GET", "c:k0"); got != "2" {
		t.Errorf("after the zombie's commit c:k0 = %q, want 2", got)
	}
	if rec, err := newCP.Peek(ctx); err != nil || rec.Checkpoint != 1 {
		t.Errorf("Peek = %+v, %v; want checkpoint 1", rec, err)
	}
}

// Records Op rejects follow the sink's error policy in both deliveries:
// dead letters go to the dead-letter hash with the commands, once each.
func TestRejectedRecords(t *testing.T) {
	bad := dbtest.RejectsRecords / 10
	for _, mode := range []string{"incr", "fenced"} {
		t.Run(mode, func(t *testing.T) {
			url, srv, db := dbtest.Redis(t)
			cfg := sinkConfig(url, mode)
			op := cfg.Op
			cfg.Op = func(c dbtest.Count) (redis.Op, error) {
				if c.N%10 == 0 {
					return redis.Op{}, fmt.Errorf("record %d has no place", c.N)
				}
				return op(c)
			}
			cfg.BatchRows = 37
			cfg.DeadLetters = &redis.DeadLetters[dbtest.Count]{Of: dbtest.RejectsDeadLetters}
			s, err := redis.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := dbtest.RunRejects(t, "rejects-"+mode, s, flow.DeadLetterOnError)
			if err != nil {
				t.Fatal(err)
			}
			if st.RecordsDeadLettered != int64(bad) {
				t.Errorf("%d records dead-lettered, want %d", st.RecordsDeadLettered, bad)
			}
			if got, _ := srv.Client(db, "HLEN", "onceflow:dead:rejects-"+mode); got != fmt.Sprint(bad) {
				t.Errorf("the dead-letter hash holds %s, want %d", got, bad)
			}
			v, _ := srv.Client(db, "HGET", "onceflow:dead:rejects-"+mode, "sink/20")
			if !strings.Contains(v, `"key":"r20"`) || !strings.Contains(v, "record 20 has no place") {
				t.Errorf("dead letter of record 20: %q", v)
			}
			prefix := "c:"
			if mode == "fenced" {
				prefix = "n:"
			}
			if keys, _ := srv.Client(db, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", prefix+"*"); keys != fmt.Sprint(dbtest.RejectsRecords-bad) {
				t.Errorf("%s keys written, want %d", keys, dbtest.RejectsRecords-bad)
			}
		})
	}
}
