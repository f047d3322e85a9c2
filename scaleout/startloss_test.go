package scaleout_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/scaleout"
)

// Three instances started at once on a fresh job of two stages, input
// coming in while they join: every record is counted once.
func TestScaleOutThreeStartAtOnce(t *testing.T) {
	rounds := 1
	if s := os.Getenv("ONCEFLOW_STARTLOSS_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	for r := range rounds {
		t.Run(strconv.Itoa(r), func(t *testing.T) { threeStartAtOnce(t) })
	}
}

func threeStartAtOnce(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	const repart = "sl-by-key"
	stages := countStages(repart, "out")
	type inst struct {
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string) *inst {
		in, err := scaleout.New(scaleout.Config{Job: "sl", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: name,
			StateDir: filepath.Join(dir, "state-"+name), Checkpoints: filepath.Join(dir, "shared"), Stages: stages})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		return i
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, n int) {
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte("seq-" + strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Error(err)
		}
	}
	produce(0, 100)
	var wg sync.WaitGroup
	insts := make([]*inst, 3)
	for k := range insts {
		wg.Add(1)
		go func() { defer wg.Done(); insts[k] = start(string(rune('a' + k))) }()
	}
	wg.Wait()
	total := 100
	for range 30 {
		produce(total, 20)
		total += 20
		time.Sleep(100 * time.Millisecond)
	}
	adm := kadm.NewClient(c.Client(t))
	for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "sl", "in") || !kafkatest.CaughtUp(t.Context(), adm, "sl", repart); {
		if time.Now().After(deadline) {
			t.Fatalf("not caught up within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, i := range insts {
		i.cancel()
	}
	for _, i := range insts {
		if err := <-i.done; err != nil {
			t.Errorf("instance: %v", err)
		}
	}
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{c.Addr}, Input: "in", Output: "out", Mode: verify.Count})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Outputs != total {
		t.Fatalf("%d outputs of %d inputs: %v", rep.Outputs, total, rep)
	}
}
