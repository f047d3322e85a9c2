package planner

import (
	"slices"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Sub-plan reuse (docs/design.md, "SQL"): two streams of the named form
// that read the same inputs and begin with the same steps compute the
// same records twice (Nexmark q5 counts the bids of each hopping window
// once for the auctions' side and again for their maximum). The planner
// runs those steps once, in a stream of their own both read, as Flink's
// planner reuses a sub-plan; SET 'table.optimizer.reuse-sub-plan-enabled'
// = 'false' turns it off, as in Flink.

// namedStream is a stream of the named form before it is written: its
// inputs and its steps as the job file's lines.
type namedStream struct {
	name  string
	from  []streamInput
	steps []renderedStep
	at    ast.Pos
	// alias, when set, is the stream that computes this one's records
	// (it had no step of its own left): its readers read alias instead.
	alias *namedStream
}

// streamInput is a source's stream or another stream.
type streamInput struct {
	source string
	stream *namedStream
}

func (in streamInput) name() string {
	if in.stream != nil {
		return in.stream.resolve().name
	}
	return in.source
}

func (in streamInput) same(o streamInput) bool {
	if in.stream != nil || o.stream != nil {
		return in.stream != nil && o.stream != nil && in.stream.resolve() == o.stream.resolve()
	}
	return in.source == o.source
}

// resolve is the stream that computes ns's records.
func (ns *namedStream) resolve() *namedStream {
	for ns.alias != nil {
		ns = ns.alias
	}
	return ns
}

// renderedStep is a step's lines in the job file (at a stream's step
// depth) and the place in the script each comes from.
type renderedStep struct {
	lines []string
	at    []ast.Pos
}

func renderStep(s step) renderedStep {
	w := newYAMLWriter()
	s.write(w, 3)
	text := strings.TrimSuffix(w.b.String(), "\n")
	r := renderedStep{lines: strings.Split(text, "\n")}
	for i := range r.lines {
		r.at = append(r.at, w.origin[i+1])
	}
	return r
}

func (r renderedStep) same(o renderedStep) bool { return slices.Equal(r.lines, o.lines) }

func (ns *namedStream) write(w *yamlWriter) {
	from := make([]string, len(ns.from))
	for i, in := range ns.from {
		from[i] = in.name()
	}
	w.linef(ns.at, 1, "%s:", ns.name)
	w.linef(ns.at, 2, "from: %s", qlist(from))
	if len(ns.steps) > 0 {
		w.linef(ns.at, 2, "steps:")
		for _, s := range ns.steps {
			for i, l := range s.lines {
				w.linef(s.at[i], 0, "%s", l)
			}
		}
	}
}

// shareSteps rewrites streams (in the order they are written, each after
// the streams it reads) so that no two read the same inputs and begin
// with the same step. The steps two share move into a stream of their
// own, which takes the first one's name, so that the shared steps keep
// the uids they had (the first one's other steps read it under the name
// with _after); a stream left with no step of its own becomes an alias
// of the one it would read. name hands out unused names.
func shareSteps(streams []*namedStream, name func(string) string) []*namedStream {
	readers := map[*namedStream][]*namedStream{}
	for _, s := range streams {
		for _, in := range s.from {
			if in.stream != nil {
				readers[in.stream] = append(readers[in.stream], s)
			}
		}
	}
	// twice tells whether making sj an alias of to would have a stream
	// read to twice (a union or self-join of two equal streams): sj then
	// keeps its last step.
	twice := func(sj, to *namedStream) bool {
		for _, r := range readers[sj] {
			for _, in := range r.from {
				if in.stream != nil && in.stream != sj && in.stream.resolve() == to {
					return true
				}
			}
		}
		return false
	}
	for j := 0; j < len(streams); j++ {
		sj := streams[j]
		for i := 0; i < j; i++ {
			si := streams[i]
			if si.alias != nil || !sameInputs(si.from, sj.from) {
				continue
			}
			n := 0
			for n < len(si.steps) && n < len(sj.steps) && si.steps[n].same(sj.steps[n]) {
				n++
			}
			if n == len(sj.steps) && n == len(si.steps) && twice(sj, si) {
				n-- // sj would be si itself
			}
			if n == 0 {
				continue
			}
			shared := si
			if n < len(si.steps) {
				// si's readers keep reading si, which now holds only its
				// other steps and reads the shared ones.
				shared = &namedStream{name: si.name, from: si.from, steps: si.steps[:n], at: si.at}
				si.name, si.from, si.steps = name(si.name+"_after"), []streamInput{{stream: shared}}, si.steps[n:]
				streams = append(streams[:i], append([]*namedStream{shared}, streams[i:]...)...)
				j++
			}
			sj.from, sj.steps = []streamInput{{stream: shared}}, sj.steps[n:]
			if len(sj.steps) == 0 {
				sj.alias = shared
				streams = append(streams[:j], streams[j+1:]...)
				j--
			}
			break
		}
	}
	return streams
}

func sameInputs(a, b []streamInput) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].same(b[i]) {
			return false
		}
	}
	return true
}
