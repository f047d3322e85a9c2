package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// epochPoint is a commit point that keeps its record in memory and gives
// each Recover the next fence epoch, as a Kafka producer's epoch grows.
type epochPoint struct {
	mu     sync.Mutex
	rec    flow.CommitRecord
	epoch  int64
	commit []int64
}

func (p *epochPoint) Peek(context.Context) (flow.CommitRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec, nil
}

func (p *epochPoint) Recover(context.Context) (flow.CommitRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	return p.rec, nil
}

func (p *epochPoint) Commit(_ context.Context, r flow.CommitRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rec = r
	p.commit = append(p.commit, r.Checkpoint)
	return nil
}

func (p *epochPoint) FenceEpoch() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// With FencedCheckpointIDs every run's checkpoint ids start above its
// fence epoch << 32, and keep growing across runs.
func TestFencedCheckpointIDs(t *testing.T) {
	dir := t.TempDir()
	cp := &epochPoint{}
	sink := flowtest.NewSink[count]()
	for run := int64(1); run <= 2; run++ {
		src := flowtest.NewSource([][]event{events(4, 50)}, flowtest.PerPoll(5))
		env := countJob(src, sink, 1, flow.StateDir(dir), flow.Checkpointing(time.Millisecond),
			flow.WithCommitPoint(cp), flow.FencedCheckpointIDs())
		if err := env.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		cp.mu.Lock()
		ids := append([]int64(nil), cp.commit...)
		cp.commit = nil
		cp.mu.Unlock()
		if len(ids) == 0 {
			t.Fatalf("run %d committed nothing", run)
		}
		for i, id := range ids {
			if id <= run<<32 || (i > 0 && id <= ids[i-1]) {
				t.Fatalf("run %d (epoch %d) committed checkpoint ids %v: want them increasing, above %d", run, run, ids, run<<32)
			}
		}
	}
}
