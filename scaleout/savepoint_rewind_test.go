package scaleout_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
)

// A job savepoint of two stages restored after the job ran on from its
// own checkpoints past it (a rewind) counts the records after it once.
// The first stage, restored at the savepoint's input offsets, writes
// them into the repartition topic again; the second stage must skip the
// copies the abandoned run wrote there after the savepoint, which the
// restore marker's ends do (docs/design.md, "Savepoints of the whole
// job"). Without the marker every key counts 30.
func TestJobSavepointRewindCountsOnce(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1, "out": 1}})
	dir := t.TempDir()
	const repart = "rw-by-key"
	stages := countStages(repart, "out")
	type inst struct {
		in     *scaleout.Instance
		cancel context.CancelFunc
		done   chan error
	}
	start := func(from string) *inst {
		in, err := scaleout.New(scaleout.Config{Job: "rw", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
			StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages, FromSavepoint: from,
			SavepointTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{in: in, cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		return i
	}
	wait := func(i *inst) {
		t.Helper()
		select {
		case err := <-i.done:
			if err != nil {
				t.Fatalf("instance: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("instance did not stop")
		}
	}
	produce := func(from, n int) {
		var kv []string
		for i := from; i < from+n; i++ {
			kv = append(kv, "k"+strconv.Itoa(i%5), "v"+strconv.Itoa(i))
		}
		c.Produce(t, "in", kv...)
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "rw", "in") || !kafkatest.CaughtUp(t.Context(), adm, "rw", repart); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Run 1: 50 records (10 a key), then stop with a savepoint.
	produce(0, 50)
	a := start("")
	caughtUp("run 1")
	sp, err := a.in.Savepoint(t.Context(), "", true)
	if err != nil {
		t.Fatal(err)
	}
	wait(a)
	// Run 2: resumes its own checkpoints and counts 50 more (10 a key).
	produce(50, 50)
	a = start("")
	caughtUp("run 2")
	a.cancel()
	wait(a)
	// Run 3: the savepoint again. Its first stage reads the 50 records
	// after it again; the count of each key must end at 20, as in a run
	// that never took the detour.
	a = start(sp)
	caughtUp("run 3")
	time.Sleep(time.Second)
	a.cancel()
	wait(a)
	last := map[string]string{}
	for _, r := range c.ReadCommittedRecords(t, "out") {
		last[string(r.Key)] = string(r.Value)
	}
	for k := range 5 {
		key := "k" + strconv.Itoa(k)
		if last[key] != "20" {
			t.Errorf("key %s counted %s records after the rewind to the savepoint, want 20 (outputs' last counts: %v)", key, last[key], last)
		}
	}
}
