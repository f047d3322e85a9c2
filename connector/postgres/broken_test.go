package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// The conformance suite must fail a broken sink: a test that cannot fail
// is a defect. TestBrokenConformance runs the suite against the PostgreSQL
// sink broken one way (brokenEnv names it) in a child process of this
// test binary, and TestConformanceFailsBrokenSinks checks that the child
// fails, in the subtests that should catch the breakage.

// brokenEnv names the breakage of the child's sink; the crash children of
// TestBrokenConformance inherit it, so they run the broken sink too.
const brokenEnv = "ONCEFLOW_SINKTEST_BROKEN"

// The breakages.
const (
	// brokenDrop loses records: those of key c (the replay's) and of keys
	// ending in 7.
	brokenDrop = "drop"
	// brokenEarlyCommit commits what it prepares at once, before the
	// commit point (visible prepared rows: not two-phase).
	brokenEarlyCommit = "early-commit"
	// brokenVague replaces every error of Open and Recover with one that
	// says nothing of what to do.
	brokenVague = "vague"
)

// harness returns the suite's harness of the sink, broken as brokenEnv
// says.
func harness() sinktest.Harness {
	h := conformance()
	how := os.Getenv(brokenEnv)
	if how == "" {
		return h
	}
	newSink := h.NewSink
	h.NewSink = func(dsn string, c sinktest.Config) (flow.Sink[count], error) {
		s, err := newSink(dsn, c)
		if err != nil {
			return nil, err
		}
		return &brokenSink{Sink: s.(*postgres.Sink[count]), how: how}, nil
	}
	return h
}

// brokenSink is the PostgreSQL sink with its writers broken; the sink's
// other methods (BindJob, CommitPoint, ResolvePrepared, ...) are its own.
type brokenSink struct {
	*postgres.Sink[count]
	how string
}

func (s *brokenSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[count], error) {
	w, err := s.Sink.Open(ctx, sc)
	if err != nil {
		if s.how == brokenVague {
			return nil, errors.New("failed")
		}
		return nil, err
	}
	return &brokenWriter{SinkWriter: w, how: s.how}, nil
}

func (s *brokenSink) CommitPoint() flow.CommitPoint {
	cp := s.Sink.CommitPoint()
	if cp == nil || s.how != brokenVague {
		return cp
	}
	return vagueCommitPoint{cp}
}

type vagueCommitPoint struct{ flow.CommitPoint }

func (cp vagueCommitPoint) Recover(ctx context.Context) (flow.CommitRecord, error) {
	rec, err := cp.CommitPoint.Recover(ctx)
	if err != nil {
		err = errors.New("failed")
	}
	return rec, err
}

type brokenWriter struct {
	flow.SinkWriter[count]
	how string
}

func (w *brokenWriter) Write(ctx context.Context, c count) error {
	if w.how == brokenDrop && (c.Key == "c" || strings.HasSuffix(c.Key, "7")) {
		return nil
	}
	return w.SinkWriter.Write(ctx, c)
}

func (w *brokenWriter) Prepare(ctx context.Context, id int64) ([]byte, error) {
	h, err := w.SinkWriter.Prepare(ctx, id)
	if err == nil && w.how == brokenEarlyCommit {
		err = w.SinkWriter.Commit(ctx, id, h)
	}
	return h, err
}

func (w *brokenWriter) WriteDeadLetter(ctx context.Context, c count, cause error) error {
	return w.SinkWriter.(flow.DeadLetterWriter[count]).WriteDeadLetter(ctx, c, cause)
}

// TestBrokenConformance is the child: the suite against the broken sink.
func TestBrokenConformance(t *testing.T) {
	if os.Getenv(brokenEnv) == "" {
		t.Skip("run by TestConformanceFailsBrokenSinks")
	}
	sinktest.Conformance(t, harness())
}

// Each breakage fails the suite in the subtests that look at what it
// breaks. Only the quick subtests run; the crash subtest would catch the
// dropped records too, and ONCEFLOW_LONG=1 runs it.
func TestConformanceFailsBrokenSinks(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		how, run string
		fails    []string // subtests that must fail
	}{
		{brokenDrop, "replay|bad-values", []string{"replay", "bad-values/exactly-once/dead-letter", "bad-values/two-phase/dead-letter", "bad-values/at-least-once/dead-letter"}},
		{brokenEarlyCommit, "two-phase", []string{"two-phase"}},
		{brokenVague, "unreachable", []string{"unreachable"}},
	} {
		t.Run(c.how, func(t *testing.T) {
			run := "^TestBrokenConformance$/^(" + c.run + ")$"
			if os.Getenv("ONCEFLOW_LONG") != "" && c.how == brokenDrop {
				run = "^TestBrokenConformance$"
				c.fails = append(c.fails, "crashes/exactly-once", "crashes/at-least-once")
			}
			cmd := exec.Command(exe, "-test.run="+run, "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+c.how)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the suite against a sink broken by %s: %v, want it to fail; output:\n%s", c.how, err, out.String())
			}
			for _, f := range c.fails {
				if !strings.Contains(out.String(), "--- FAIL: TestBrokenConformance/"+f+" ") {
					t.Errorf("the suite against a sink broken by %s did not fail %s; output:\n%s", c.how, f, out.String())
				}
			}
			if t.Failed() {
				return
			}
			t.Logf("the suite failed the sink broken by %s:\n%s", c.how, failures(out.String()))
		})
	}
}

// failures is the lines of out that tell what failed.
func failures(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "--- FAIL") || strings.Contains(l, "sinktest.go:") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
