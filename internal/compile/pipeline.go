package compile

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline"
)

// The job file's pipeline is built from the operators of package
// pipeline, which are generic over the record type so they can be tested
// with plain structs and run on kafka.Record.

// RecordAccess tells the pipeline operators how to handle a record type.
type RecordAccess[T any] = pipeline.RecordAccess[T]

// PipelineMetrics counts what the pipeline operators did, for status lines.
// The counters are live: after a restart, replayed records count again.
type PipelineMetrics struct {
	// RecordsRead counts records read from the source (set by the run
	// wiring, which sees the source).
	RecordsRead atomic.Int64
	// DuplicatesDropped counts records dedupe dropped.
	DuplicatesDropped atomic.Int64
	// LateRecords counts records window, interval-join, window-join and temporal-join
	// took as too late.
	LateRecords atomic.Int64
}

// counter is the pipeline.Env.Counter of m: the counters m keeps.
func (m *PipelineMetrics) counter(name string) *atomic.Int64 {
	switch {
	case m == nil:
	case name == pipeline.DuplicatesDropped:
		return &m.DuplicatesDropped
	case name == pipeline.LateRecords:
		return &m.LateRecords
	}
	return nil
}

// BuildPipeline applies the job file's pipeline steps to s in order
// (pipeline.Build); an empty pipeline returns s unchanged (pass-through).
// policy is what a stateless step (extract-key) does with a record it
// cannot process; under flow.DeadLetterOnError the returned failure
// streams (one per such step) carry those records and must be connected to
// a sink, otherwise there are none. m may be nil.
//
// eventTime is the expression of a record's event time the source's
// watermarks follow (the job file's event-time section), which window
// steps use; empty: the Kafka record's timestamp.
func BuildPipeline[T any](s flow.Stream[T], steps []jobfile.Step, acc RecordAccess[T], policy flow.ErrorPolicy, m *PipelineMetrics, eventTime string) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	out, failures, err := BuildStream([]flow.Stream[T]{s}, steps, acc, policy, m, eventTime)
	if err != nil {
		return s, nil, err
	}
	return out, failures, nil
}

// BuildStream is BuildPipeline over the inputs of a stream of the named
// form (pipeline.BuildFrom): with several, its first step combines them.
// inputTimes are each input's event-time expression when its sources
// have event times of their own (jobfile.JobFile.StreamTimes).
func BuildStream[T any](ins []flow.Stream[T], steps []jobfile.Step, acc RecordAccess[T], policy flow.ErrorPolicy, m *PipelineMetrics, eventTime string, inputTimes ...string) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	ps := make([]pipeline.Step, len(steps))
	for i, st := range steps {
		ps[i] = pipeline.Step{Op: st.Op, Params: st.AllParams(), UID: st.UID}
	}
	out, failures, err := pipeline.BuildFrom(ins, acc, ps, pipeline.Env{Policy: policy, Counter: m.counter, Time: eventTime, InputTimes: inputTimes})
	if se := (*pipeline.StepError)(nil); errors.As(err, &se) {
		return out, nil, fmt.Errorf("pipeline operator %s (line %d): %w", se.Op, steps[se.Index].Line, se.Err)
	}
	return out, failures, err
}
