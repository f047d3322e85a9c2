package plan

import (
	"errors"
	"strings"
	"testing"
)

// chain builds a linear logical plan: a source of topics, then ops, then a
// sink.
func chain(inputKeyed bool, topics []string, ops ...Node) *Logical {
	l := &Logical{Job: "j", InputKeyed: inputKeyed}
	l.Nodes = append(l.Nodes, &Node{Kind: Source, Name: "kafka", UID: "source", Topics: topics})
	for _, o := range ops {
		o := o
		o.Kind, o.ID, o.Inputs = Op, len(l.Nodes), []int{len(l.Nodes) - 1}
		l.Nodes = append(l.Nodes, &o)
	}
	l.Nodes = append(l.Nodes, &Node{Kind: Sink, Name: "kafka topic out", UID: "sink", ID: len(l.Nodes), Inputs: []int{len(l.Nodes) - 1}})
	return l
}

var (
	filter      = Node{Op: "filter", Name: "filter", UID: "f", Props: Props{Keys: KeysKept}}
	keyBy       = Node{Op: "key-by", Name: "key-by", UID: "kb", Props: Props{Keys: KeysLost}}
	dedupeByKey = Node{Op: "dedupe", Name: "dedupe", UID: "d", Props: Props{Keyed: true, Key: "record.key", Keys: KeysKept, StateBound: "ttl 1h"}}
	countByUser = Node{Op: "count", Name: "count", UID: "c", Props: Props{Keyed: true, Key: "value.user"}}
	route       = Node{Op: "route", Name: "route", UID: "r", Line: 7, Props: Props{Keys: KeysKept, Routes: true}}
)

func subs(t *testing.T, l *Logical, scaleOut bool) string {
	t.Helper()
	p, err := Plan(l, Target{ScaleOut: scaleOut})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range p.Subs {
		var names []string
		for _, id := range s.Nodes {
			names = append(names, l.Nodes[id].UID)
		}
		d := strings.Join(s.Inputs, ",") + ": " + strings.Join(names, " ")
		if s.Out != "" {
			d += " -> " + s.Out + " by " + s.OutKey
		}
		out = append(out, d)
	}
	return strings.Join(out, " | ")
}

func TestPlanCuts(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    *Logical
		want string
	}{
		{"a keyed step on keyed input stays", chain(true, []string{"in"}, filter, dedupeByKey),
			"in: source f d sink"},
		{"input not keyed", chain(false, []string{"in"}, dedupeByKey),
			"in: source -> j-repartition-1 by record.key | j-repartition-1: d sink"},
		{"two topics are not co-partitioned", chain(true, []string{"a", "b"}, dedupeByKey),
			"a,b: source -> j-repartition-1 by record.key | j-repartition-1: d sink"},
		{"a key lost before", chain(true, []string{"in"}, keyBy, dedupeByKey),
			"in: source kb -> j-repartition-1 by record.key | j-repartition-1: d sink"},
		{"two keys", chain(true, []string{"in"}, dedupeByKey, countByUser),
			"in: source d -> j-repartition-1 by value.user | j-repartition-1: c sink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := subs(t, tc.l, true); got != tc.want {
				t.Errorf("scale-out plan\n got %s\nwant %s", got, tc.want)
			}
			// One instance never cuts: its keyed exchange partitions.
			if got := subs(t, tc.l, false); strings.Contains(got, "|") {
				t.Errorf("one instance cut the job: %s", got)
			}
		})
	}
}

func TestPlanRefusesRoutingBeforeACut(t *testing.T) {
	_, err := Plan(chain(true, []string{"in"}, route, countByUser), Target{ScaleOut: true})
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 7 || !strings.Contains(pe.Msg, "route step that sets records' topics must come after") {
		t.Fatalf("error %v, want a refusal at line 7", err)
	}
	if _, err := Plan(chain(true, []string{"in"}, route, countByUser), Target{}); err != nil {
		t.Errorf("one instance: %v", err)
	}
}

func TestExplainSaysWhatStateIsBounded(t *testing.T) {
	p, err := Plan(chain(true, []string{"in"}, dedupeByKey, countByUser), Target{ScaleOut: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Explain(&b, p, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"sub-topology 0, a task per partition of in:",
		"→ dedupe [d], state by record.key, freed by ttl 1h",
		"→ repartition topic j-repartition-1, by value.user",
		"sub-topology 1, a task per partition of j-repartition-1:",
		"→ count [c], state by value.user, unbounded: nothing frees it",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, b.String())
		}
	}
	if ub := p.Unbounded(); len(ub) != 1 || ub[0].UID != "c" {
		t.Errorf("Unbounded = %v, want the count", ub)
	}
}

func TestStateFileStem(t *testing.T) {
	if got := StateFileStem("count:user id/x"); got != "count_user_id_x" {
		t.Errorf("StateFileStem = %q", got)
	}
}
