package jobfile

import (
	"fmt"
	"strconv"

	"github.com/onceflow/onceflow/pipeline"
)

// A scale-out job runs as tasks: one per partition of each sub-topology's
// input (docs/design.md, "Scale-out"). The pipeline is cut into
// sub-topologies where a keyed step's key is not how its input is
// partitioned; each cut writes into a repartition topic the next
// sub-topology reads.

// Segment is one sub-topology.
type Segment struct {
	Index int
	// topics are the segment's input: the job's source topics, or the
	// repartition topic the segment before writes.
	Topics []string
	Steps  []Step
	// out is the repartition topic the segment writes into, partitioned
	// by outKey ("" for the last segment, which writes to the job's sink).
	Out, OutKey string
}

// repartitionTopic names the internal topic of cut n (from 1).
func repartitionTopic(job string, n int) string {
	return job + "-repartition-" + strconv.Itoa(n)
}

// PlanSegments cuts the job's pipeline into sub-topologies. The source
// topics are partitioned by record.key when the job file says so
// (scale-out.input-keyed) and there is one of them; a keyed step keyed otherwise starts a new
// segment. A step whose Props say it loses keys (it may change what a key
// expression gives) ends any partitioning; one that keeps them (filter,
// route, dedupe) keeps it.
func PlanSegments(jf *JobFile) ([]Segment, error) {
	cur := ""
	// Every partition of every source topic is a task of its own, so input
	// keyed by record.key is partitioned by it only when there is one
	// topic: with two, a key in both would have a state in each topic's
	// task where one instance keeps one (docs/design.md, "Scale-out").
	if jf.ScaleOut.InputKeyed && len(jf.Source.Topics) == 1 {
		cur = pipeline.KeyRecordKey
	}
	seg := Segment{Topics: jf.Source.Topics}
	var segs []Segment
	for _, st := range jf.Pipeline {
		pr, ok := st.props()
		if !ok {
			return nil, &planError{path: jf.Path, line: st.Line, msg: fmt.Sprintf("unknown operator %q", st.Op)}
		}
		if pr.Keyed {
			key := pr.Key
			if key != cur {
				for _, prev := range seg.Steps {
					if prevProps, _ := prev.props(); prevProps.Routes {
						return nil, &planError{path: jf.Path, line: prev.Line, msg: fmt.Sprintf("with scale-out, a %s step that sets records' topics must come after the last keyed step that needs a repartition (here %s at line %d, keyed by %s): move it below", prev.Op, st.Op, st.Line, key)}
					}
				}
				seg.Out, seg.OutKey = repartitionTopic(jf.Job, len(segs)+1), key
				segs = append(segs, seg)
				seg = Segment{Index: len(segs), Topics: []string{seg.Out}}
				cur = key
			}
		}
		seg.Steps = append(seg.Steps, st)
		if pr.Keys != pipeline.KeysKept {
			cur = ""
		}
	}
	return append(segs, seg), nil
}

// planError is a pipeline scale-out cannot cut, at a line of the file.
type planError struct {
	path string
	line int
	msg  string
}

func (e *planError) Error() string { return fmt.Sprintf("%s:%d: %s", e.path, e.line, e.msg) }

// validateScaleOut checks what a scale-out job needs.
func (d *decoder) validateScaleOut(jf *JobFile) {
	so := jf.ScaleOut
	line := d.at("scale-out")
	if !so.Enabled {
		if line != 0 && (so.Instance != "" || so.RepartitionPartitions != 0 || d.at("scale-out.input-keyed") != 0 || so.SessionTimeout != 0) {
			d.errorf(line, "scale-out settings are given but scale-out.enabled is not true: set enabled: true, or remove the section")
		}
		return
	}
	if jf.State.Checkpoints == "" {
		d.errorf(line, "scale-out needs state.checkpoints: the instances share their tasks' checkpoints there (s3://bucket/prefix, or a directory every instance mounts), while state.dir is each instance's own")
	}
	if jf.Source.TopicRegex != "" {
		d.errorf(d.at("source.topic-regex"), "scale-out reads source.topics; source.topic-regex is not supported with it yet: list the topics")
	}
	if jf.Source.Bounded {
		d.errorf(d.at("source.bounded"), "source.bounded does not go with scale-out: the instances run as a service; remove it")
	}
	if jf.Source.Parallelism > 0 {
		d.errorf(d.at("source.parallelism"), "source.parallelism does not apply with scale-out: every partition is a task of its own; remove it")
	}
	if !jf.Sink.HasTopic() || jf.Sink.External() {
		d.errorf(d.at("sink"), "scale-out writes to Kafka only for now: set sink.topic and no database or Redis sink")
	}
	if jf.Sink.Delivery != "" && jf.Sink.Delivery != DeliveryExactlyOnce {
		d.errorf(d.at("sink.delivery"), "scale-out needs sink.delivery exactly-once: each task's transaction is its commit point and fences the instance that had its partition before")
	}
	if so.Instance != "" && !ValidName(so.Instance) {
		d.errorf(d.at("scale-out.instance"), "scale-out.instance %q may only use letters, digits, '.', '_' and '-' (it names the instance's directory under state.dir)", so.Instance)
	}
	if so.RepartitionPartitions < 0 {
		d.errorf(d.at("scale-out.repartition-partitions"), "scale-out.repartition-partitions must not be negative (0: the largest input topic's count)")
	}
	if so.SessionTimeout < 0 {
		d.errorf(d.at("scale-out.session-timeout"), "scale-out.session-timeout must not be negative")
	}
	if _, err := PlanSegments(jf); err != nil {
		if pe, ok := err.(*planError); ok {
			d.errorf(pe.line, "%s", pe.msg)
		} else {
			d.errorf(line, "%v", err)
		}
	}
}
