package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/pipeline"
)

// Msg is the record type of the examples: a key and a value.
type Msg struct {
	Key   string
	Value string
}

// access tells the operators how to read and change a Msg.
var access = pipeline.RecordAccess[Msg]{
	Key:       func(m Msg) string { return m.Key },
	WithCount: func(m Msg, n int64) Msg { m.Value = strconv.FormatInt(n, 10); return m },
	Value:     func(m Msg) []byte { return []byte(m.Value) },
	WithKey:   func(m Msg, key []byte) Msg { m.Key = string(key); return m },
	Position:  func(m Msg) string { return "msg " + m.Key },
}

// job returns a job definition reading msgs.
func job(name string, msgs ...Msg) (*flow.Env, flow.Stream[Msg]) {
	env := flow.New(flow.JobName(name), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	return env, flow.From(env, flowtest.NewSource(flowtest.Split(msgs, 1)))
}

// sorted returns what sink committed, by key and then value.
func sorted(sink *flowtest.Sink[Msg]) []Msg {
	out := sink.Committed()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Value < out[j].Value
	})
	return out
}

func ExampleDedupe() {
	env, msgs := job("dedupe-example", Msg{"a", "1"}, Msg{"b", "1"}, Msg{"a", "2"})
	var dropped atomic.Int64
	unique, err := pipeline.Dedupe(msgs, access, pipeline.DedupeConfig{TTL: time.Hour, Dropped: &dropped})
	if err != nil {
		fmt.Println(err)
		return
	}
	sink := flowtest.NewSink[Msg]()
	flow.To(unique, sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sorted(sink), "dropped:", dropped.Load())
	// Output: [{a 1} {b 1}] dropped: 1
}

func ExampleCount() {
	env, msgs := job("count-example", Msg{"a", "x"}, Msg{"b", "y"}, Msg{"a", "z"})
	counts, err := pipeline.Count(msgs, access, pipeline.CountConfig{}, flow.UID("counts-by-key"))
	if err != nil {
		fmt.Println(err)
		return
	}
	sink := flowtest.NewSink[Msg]()
	flow.To(counts, sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sorted(sink))
	// Output: [{a 1} {a 2} {b 1}]
}

func ExampleExtractKey() {
	env, msgs := job("extract-key-example",
		Msg{"m1", `{"user": "ann", "page": "/"}`},
		Msg{"m2", `{"user": 42}`},
		Msg{"m3", `{"page": "/b"}`},
	)
	byUser, failed, err := pipeline.ExtractKey(msgs, access, pipeline.ExtractKeyConfig{JSONField: "user", OnError: flow.DeadLetterOnError})
	if err != nil {
		fmt.Println(err)
		return
	}
	sink, deadLetters := flowtest.NewSink[Msg](), flowtest.NewSink[string]()
	flow.To(byUser, sink)
	flow.To(flow.Map(failed, func(f flow.Failure[Msg]) string { return f.Err.Error() }), deadLetters)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range sorted(sink) {
		fmt.Println(m.Key)
	}
	fmt.Println(deadLetters.Committed())
	// Output:
	// 42
	// ann
	// [record msg m3: extract-key json-field "user": no key in the record value: the JSON object has no field "user"]
}
