package compile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/pipeline"
)

// A sink connector registered here, in a test file, and nowhere else: the
// job file's reader decodes and checks its section from its spec and the
// compiler builds it through its hook, with no line of jobfile or compile
// knowing it (docs/design.md, "Where an extension goes").

// linesSpec is the test connector: each record becomes a line, prefix and
// a column source's text, committed with the checkpoint.
var linesSpec = connector.Spec{
	Name:    "test-lines",
	Summary: "Keeps each result as a line of text, committed with its checkpoint (a test's connector).",
	Sink: &connector.Side{
		Section: "sink.test-lines",
		Fields: []connector.Field{
			{Name: "prefix", Required: true, Doc: "Put in front of every line.", IfMissing: "say what every line starts with, such as prefix: \"out:\""},
			{Name: "value", Kind: connector.SourceValue, Default: "raw", Doc: "Where a line's text comes from."},
			{Name: "max-lines", Kind: connector.IntValue, Default: "1000", Doc: "How many lines an epoch may hold."},
			{Name: "upper", Kind: connector.BoolValue, Default: "false", Doc: "Upper-case the lines."},
		},
		Validate: func(c *connector.Config, chk connector.Check) error {
			var errs []error
			if c.Int("max-lines") < 1 {
				errs = append(errs, connector.Errorf(connector.At("max-lines"), "%s.max-lines must be at least 1", c.Section))
			}
			if err := chk.Source(c.String("value")); err != nil {
				errs = append(errs, connector.Errorf(connector.At("value"), "%s.value: %v", c.Section, err))
			}
			if chk.Delivery == connector.None {
				errs = append(errs, connector.Errorf(connector.At(connector.DeliveryField), "%s cannot run with delivery none", c.Section))
			}
			return errors.Join(errs...)
		},
	},
	Deliveries: []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase, connector.AtLeastOnce},
}

// linesStore is what the test sink committed, and what its hook saw.
type linesStore struct {
	mu        sync.Mutex
	committed []string
	role      connector.Delivery
	job       string
	retracts  func(kafka.Record) bool
}

var lines = &linesStore{}

func init() {
	connector.Register(linesSpec)
	build.Register("test-lines", func(bc build.Context[kafka.Record]) (build.Sink[kafka.Record], error) {
		value, err := bc.Value(bc.Config.String("value"))
		if err != nil {
			return build.Sink[kafka.Record]{}, err
		}
		lines.mu.Lock()
		lines.role, lines.job, lines.retracts = bc.Role, bc.Job, bc.Retracts
		lines.mu.Unlock()
		s := &linesSink{prefix: bc.Config.String("prefix"), upper: bc.Config.Bool("upper"), max: bc.Config.Int("max-lines"), value: value, pending: map[string][]string{}}
		return build.Sink[kafka.Record]{Sink: s}, nil
	})
}

// linesSink holds each epoch's lines until the checkpoint commits.
type linesSink struct {
	prefix  string
	upper   bool
	max     int
	value   func(kafka.Record) (any, error)
	mu      sync.Mutex
	pending map[string][]string // by handle
}

func (s *linesSink) Open(context.Context, flow.SinkContext) (flow.SinkWriter[kafka.Record], error) {
	return &linesWriter{s: s}, nil
}

func (s *linesSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return linesCommitter{s}, nil
}

func (s *linesSink) commit(h []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls, ok := s.pending[string(h)]
	if !ok {
		return nil // committed before
	}
	delete(s.pending, string(h))
	lines.mu.Lock()
	lines.committed = append(lines.committed, ls...)
	lines.mu.Unlock()
	return nil
}

type linesCommitter struct{ s *linesSink }

func (c linesCommitter) Commit(_ context.Context, _ int64, h []byte) error { return c.s.commit(h) }
func (linesCommitter) Close() error                                        { return nil }

type linesWriter struct {
	s   *linesSink
	buf []string
	n   int
}

func (w *linesWriter) Write(_ context.Context, r kafka.Record) error {
	v, err := w.s.value(r)
	if err != nil {
		return err
	}
	if len(w.buf) >= w.s.max {
		return fmt.Errorf("more than %d lines in an epoch", w.s.max)
	}
	l := w.s.prefix + fmt.Sprint(v)
	if w.s.upper {
		l = strings.ToUpper(l)
	}
	w.buf = append(w.buf, l)
	return nil
}

func (w *linesWriter) Prepare(_ context.Context, id int64) ([]byte, error) {
	w.n++
	h := fmt.Sprintf("%p-%d-%d", w, id, w.n)
	w.s.mu.Lock()
	w.s.pending[h] = w.buf
	w.s.mu.Unlock()
	w.buf = nil
	return []byte(h), nil
}

func (w *linesWriter) Commit(_ context.Context, _ int64, h []byte) error { return w.s.commit(h) }
func (w *linesWriter) Close() error                                      { return nil }

func linesJob(brokers, dir, sink string) string {
	return `job: lines
kafka: {brokers: [` + brokers + `]}
source: {topics: [in], bounded: true}
sink:
` + sink + `checkpointing: {interval: 100ms}
state: {dir: ` + dir + `, backend: memory}
`
}

// The section is decoded from the spec with line numbers: a misspelt
// field gets "did you mean", a value of the wrong kind and the spec's own
// rule (Validate) are reported at their lines.
func TestRegisteredSinkSectionIsCheckedFromItsSpec(t *testing.T) {
	for _, tc := range []struct {
		name, sink string
		want       []string
	}{
		{"misspelt", "  test-lines:\n    prefx: \"out:\"\n", []string{
			`j.yaml:6: unknown field "prefx" in sink.test-lines (did you mean "prefix"?)`,
		}},
		{"missing", "  test-lines:\n    upper: true\n", []string{
			`j.yaml:5: sink.test-lines.prefix is missing: say what every line starts with, such as prefix: "out:"`,
		}},
		{"kinds", "  test-lines:\n    prefix: p\n    max-lines: many\n    upper: maybe\n", []string{
			`j.yaml:7: sink.test-lines.max-lines must be a whole number, not "many"`,
			`j.yaml:8: sink.test-lines.upper must be true or false, not "maybe"`,
		}},
		{"hook", "  delivery: none\n  test-lines:\n    prefix: p\n    max-lines: 0\n    value: value.(\n", []string{
			`j.yaml:8: sink.test-lines.max-lines must be at least 1`,
			`j.yaml:9: sink.test-lines.value: "value.(" is not a column source`,
			`j.yaml:5: sink.test-lines cannot run with delivery none`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jobfile.ParseJobFile("j.yaml", []byte(linesJob("b:9092", t.TempDir(), tc.sink)), nil)
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say\n  %s\ngot:\n%v", w, err)
				}
			}
		})
	}
}

// A job file writing to the registered sink runs end to end: read from
// the embedded broker, built by the connector's hook, committed with the
// checkpoints, every record once.
func TestRegisteredSinkRunsFromAJobFile(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "in", 2)
	var kv, want []string
	for i := range 20 {
		kv = append(kv, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"n":%d}`, i))
		want = append(want, fmt.Sprintf("OUT:%d", i))
	}
	c.Produce(t, "in", kv...)
	src := linesJob(c.Addr, t.TempDir(), "  test-lines: {prefix: \"out:\", value: value.n, upper: true}\n")
	jf, err := jobfile.ParseJobFile("j.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := jf.Sink.Kinds(); !slices.Equal(got, []string{"test-lines"}) {
		t.Fatalf("sinks %q, want [test-lines]", got)
	}
	if got := jf.Sink.Connectors["test-lines"].Int("max-lines"); got != 1000 {
		t.Errorf("max-lines %d, want the spec's default 1000", got)
	}
	if uid := jf.Sink.UID("test-lines"); uid != "sink" {
		t.Errorf("uid %q, want sink (the only sink)", uid)
	}
	b, err := Job(jf, kafka.ClientConfig{Brokers: []string{c.Addr}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.CloseSink() }()
	if err := b.Env.Run(kafkatest.Context(t)); err != nil {
		t.Fatal(err)
	}
	lines.mu.Lock()
	got, role, job, retracts := slices.Clone(lines.committed), lines.role, lines.job, lines.retracts
	lines.mu.Unlock()
	// The hook is told a retraction by its row-kind header, so that a
	// sink with a key deletes it (docs/design.md, "Database sinks").
	for kind, want := range map[pipeline.RowKind]bool{pipeline.RowAdd: false, pipeline.RowUpdateBefore: true, pipeline.RowDelete: true} {
		r := kafka.Record{Value: []byte("x")}
		if h := kind.Header(); h != nil {
			r.Headers = []kafka.Header{{Key: pipeline.RowKindHeader, Value: h}}
		}
		if retracts == nil || retracts(r) != want {
			t.Errorf("the hook's Retracts of a %v record: want %v", kind, want)
		}
	}
	if role != connector.TwoPhase || job != "lines" {
		t.Errorf("the hook was given role %q and job %q, want two-phase (exactly-once without a commit point of the sinks: the manifest is) and lines", role, job)
	}
	slices.Sort(got)
	slices.Sort(want)
	kafkatest.CheckExactlyOnce(t, "committed lines", got, want)
}
