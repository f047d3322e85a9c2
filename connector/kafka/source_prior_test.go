package kafka

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// PriorProgress reports the checkpoint offsets a job committed to its
// source's group, and nothing for a group that does not exist or holds
// only other tools' or jobs' offsets.
func TestPriorProgress(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"in": 3, "other": 1})
	commit := func(group string, offs ...kadm.Offset) {
		t.Helper()
		o := kadm.Offsets{}
		for _, of := range offs {
			of.LeaderEpoch = -1
			o.Add(of)
		}
		resp, err := c.Admin(t).CommitOffsets(kafkatest.Context(t), group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	commit("onceflow-foreign", kadm.Offset{Topic: "in", Partition: 0, At: 5},
		kadm.Offset{Topic: "in", Partition: 1, At: 5, Metadata: "onceflow:orders2:9"},
		kadm.Offset{Topic: "in", Partition: 2, At: 5, Metadata: "onceflow:orders:x"})
	commit("onceflow-orders",
		kadm.Offset{Topic: "in", Partition: 0, At: 7, Metadata: "onceflow:orders:41"},
		kadm.Offset{Topic: "in", Partition: 1, At: 3, Metadata: "onceflow:orders:40"},
		kadm.Offset{Topic: "other", Partition: 0, At: 1, Metadata: "onceflow:other-job:99"})

	tests := []struct {
		name, group, job string
		want             []string
	}{
		{"the job's progress", "", "orders", []string{`group "onceflow-orders" has offsets committed by checkpoint 41 of job "orders"`}},
		{"no group", "", "fresh", nil},
		{"another job's and a tool's offsets", "onceflow-foreign", "orders", nil},
		{"a configured group", "onceflow-orders", "other-job", []string{`group "onceflow-orders" has offsets committed by checkpoint 99 of job "other-job"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Group: tt.group})
			pr, ok := any(src).(flow.PriorProgressReporter)
			if !ok {
				t.Fatal("*Source does not implement flow.PriorProgressReporter")
			}
			got, err := pr.PriorProgress(kafkatest.Context(t), tt.job)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("PriorProgress(%q) = %q, want %q", tt.job, got, tt.want)
			}
		})
	}

	// An unreachable cluster is an error, not "no progress".
	src := newSource(t, SourceConfig{Client: ClientConfig{Brokers: []string{"127.0.0.1:1"}}, Topics: []string{"in"}})
	ctx, cancel := context.WithTimeout(kafkatest.Context(t), 2*time.Second)
	defer cancel()
	pr, ok := any(src).(flow.PriorProgressReporter)
	if !ok {
		t.Fatal("*Source does not implement flow.PriorProgressReporter")
	}
	if got, err := pr.PriorProgress(ctx, "orders"); err == nil {
		t.Errorf("PriorProgress without a broker = %q, nil; want an error", got)
	}
}
