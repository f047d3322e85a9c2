package jobfile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/internal/suggest"
	"github.com/onceflow/onceflow/pipeline"
)

// The decoder of the pipeline section. It knows no operator: each step is
// decoded, given its defaults and checked from its operator's spec
// (pipeline.Lookup), so an operator is added in package pipeline alone.

func (d *decoder) decodePipeline(path string, v *yaml.Node, jf *JobFile) {
	jf.Pipeline = append(jf.Pipeline, d.decodeSteps(path, v)...)
}

// decodeSteps decodes a list of steps at path (the pipeline section, or a
// named stream's steps).
func (d *decoder) decodeSteps(path string, v *yaml.Node) (steps []Step) {
	if isNull(v) {
		return nil // "pipeline:" with nothing: pass-through
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of operators (- dedupe: {...}), not %s", path, describe(v))
		return nil
	}
	names := pipeline.Names()
	for i, item := range v.Content {
		item = resolve(item)
		where := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode || len(item.Content) != 2 {
			d.errorf(item.Line, "%s must name one operator, such as \"- count: {key: record.key}\"; supported operators: %s", where, strings.Join(names, ", "))
			continue
		}
		k, params := resolve(item.Content[0]), resolve(item.Content[1])
		spec, ok := pipeline.Lookup(k.Value)
		if !ok {
			d.errorf(k.Line, "%s: unknown operator %q%s; supported operators: %s", where, k.Value, suggest.Suggest(k.Value, names), strings.Join(names, ", "))
			continue
		}
		steps = append(steps, d.decodeStep(where+"."+spec.Name, k.Line, params, spec))
	}
	return steps
}

// decodeStep decodes the fields of a step of spec's operator at line
// (params may be empty: "- count:"), then checks them with the spec
// (pipeline.Spec.Check, defaults applied). Problems with a field are
// reported at its line, others (a missing field) at the step's.
func (d *decoder) decodeStep(where string, line int, params *yaml.Node, spec pipeline.Spec) Step {
	st := Step{Op: spec.Name, Line: line, Params: pipeline.Params{}}
	failed := map[string]bool{} // fields whose value was reported as wrong
	fields := map[string]field{
		"uid": func(p string, v *yaml.Node) {
			before := len(d.errs)
			d.str(&st.UID)(p, v)
			if len(d.errs) == before && st.UID == "" {
				d.errorf(v.Line, "%s is empty: give it a value or remove it for the default id", p)
			}
			st.UIDSet = true
		},
	}
	for _, f := range spec.Fields {
		fields[f.Name] = func(p string, v *yaml.Node) {
			if val, ok := d.value(p, v, f); ok {
				st.Params[f.Name] = val
			} else {
				failed[f.Name] = true
			}
		}
	}
	if !isNull(params) {
		d.mapping(where, params, fields)
	}
	if len(failed) > 0 {
		// The step's own check would see the failed fields as absent
		// and report them missing ("map.value is missing, and so are
		// set, ..." for a set that names an unknown function): the
		// user fixes the reported field, and validate checks the rest.
		return st
	}
	for _, err := range splitJoined(spec.Check(spec.WithDefaults(st.Params))) {
		var fe *pipeline.FieldError
		if !errors.As(err, &fe) {
			d.errorf(line, "%s: %v", where, err)
			continue
		}
		at := d.at(where + "." + fe.Field)
		if at == 0 {
			at = line
		}
		d.errorf(at, "%s.%v", where, fe)
	}
	return st
}

// value decodes a step's field of type t.
func (d *decoder) value(path string, v *yaml.Node, f pipeline.Field) (any, bool) {
	t := f.Type
	before := len(d.errs)
	var val any
	switch t {
	case pipeline.Duration:
		var dur time.Duration
		d.duration(&dur)(path, v)
		val = dur
	case pipeline.Int:
		s, ok := d.scalar(path, v)
		if !ok {
			return nil, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			d.errorf(v.Line, "%s: %q is not a whole number: write one such as %s", path, s, f.Example)
			return nil, false
		}
		val = n
	case pipeline.Bool:
		s, ok := d.scalar(path, v)
		if !ok {
			return nil, false
		}
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			d.errorf(v.Line, "%s: %q is not true or false: write %s", path, s, f.Example)
			return nil, false
		}
		val = b
	case pipeline.StringList:
		var l []string
		d.strList(&l)(path, v)
		val = l
	case pipeline.ExprMap, pipeline.StringMap:
		m := map[string]string{}
		fields := map[string]field{}
		if v.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(v.Content); i += 2 {
				name := resolve(v.Content[i]).Value
				fields[name] = func(p string, x *yaml.Node) {
					var s string
					d.str(&s)(p, x)
					if t == pipeline.ExprMap && s != "" {
						if _, err := pipeline.CompileExpr(s, pipeline.AnyResult); err != nil {
							d.errorf(x.Line, "%s: %v", p, err)
						}
					}
					m[name] = s
				}
			}
		}
		before := len(d.errs)
		d.mapping(path, v, fields)
		if len(d.errs) > before {
			return nil, false
		}
		val = m
	case pipeline.OrderedMap:
		// The entries in the order written: mapping calls the fields'
		// handlers in the file's order.
		var m []pipeline.Named
		fields := map[string]field{}
		if v.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(v.Content); i += 2 {
				name := resolve(v.Content[i]).Value
				fields[name] = func(p string, x *yaml.Node) {
					var s string
					d.str(&s)(p, x)
					m = append(m, pipeline.Named{Name: name, Text: s})
				}
			}
		}
		before := len(d.errs)
		d.mapping(path, v, fields)
		if len(d.errs) > before {
			return nil, false
		}
		if m == nil {
			m = []pipeline.Named{}
		}
		val = m
	case pipeline.Cases:
		var cases []pipeline.Case
		if v.Kind != yaml.SequenceNode {
			d.errorf(v.Line, "%s must be a list of cases ({if: condition, topic: name}), not %s", path, describe(v))
			return nil, false
		}
		before := len(d.errs)
		for i, item := range v.Content {
			var c pipeline.Case
			cp := fmt.Sprintf("%s[%d]", path, i)
			caseBefore := len(d.errs)
			d.mapping(cp, item, map[string]field{
				"if": func(p string, x *yaml.Node) {
					d.str(&c.If)(p, x)
					if _, err := pipeline.CompileExpr(c.If, pipeline.BoolResult); c.If != "" && err != nil {
						d.errorf(x.Line, "%s: %v", p, err)
					}
				},
				"topic": d.str(&c.Topic),
			})
			if c.If == "" && len(d.errs) == caseBefore {
				d.errorf(resolve(item).Line, "%s.if is missing: give the condition of the case, such as if: 'value.amount > 1000'", cp)
			}
			if c.Topic == "" && len(d.errs) == caseBefore {
				d.errorf(resolve(item).Line, "%s.topic is missing: name the topic the case's records go to", cp)
			}
			cases = append(cases, c)
		}
		if len(d.errs) > before {
			return nil, false
		}
		val = cases
	default: // pipeline.String, KeyExpr, Expression, Condition: text
		var s string
		d.str(&s)(path, v)
		val = s
	}
	if len(d.errs) > before {
		return nil, false
	}
	if err := f.Check(val); err != nil {
		d.errorf(v.Line, "%s: %v", path, err)
		return nil, false
	}
	return val, true
}

// stateful tells whether a step of operator op keeps keyed state.
func stateful(op string) bool {
	spec, ok := pipeline.Lookup(op)
	return ok && spec.Stateful
}

// PositionalUID is the id a step had by default before pipeline.IDs: the
// operator and its position in the pipeline (from 0). Checkpoints taken
// then name the steps' state by it.
func PositionalUID(st Step, position int) string {
	return fmt.Sprintf("%s-%d", st.Op, position)
}

// reservedUID tells whether uid is one the run wiring gives the job's own
// operators, which a pipeline step cannot use, and whose it is.
func reservedUID(uid string) (what string, ok bool) {
	switch {
	case uid == "source":
		return "the Kafka source", true
	case uid == "sink":
		return "the Kafka sink", true
	case uid == "dead-letters", strings.HasPrefix(uid, "dead-letters-"):
		return "a dead-letter writer", true
	}
	return "", false
}

// Routes reports whether a pipeline step sets records' topics (route,
// map with topic, window with late-topic): the Kafka sink then writes each record to its own
// topic, and the records no step routed to sink.topic.
func (jf *JobFile) Routes() bool {
	for _, st := range jf.Pipeline {
		if pr, _ := st.props(); pr.Routes {
			return true
		}
	}
	return false
}

// SinkTopic is the Kafka sink's SinkConfig.Topic: sink.topic, or none
// when steps route records (toSink then sets each record's).
func SinkTopic(jf *JobFile) string {
	if jf.Routes() {
		return ""
	}
	return jf.Sink.Topic
}

// OutputTopics are the topics the job writes to that are known before it
// runs, each under the name of where the job file sets it (for the errors
// of ping).
func (jf *JobFile) OutputTopics() map[string]string {
	outputs := map[string]string{}
	if jf.Sink.Topic != "" {
		outputs["sink.topic"] = jf.Sink.Topic
	}
	if jf.Errors.DeadLetterTopic != "" {
		outputs["errors.dead-letter-topic"] = jf.Errors.DeadLetterTopic
	}
	for _, t := range jf.RouteTopics() {
		outputs["pipeline route topic "+t] = t
	}
	return outputs
}

// RouteTopics are the topics steps route to that are known before the
// job runs, their Props' StaticTopics: route's cases and default, a
// window's late-topic (map's topic is an expression, known only per
// record).
func (jf *JobFile) RouteTopics() []string {
	var out []string
	seen := map[string]bool{}
	for _, st := range jf.Pipeline {
		pr, _ := st.props()
		for _, t := range pr.StaticTopics {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}
