package pipeline

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// rjEvent is a changelog record fed to a retracting join: the add or
// the retraction (retract) of the row {"k": k, "n": name} on one side.
type rjEvent struct {
	left, retract bool
	k, name       string
}

func (e rjEvent) rec(ts int64) krec {
	kv := "null"
	if e.k != "" {
		kv = fmt.Sprintf("%q", e.k)
	}
	r := krec{Value: fmt.Sprintf(`{"k":%s,"n":%q}`, kv, e.name), TS: ts}
	if e.retract {
		r.Headers = map[string]string{RowKindHeader: "-U"}
	}
	return r
}

// randomChangelogs are changelogs of both sides: rows of a few names (so
// a side holds copies of a row) and keys, null keys among them, and
// retractions of rows each side holds, some taking out the key's last
// row; now and then a retraction of a row the side does not hold.
func randomChangelogs(seed int64, n int) []rjEvent {
	rng := rand.New(rand.NewSource(seed))
	held := [2][]rjEvent{}
	var evs []rjEvent
	for range n {
		s := rng.Intn(2)
		if len(held[s]) > 0 && rng.Intn(5) < 2 {
			i := rng.Intn(len(held[s]))
			e := held[s][i]
			held[s] = slices.Delete(held[s], i, i+1)
			e.retract = true
			evs = append(evs, e)
			continue
		}
		k := fmt.Sprint("k", rng.Intn(6))
		if rng.Intn(15) == 0 {
			k = ""
		}
		e := rjEvent{left: s == 0, k: k, name: fmt.Sprint("n", rng.Intn(4))}
		if rng.Intn(40) == 0 && k != "" { // (a row without a key is not kept: its retraction is trusted)
			e.retract = true // a row never added: changes nothing
			e.name = "never"
			evs = append(evs, e)
			continue
		}
		held[s] = append(held[s], e)
		evs = append(evs, e)
	}
	return evs
}

// batchJoinOfFolded is the join of kind of the tables the changelogs
// evs describe (each side folded to a multiset of rows first).
func batchJoinOfFolded(kind string, evs []rjEvent) map[string]int {
	return batchJoinOfFoldedWhere(kind, evs, func(_, _ string) bool { return true })
}

// batchJoinOfFoldedWhere is batchJoinOfFolded where a pair of equal keys
// also needs pred of the left and right names.
func batchJoinOfFoldedWhere(kind string, evs []rjEvent, pred func(l, r string) bool) map[string]int {
	type row struct{ k, name string }
	var sides [2]map[row]int
	sides[0], sides[1] = map[row]int{}, map[row]int{}
	for _, e := range evs {
		s := sides[0]
		if !e.left {
			s = sides[1]
		}
		r := row{e.k, e.name}
		switch {
		case !e.retract:
			s[r]++
		case s[r] > 0:
			s[r]--
		}
	}
	m := map[string]int{}
	has := func(s map[row]int, k string, ok func(string) bool) bool {
		for r, n := range s {
			if n > 0 && r.k == k && k != "" && ok(r.name) {
				return true
			}
		}
		return false
	}
	for l, ln := range sides[0] {
		for r, rn := range sides[1] {
			if l.k != "" && l.k == r.k && ln*rn > 0 && pred(l.name, r.name) {
				m[fmt.Sprintf("%s %s-%s", l.k, l.name, r.name)] += ln * rn
			}
		}
		if (kind == JoinLeft || kind == JoinFull) && ln > 0 && !has(sides[1], l.k, func(r string) bool { return pred(l.name, r) }) {
			m[fmt.Sprintf("%s %s--", l.k, l.name)] += ln
		}
	}
	if kind == JoinRight || kind == JoinFull {
		for r, rn := range sides[1] {
			if rn > 0 && !has(sides[0], r.k, func(l string) bool { return pred(l, r.name) }) {
				m[fmt.Sprintf("%s --%s", r.k, r.name)] += rn
			}
		}
	}
	return m
}

func newRJ(t *testing.T, kind string) *ojHarness {
	t.Helper()
	return newOJConfig(t, joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: kind, TTL: time.Hour, Retractions: true})
}

// feedEvent hands the join e, as keyStep and the CoProcess do.
func (h *ojHarness) feedEvent(t *testing.T, e rjEvent, ts int64) {
	t.Helper()
	r := &handle[krec]{acc: &kAccess, rec: e.rec(ts)}
	ke := h.op.KeyBy
	if !e.left {
		ke = h.op.KeyByRight
	}
	k, null, err := ke.evalKeyOrNull(r, true)
	if err != nil {
		t.Fatal(err)
	}
	r.group = k
	if null {
		if h.fns.OnNoKey != nil {
			if err := h.fns.OnNoKey(r, e.left, h); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	h.setKey(k)
	f := h.fns.OnLeft
	if !e.left {
		f = h.fns.OnRight
	}
	if err := f(r, h, h); err != nil {
		t.Fatal(err)
	}
}

func TestRetractingJoinSteps(t *testing.T) {
	add := func(left bool, k, n string) rjEvent { return rjEvent{left: left, k: k, name: n} }
	del := func(left bool, k, n string) rjEvent { return rjEvent{left: left, k: k, name: n, retract: true} }
	h := newRJ(t, JoinLeft)
	for i, e := range []rjEvent{add(true, "a", "l1"), add(true, "a", "l1"), add(false, "a", "r1"), add(false, "a", "r2")} {
		h.feedEvent(t, e, int64(i))
	}
	wantRows(t, "copies padded, then paired", h.rows(t), "a l1--", "a l1--", "-D a l1--", "-D a l1--", "a l1-r1", "a l1-r1", "a l1-r2", "a l1-r2")
	h.feedEvent(t, del(true, "a", "l1"), 5)
	wantRows(t, "one copy retracted", h.rows(t), "-D a l1-r1", "-D a l1-r2")
	h.feedEvent(t, del(false, "a", "r1"), 6)
	h.feedEvent(t, del(false, "a", "r9"), 7) // never added
	wantRows(t, "a right row retracted", h.rows(t), "-D a l1-r1")
	h.feedEvent(t, del(false, "a", "r2"), 8)
	wantRows(t, "the last partner retracted: padded again", h.rows(t), "-D a l1-r2", "a l1--")
	h.feedEvent(t, del(true, "a", "l1"), 9)
	wantRows(t, "a padded row retracted", h.rows(t), "-D a l1--")
	h.feedEvent(t, add(false, "a", "r3"), 10)
	wantRows(t, "a right row alone", h.rows(t))

	h = newRJ(t, JoinFull)
	for i, e := range []rjEvent{add(true, "", "ln"), del(true, "", "ln"), add(false, "b", "r1"), add(true, "b", "l1"), del(true, "b", "l1")} {
		h.feedEvent(t, e, int64(i))
	}
	wantRows(t, "full join", h.rows(t), " ln--", "-D  ln--", "b --r1", "-D b --r1", "b l1-r1", "-D b l1-r1", "b --r1")

	// The layout of the state differs from the appending join's.
	p := joinSpec.WithDefaults(Params{"ttl": time.Hour})
	q := joinSpec.WithDefaults(Params{"ttl": time.Hour, "retractions": true})
	if joinSpec.StateLayout(p) == joinSpec.StateLayout(q) {
		t.Errorf("one state layout with and without retractions: %s", joinSpec.StateLayout(p))
	}
	if in, out := joinSpec.ChangelogOf(q, true); !in || !out {
		t.Errorf("an inner join with retractions: takes a changelog %v, makes one %v", in, out)
	}
}

// TestRetractingJoinEqualsBatchJoinOfFolded: random changelogs on both
// sides, for every kind of join; the output, folded, is the batch join of
// the folded inputs, and no retraction takes out a row not there.
func TestRetractingJoinEqualsBatchJoinOfFolded(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		evs := randomChangelogs(seed, 300)
		for _, kind := range []string{JoinInner, JoinLeft, JoinRight, JoinFull} {
			h := newRJ(t, kind)
			for i, e := range evs {
				h.feedEvent(t, e, int64(i))
			}
			rows := h.rows(t)
			got, want := foldChangelog(t, rows), batchJoinOfFolded(kind, evs)
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d, %s join: the folded output (%d rows) differs from the batch join (%d rows):\n got %v\nwant %v", seed, kind, len(got), len(want), got, want)
			}
			if seed == 1 && len(want) < 5 {
				t.Errorf("%s join: only %d rows in the result: the test proves little", kind, len(want))
			}
		}
	}
}

// TestRetractingJoinCondition: with a condition of both sides (SQL's ON
// of both tables), a pair joins only if it holds, and an outer join pads
// a preserved row while no kept row of the other side meets it with the
// row; the folded output is the batch join with the same condition.
func TestRetractingJoinCondition(t *testing.T) {
	schema := []Named{{Name: "left", Text: "ROW<k STRING, n STRING>"}, {Name: "right", Text: "ROW<k STRING, n STRING>"}}
	for seed := int64(1); seed <= 10; seed++ {
		evs := randomChangelogs(seed, 300)
		for _, kind := range []string{JoinInner, JoinLeft, JoinRight, JoinFull} {
			h := newOJConfig(t, joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: kind, TTL: time.Hour, Retractions: true,
				Condition: "`left`.n <= `right`.n", Schema: schema})
			for i, e := range evs {
				h.feedEvent(t, e, int64(i))
			}
			got := foldChangelog(t, h.rows(t))
			want := batchJoinOfFoldedWhere(kind, evs, func(l, r string) bool { return l <= r })
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d, %s join: the folded output (%d rows) differs from the batch join (%d rows):\n got %v\nwant %v", seed, kind, len(got), len(want), got, want)
			}
			if all := batchJoinOfFolded(kind, evs); seed == 1 && maps.Equal(all, want) {
				t.Errorf("%s join: the condition changes nothing: the test proves little", kind)
			}
		}
	}
	for _, tc := range []struct {
		c    joinConfig
		want string
	}{
		{joinConfig{Kind: JoinLeft, TTL: time.Hour, Condition: "`left`.n < `right`.n", Schema: schema}, "condition needs retractions: true"},
		{joinConfig{Kind: JoinLeft, TTL: time.Hour, Retractions: true, Condition: "`left`.n < `right`.n"}, "schema is missing"},
		{joinConfig{Kind: JoinLeft, TTL: time.Hour, Retractions: true, Condition: "`left`.nope < 1", Schema: schema}, "condition"},
	} {
		if _, err := tc.c.operator(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.c, err, tc.want)
		}
	}
}

// TestRetractingJoinRestoreEmitsNothingTwice: a run cut at a snapshot and
// restored emits exactly the records of an uncut run, in order.
func TestRetractingJoinRestoreEmitsNothingTwice(t *testing.T) {
	evs := randomChangelogs(7, 400)
	for _, kind := range []string{JoinInner, JoinLeft, JoinFull} {
		run := func(h *ojHarness, from, to int) {
			for i := from; i < to; i++ {
				h.feedEvent(t, evs[i], int64(i))
			}
		}
		whole := newRJ(t, kind)
		run(whole, 0, len(evs))
		want := whole.rows(t)
		for _, cut := range []int{1, 137, 250} {
			first := newRJ(t, kind)
			run(first, 0, cut)
			snap, err := first.rt.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			before := first.rows(t)
			run(first, cut, min(cut+60, len(evs))) // lost with the crash
			second := newRJ(t, kind)
			if err := second.rt.Restore(snap); err != nil {
				t.Fatal(err)
			}
			run(second, cut, len(evs))
			got := append(before, second.rows(t)...)
			if !slices.Equal(got, want) {
				t.Errorf("%s join cut at %d: %d records, uncut: %d; they differ", kind, cut, len(got), len(want))
			}
		}
	}
}

// TestRetractingJoinInAJob runs the join in the engine at parallelism 1
// and 3, on the heap and in Pebble, each side's changelog split over two
// source partitions by key (a key's records stay in order, as a
// changelog's do in Kafka): the folded output is the batch join of the
// folded inputs.
func TestRetractingJoinInAJob(t *testing.T) {
	evs := randomChangelogs(5, 400)
	var splits [2][][]krec
	for s := range splits {
		splits[s] = make([][]krec, 2)
	}
	for i, e := range evs {
		s := 0
		if !e.left {
			s = 1
		}
		hs := fnv.New32a()
		hs.Write([]byte(e.k))
		p := hs.Sum32() % 2
		splits[s][p] = append(splits[s][p], e.rec(int64(i)))
	}
	for _, kind := range []string{JoinInner, JoinLeft, JoinFull} {
		want := batchJoinOfFolded(kind, evs)
		for _, tc := range []struct {
			p       int
			backend string
		}{{1, ""}, {3, ""}, {3, flow.PebbleBackend}} {
			opts := []flow.Option{flow.JobName("rj"), flow.Parallelism(tc.p), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
			if tc.backend != "" {
				opts = append(opts, flow.StateBackend(tc.backend), flow.StateDir(t.TempDir()))
			}
			env := flow.New(opts...)
			var ins []flow.Stream[krec]
			for i := range splits {
				ins = append(ins, flow.From(env, flowtest.NewSource(splits[i]), flow.UID(fmt.Sprint("src-", i))))
			}
			s, _, err := BuildFrom(ins, kAccess, []Step{{Op: "join", Params: Params{"left-key": "value.k", "right-key": "value.k", "kind": kind, "ttl": time.Hour, "retractions": true}}}, Env{})
			if err != nil {
				t.Fatal(err)
			}
			sink := flowtest.NewSink[krec]()
			flow.To(s, sink, flow.UID("sink"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			job, err := env.Start(ctx)
			if err == nil {
				err = job.Wait()
			}
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			h := &ojHarness{fakeTime: &fakeTime{}}
			retractions := 0
			for _, r := range sink.Committed() {
				e := fmt.Sprintf("%s@%d %s", r.Key, r.TS, r.Value)
				if kAccess.RowKind(r).Retracts() {
					e = "-D " + e
					retractions++
				}
				h.emitted = append(h.emitted, e)
			}
			got := foldChangelog(t, h.rows(t))
			if !maps.Equal(got, want) || retractions == 0 {
				t.Errorf("%s join, parallelism %d, backend %q: the folded output (%d rows, %d retractions) differs from the batch join (%d rows)", kind, tc.p, tc.backend, len(got), retractions, len(want))
			}
		}
	}
}
