package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// pickySink rejects odd numbers; its writers keep dead letters when keep
// is set. Written records and dead letters become visible at commit.
type pickySink struct {
	keep       bool
	mu         sync.Mutex
	out, dead  []int
	deadCauses []string
}

func (s *pickySink) KeepsDeadLetters() bool { return s.keep }

func (s *pickySink) Open(context.Context, flow.SinkContext) (flow.SinkWriter[int], error) {
	return &pickyWriter{s: s}, nil
}

func (s *pickySink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nil, nil
}

type pickyWriter struct {
	s          *pickySink
	out, dead  []int
	deadCauses []string
}

func (w *pickyWriter) Write(_ context.Context, n int) error {
	if n%2 == 1 {
		return flow.Rejected(fmt.Errorf("%d is odd", n))
	}
	w.out = append(w.out, n)
	return nil
}

func (w *pickyWriter) WriteDeadLetter(_ context.Context, n int, cause error) error {
	w.dead, w.deadCauses = append(w.dead, n), append(w.deadCauses, cause.Error())
	return nil
}

func (w *pickyWriter) Prepare(context.Context, int64) ([]byte, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.out, w.s.dead, w.s.deadCauses = append(w.s.out, w.out...), append(w.s.dead, w.dead...), append(w.s.deadCauses, w.deadCauses...)
	w.out, w.dead, w.deadCauses = nil, nil, nil
	return nil, nil
}

func (w *pickyWriter) Commit(context.Context, int64, []byte) error { return nil }
func (w *pickyWriter) Close() error                                { return nil }

// A record the sink rejects goes through the sink's OnRejected policy: it
// stops the job (fail, the default), is dropped and counted (skip), or is
// kept by the writer with the output and counted (dead-letter); a sink
// that keeps no dead letters cannot be given dead-letter.
func TestSinkRejectedRecords(t *testing.T) {
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	run := func(keep bool, opts ...flow.OpOption) (*pickySink, flow.Stats, error) {
		env := flow.New(quiet())
		s := &pickySink{keep: keep}
		flow.To(flow.From(env, flowtest.NewSource(flowtest.Split(in, 2))), flow.Sink[int](s), opts...)
		job, err := env.Start(context.Background())
		if err != nil {
			return s, flow.Stats{}, err
		}
		err = job.Wait()
		return s, job.Stats(), err
	}

	_, _, err := run(false)
	if !errors.Is(err, flow.ErrRejected) || !errors.Is(err, flow.ErrUnrecoverable) || !strings.Contains(err.Error(), "is odd") || !strings.Contains(err.Error(), "error policy fail") {
		t.Errorf("fail: %v, want the rejection, unrecoverable, naming the policy", err)
	}

	s, st, err := run(false, flow.OnRejected(flow.SkipOnError))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.out)
	if len(s.out) != 50 || s.out[0] != 0 || s.out[49] != 98 || len(s.dead) != 0 || st.RecordsSkipped != 50 {
		t.Errorf("skip: %d written, %d dead, %d skipped; want 50, 0, 50", len(s.out), len(s.dead), st.RecordsSkipped)
	}

	s, st, err = run(true, flow.OnRejected(flow.DeadLetterOnError))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.dead)
	if len(s.out) != 50 || len(s.dead) != 50 || s.dead[0] != 1 || st.RecordsDeadLettered != 50 || !strings.Contains(s.deadCauses[0], "is odd") {
		t.Errorf("dead-letter: %d written, %d dead (first %v), %d counted; want 50, 50 (1), 50", len(s.out), len(s.dead), s.dead[:1], st.RecordsDeadLettered)
	}

	if _, _, err := run(false, flow.OnRejected(flow.DeadLetterOnError)); !errors.Is(err, flow.ErrInvalidJob) || !strings.Contains(err.Error(), "keeps dead letters") {
		t.Errorf("dead-letter into a sink without dead letters: %v, want ErrInvalidJob", err)
	}
}

// sharedSink's writers share a resource the last Close releases; the
// writer of subtask 0 opens only after that (and then fails), the writer of
// subtask 1 rejects its first record.
type sharedSink struct {
	closed chan struct{}
	once   sync.Once
}

func (s *sharedSink) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[int], error) {
	if sc.Subtask == 0 {
		<-s.closed
		return nil, errors.New("the shared connection is closed")
	}
	return &sharedWriter{s: s}, nil
}

func (s *sharedSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nil, nil
}

type sharedWriter struct{ s *sharedSink }

func (w *sharedWriter) Write(context.Context, int) error {
	return flow.Rejected(errors.New("the first record does not fit"))
}
func (w *sharedWriter) Prepare(context.Context, int64) ([]byte, error) { return nil, nil }
func (w *sharedWriter) Commit(context.Context, int64, []byte) error    { return nil }
func (w *sharedWriter) Close() error {
	w.s.once.Do(func() { close(w.s.closed) })
	time.Sleep(50 * time.Millisecond) // the other subtask fails meanwhile
	return nil
}

// A failing subtask's error is what the job reports, even when closing its
// operators makes another subtask fail right after (a sink's shared
// connection closed by its last writer): the cause, not the consequence.
func TestJobReportsTheFirstFailure(t *testing.T) {
	env := flow.New(quiet())
	s := &sharedSink{closed: make(chan struct{})}
	flow.To(flow.From(env, flowtest.NewSource(flowtest.Split([]int{1, 2, 3, 4}, 2))), flow.Sink[int](s))
	err := env.Run(context.Background())
	if !errors.Is(err, flow.ErrRejected) || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("the job failed with %v, want the rejected record (the first failure)", err)
	}
}
