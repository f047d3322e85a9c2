package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// TestShareSteps: streams that read the same inputs and begin with the
// same steps share them; a stream left without a step of its own is read
// through the one it would read, unless a stream would then read one
// stream twice.
func TestShareSteps(t *testing.T) {
	st := func(names ...string) []renderedStep {
		var out []renderedStep
		for _, n := range names {
			out = append(out, renderedStep{lines: []string{"      - " + n}, at: make([]ast.Pos, 1)})
		}
		return out
	}
	src := func(n string) []streamInput { return []streamInput{{source: n}} }
	of := func(ss ...*namedStream) []streamInput {
		var in []streamInput
		for _, s := range ss {
			in = append(in, streamInput{stream: s})
		}
		return in
	}
	show := func(streams []*namedStream, ends ...*namedStream) string {
		var b strings.Builder
		for _, s := range streams {
			var from, steps []string
			for _, in := range s.from {
				from = append(from, in.name())
			}
			for _, x := range s.steps {
				steps = append(steps, strings.TrimPrefix(x.lines[0], "      - "))
			}
			fmt.Fprintf(&b, "%s<-%s:%s; ", s.name, strings.Join(from, ","), strings.Join(steps, ","))
		}
		for _, e := range ends {
			fmt.Fprintf(&b, "end %s; ", e.resolve().name)
		}
		return strings.TrimSpace(b.String())
	}
	namer := func(streams ...*namedStream) func(string) string {
		used := map[string]bool{}
		for _, s := range streams {
			used[s.name] = true
		}
		return func(n string) string {
			for i := 2; used[n]; i++ {
				n = fmt.Sprintf("%s_%d", strings.TrimSuffix(n, fmt.Sprintf("_%d", i-1)), i)
			}
			used[n] = true
			return n
		}
	}

	t.Run("prefix", func(t *testing.T) { // q5: the same window, then two ways on
		l := &namedStream{name: "l", from: src("k"), steps: st("select", "window", "select a")}
		r := &namedStream{name: "r", from: src("k"), steps: st("select", "window", "select b", "aggregate")}
		j := &namedStream{name: "j", from: of(l, r), steps: st("join")}
		got := show(shareSteps([]*namedStream{l, r, j}, namer(l, r, j)), j)
		want := "l<-k:select,window; l_after<-l:select a; r<-l:select b,aggregate; j<-l_after,r:join; end j;"
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("equal streams to two sinks", func(t *testing.T) {
		a := &namedStream{name: "a", from: src("k"), steps: st("select eu")}
		b := &namedStream{name: "b", from: src("k"), steps: st("select eu")}
		c := &namedStream{name: "c", from: src("k"), steps: st("select us")}
		got := show(shareSteps([]*namedStream{a, b, c}, namer(a, b, c)), a, b, c)
		want := "a<-k:select eu; c<-k:select us; end a; end a; end c;" // b is read as a
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("one a prefix of the other", func(t *testing.T) {
		a := &namedStream{name: "a", from: src("k"), steps: st("select", "window")}
		b := &namedStream{name: "b", from: src("k"), steps: st("select", "window", "select x")}
		got := show(shareSteps([]*namedStream{a, b}, namer(a, b)), a, b)
		want := "a<-k:select,window; b<-a:select x; end a; end b;"
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("union of equal branches", func(t *testing.T) {
		p1 := &namedStream{name: "p1", from: src("k"), steps: st("select", "window")}
		p2 := &namedStream{name: "p2", from: src("k"), steps: st("select", "window")}
		u := &namedStream{name: "u", from: of(p1, p2), steps: st("union")}
		got := show(shareSteps([]*namedStream{p1, p2, u}, namer(p1, p2, u)), u)
		want := "p1<-k:select; p1_after<-p1:window; p2<-p1:window; u<-p1_after,p2:union; end u;" // all but the last step
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("different inputs", func(t *testing.T) {
		a := &namedStream{name: "a", from: src("k"), steps: st("select")}
		b := &namedStream{name: "b", from: src("m"), steps: st("select")}
		got := show(shareSteps([]*namedStream{a, b}, namer(a, b)), a, b)
		want := "a<-k:select; b<-m:select; end a; end b;"
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}
