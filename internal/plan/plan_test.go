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

// graph builds a named-form plan: sources, then ops and sinks, each
// reading the nodes named in in.
func graph(nodes ...Node) *Logical {
	l := &Logical{Job: "j", InputKeyed: true, Graph: true}
	byUID := map[string]int{}
	for _, n := range nodes {
		n := n
		n.ID = len(l.Nodes)
		if n.Kind == Source {
			n.Topics = []string{n.UID}
		}
		for _, in := range strings.Fields(n.Name) {
			n.Inputs = append(n.Inputs, byUID[in])
		}
		byUID[n.UID] = n.ID
		l.Nodes = append(l.Nodes, &n)
	}
	return l
}

// TestPlanCutsAGraphAtAJoin: orders re-keyed by their customer meet the
// customers (keyed by id) in sub-topology 1; each side of the join is an
// edge of its own into the one repartition topic, with its key, and what
// follows the join runs there too. A second join by another key cuts
// again; a join whose inputs are already partitioned by its keys is not
// cut.
func TestPlanCutsAGraphAtAJoin(t *testing.T) {
	src := func(uid string) Node { return Node{Kind: Source, UID: uid} }
	op := func(uid, in string, p Props) Node {
		return Node{Kind: Op, UID: uid, Name: in, Op: uid, Props: p, Line: 9}
	}
	sink := func(in string) Node { return Node{Kind: Sink, UID: "sink", Name: in} }
	join := Props{Keyed: true, Key: "value.customer", RightKey: "record.key", Keys: KeysLost}
	for _, tc := range []struct {
		name  string
		l     *Logical
		want  string
		edges []string
	}{
		{"a re-keyed join", graph(src("orders"), src("customers"), op("paid", "orders", Props{Keys: KeysKept}),
			op("join", "paid customers", join), op("map", "join", Props{}), sink("map")),
			"orders,customers: orders customers paid -> j-repartition-1 by value.customer | record.key | j-repartition-1: join map sink",
			[]string{"paid>join#0 by value.customer", "customers>join#1 by record.key"}},
		{"co-partitioned already", graph(src("orders"), src("customers"),
			op("join", "orders customers", Props{Keyed: true, Key: "record.key", Keys: KeysLost}), sink("join")),
			"orders,customers: orders customers join sink", nil},
		{"two joins by two keys", graph(src("orders"), src("customers"), src("items"),
			op("join", "orders customers", join),
			op("join2", "join items", Props{Keyed: true, Key: "value.left.item", RightKey: "record.key", Keys: KeysLost}), sink("join2")),
			"orders,customers,items: orders customers items -> j-repartition-1 by value.customer | record.key | j-repartition-1: join -> j-repartition-2 by value.left.item | record.key | j-repartition-2: join2 sink",
			[]string{"orders>join#0 by value.customer", "customers>join#1 by record.key", "items>join2#1 by record.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := subs(t, tc.l, true); got != tc.want {
				t.Errorf("scale-out plan\n got %s\nwant %s", got, tc.want)
			}
			p, err := Plan(tc.l, Target{ScaleOut: true})
			if err != nil {
				t.Fatal(err)
			}
			var edges []string
			for _, e := range p.Subs[0].Edges {
				edges = append(edges, tc.l.Nodes[e.From].UID+">"+e.Tag+" by "+e.Key)
			}
			if strings.Join(edges, ", ") != strings.Join(tc.edges, ", ") {
				t.Errorf("edges of sub-topology 0: %v, want %v", edges, tc.edges)
			}
			if !p.Subs[0].CoPartitioned || p.Subs[0].Anchor != "orders" {
				t.Errorf("sub-topology 0 is not co-partitioned on orders: %+v", p.Subs[0])
			}
		})
	}
}

// TestPlanCarriesAStreamAcrossCuts: a stream read after more than one
// cut, or by a sink after the last, is written into each repartition
// topic on the way (a forward edge from the second on); a routing step
// before a cut is refused at its line.
func TestPlanCarriesAStreamAcrossCuts(t *testing.T) {
	join := Props{Keyed: true, Key: "value.customer", RightKey: "record.key", Keys: KeysLost}
	src := func(uid string) Node { return Node{Kind: Source, UID: uid} }
	l := graph(src("orders"), src("customers"), src("items"),
		Node{Kind: Op, UID: "join", Op: "join", Name: "orders customers", Props: join},
		Node{Kind: Op, UID: "count", Op: "count", Name: "join", Props: Props{Keyed: true, Key: "value.left.item"}},
		Node{Kind: Op, UID: "join2", Op: "join", Name: "count items", Props: Props{Keyed: true, Key: "value.item", RightKey: "record.key", Keys: KeysLost}},
		Node{Kind: Op, UID: "u", Op: "union", Name: "join2 orders", Props: Props{Keys: KeysKept}},
		Node{Kind: Sink, UID: "sink", Name: "u"})
	want := "orders,customers,items: orders customers items -> j-repartition-1 by value.customer | record.key | j-repartition-1: join -> j-repartition-2 by value.left.item | record.key | j-repartition-2: count -> j-repartition-3 by value.item | record.key | j-repartition-3: join2 u sink"
	if got := subs(t, l, true); got != want {
		t.Errorf("scale-out plan\n got %s\nwant %s", got, want)
	}
	p, err := Plan(l, Target{ScaleOut: true})
	if err != nil {
		t.Fatal(err)
	}
	edges := func(s SubTopology) string {
		var d []string
		for _, e := range s.Edges {
			f := l.Nodes[e.From].UID
			if e.Forward {
				f += "(fwd)"
			}
			d = append(d, f+">"+e.Tag+" by "+e.Key)
		}
		return strings.Join(d, ", ")
	}
	if got, want := edges(p.Subs[0]), "orders>join#0 by value.customer, customers>join#1 by record.key, items>join2#1 by record.key, orders>u#1 by record.key"; got != want {
		t.Errorf("edges into 1:\n got %s\nwant %s", got, want)
	}
	if got, want := edges(p.Subs[1]), "join>count#0 by value.left.item, items(fwd)>join2#1 by record.key, orders(fwd)>u#1 by record.key"; got != want {
		t.Errorf("edges into 2:\n got %s\nwant %s", got, want)
	}
	if got, want := edges(p.Subs[2]), "count>join2#0 by value.item, items(fwd)>join2#1 by record.key, orders(fwd)>u#1 by record.key"; got != want {
		t.Errorf("edges into 3:\n got %s\nwant %s", got, want)
	}

	// A sink of a stream before the cut writes from the last
	// sub-topology.
	l = graph(src("orders"), src("customers"), Node{Kind: Op, UID: "join", Op: "join", Name: "orders customers", Props: join},
		Node{Kind: Sink, UID: "sink", Name: "join"}, Node{Kind: Sink, UID: "sink-postgres", Name: "orders"})
	if got, want := subs(t, l, true), "orders,customers: orders customers -> j-repartition-1 by value.customer | record.key | j-repartition-1: join sink sink-postgres"; got != want {
		t.Errorf("scale-out plan\n got %s\nwant %s", got, want)
	}

	_, err = Plan(graph(src("orders"), src("customers"),
		Node{Kind: Op, UID: "route", Op: "route", Name: "orders", Props: Props{Keys: KeysKept, Routes: true}, Line: 9},
		Node{Kind: Op, UID: "join", Op: "join", Name: "route customers", Props: join},
		Node{Kind: Sink, UID: "sink", Name: "join"}), Target{ScaleOut: true})
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 9 || !strings.Contains(pe.Msg, "with scale-out, a route step that sets records' topics must come after the last keyed step that needs a repartition") {
		t.Fatalf("error %v, want a refusal at line 9", err)
	}
}
