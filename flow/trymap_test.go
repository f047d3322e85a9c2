package flow_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

func parse(s string) (int, error) { return strconv.Atoi(s) }

func TestTryMapPolicies(t *testing.T) {
	var in []string
	for i := 0; i < 1000; i++ {
		if i%97 == 0 {
			in = append(in, "poison-"+strconv.Itoa(i))
		} else {
			in = append(in, strconv.Itoa(i))
		}
	}
	poison := (1000 + 96) / 97
	run := func(p flow.ErrorPolicy) (*flow.Job, *flowtest.Sink[int], *flowtest.Sink[flow.Failure[string]], error) {
		env := flow.New(quiet())
		good, bad := flow.TryMap(flow.From(env, flowtest.NewSource(flowtest.Split(in, 2))), parse, p)
		ok := flowtest.NewSink[int]()
		dead := flowtest.NewSink[flow.Failure[string]]()
		flow.To(good, ok)
		if p == flow.DeadLetterOnError {
			flow.To(bad, dead)
		}
		job, err := env.Start(context.Background())
		if err != nil {
			return nil, nil, nil, err
		}
		return job, ok, dead, job.Wait()
	}

	job, ok, _, err := run(flow.SkipOnError)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ok.Committed()); got != 1000-poison {
		t.Fatalf("skip: %d records, want %d", got, 1000-poison)
	}
	if got := job.Stats().RecordsSkipped; got != int64(poison) {
		t.Fatalf("skip: counted %d, want %d", got, poison)
	}

	job, ok, dead, err := run(flow.DeadLetterOnError)
	if err != nil {
		t.Fatal(err)
	}
	if len(ok.Committed()) != 1000-poison || len(dead.Committed()) != poison || job.Stats().RecordsDeadLettered != int64(poison) {
		t.Fatalf("dead-letter: %d ok, %d dead, stats %+v", len(ok.Committed()), len(dead.Committed()), job.Stats())
	}
	for _, f := range dead.Committed() {
		if !strings.HasPrefix(f.Record, "poison-") || f.Err == nil {
			t.Fatalf("dead letter %+v", f)
		}
	}

	_, _, _, err = run(flow.FailOnError)
	var te *flow.TaskError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "record poison-") || !strings.Contains(err.Error(), "error policy fail") {
		t.Fatalf("fail: want a task error naming the record and the policy, got %v", err)
	}
}
