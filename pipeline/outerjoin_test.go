package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/onceflow/onceflow/state"
)

// ojHarness drives a join step's functions the way the engine does, with
// a processing-time clock of its own for the ttl: it records what the
// step emits, retractions marked "-D" (fakeTime).
type ojHarness struct {
	*fakeTime
	fns TwoInputs
	op  Operator
	clk *time.Time
}

func newOJ(t *testing.T, kind string, lttl, rttl time.Duration) *ojHarness {
	t.Helper()
	return newOJConfig(t, joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: kind, TTL: lttl, RightTTL: rttl})
}

func newOJConfig(t *testing.T, c joinConfig) *ojHarness {
	t.Helper()
	op, err := c.operator()
	if err != nil {
		t.Fatal(err)
	}
	clk := time.UnixMilli(1_000_000)
	rt := state.NewRuntime(0, 127, 128, func() time.Time { return clk }, nil)
	fns := op.Two(rt.Store())
	rt.Seal()
	f := &fakeTime{rt: rt, timers: map[string]map[int64]bool{}}
	return &ojHarness{fakeTime: f, fns: fns, op: op, clk: &clk}
}

// feed hands the join a record of side left (else right) whose value is
// {"k": k, "n": name}; k "" is a null key. ts is its timestamp.
func (h *ojHarness) feed(t *testing.T, left bool, k, name string, ts int64) {
	t.Helper()
	kv := `null`
	if k != "" {
		kv = fmt.Sprintf("%q", k)
	}
	r := &handle[krec]{acc: &kAccess, rec: krec{Value: fmt.Sprintf(`{"k":%s,"n":%q}`, kv, name), TS: ts}}
	ke := h.op.KeyBy
	if !left {
		ke = h.op.KeyByRight
	}
	k, null, err := ke.evalKeyOrNull(r, true) // as keyStep does
	if err != nil {
		t.Fatal(err)
	}
	r.group = k
	if null {
		if h.fns.OnNoKey != nil {
			if err := h.fns.OnNoKey(r, left, h); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	h.setKey(k)
	f := h.fns.OnLeft
	if !left {
		f = h.fns.OnRight
	}
	if err := f(r, h, h); err != nil {
		t.Fatal(err)
	}
}

// tick moves the ttl's clock on by d.
func (h *ojHarness) tick(d time.Duration) { *h.clk = h.clk.Add(d) }

// rows are the emitted records as "[-D ]key left-right" by name (- for
// null), in order; emitted is emptied.
func (h *ojHarness) rows(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range h.emitted {
		kind := ""
		if rest, ok := strings.CutPrefix(e, "-D "); ok {
			kind, e = "-D ", rest
		}
		key, v, _ := strings.Cut(e, " ")
		key, _, _ = strings.Cut(key, "@")
		var j struct{ Left, Right *struct{ N string } }
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			t.Fatalf("joined value %s: %v", v, err)
		}
		name := func(s *struct{ N string }) string {
			if s == nil {
				return "-"
			}
			return s.N
		}
		out = append(out, fmt.Sprintf("%s%s %s-%s", kind, key, name(j.Left), name(j.Right)))
	}
	h.emitted = nil
	return out
}

func wantRows(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestOuterJoinPadsAndRetractsOnFirstMatch(t *testing.T) {
	h := newOJ(t, JoinLeft, time.Hour, 0)
	h.feed(t, true, "a", "l1", 10)
	h.feed(t, true, "a", "l2", 11)
	wantRows(t, "left rows without a partner", h.rows(t), "a l1--", "a l2--")
	h.feed(t, false, "a", "r1", 20)
	wantRows(t, "the first partner", h.rows(t), "-D a l1--", "-D a l2--", "a l1-r1", "a l2-r1")
	h.feed(t, false, "a", "r2", 21)
	h.feed(t, true, "a", "l3", 22)
	wantRows(t, "later rows", h.rows(t), "a l1-r2", "a l2-r2", "a l3-r1", "a l3-r2")
	h.feed(t, false, "b", "rb", 23) // the right side is not preserved
	wantRows(t, "a right row without a partner", h.rows(t))
	h.feed(t, true, "b", "lb", 24)
	wantRows(t, "its partner", h.rows(t), "b lb-rb")

	// The retraction is the padded row, byte for byte, with its timestamp.
	h.feed(t, true, "c", "lc", 30)
	padded := h.emitted[0]
	h.emitted = nil
	h.feed(t, false, "c", "rc", 40)
	if got := strings.TrimPrefix(h.emitted[0], "-D "); got != padded || !strings.HasPrefix(h.emitted[0], "-D ") {
		t.Errorf("retraction %q, want -D of %q", h.emitted[0], padded)
	}
	h.emitted = nil

	// Right and full joins.
	h = newOJ(t, JoinRight, time.Hour, 0)
	h.feed(t, true, "a", "l1", 1)
	h.feed(t, false, "a", "r1", 2)
	h.feed(t, false, "b", "r2", 3)
	h.feed(t, true, "b", "l2", 4)
	wantRows(t, "right join", h.rows(t), "a l1-r1", "b --r2", "-D b --r2", "b l2-r2")

	h = newOJ(t, JoinFull, time.Hour, 0)
	h.feed(t, true, "a", "l1", 1)
	h.feed(t, false, "b", "r1", 2)
	h.feed(t, false, "a", "r2", 3)
	h.feed(t, false, "a", "r3", 4)
	h.feed(t, true, "b", "l2", 5)
	h.feed(t, true, "b", "l3", 6)
	wantRows(t, "full join", h.rows(t), "a l1--", "b --r1", "-D a l1--", "a l1-r2", "a l1-r3", "-D b --r1", "b l2-r1", "b l3-r1")

	// No key: a preserved row is emitted padded (with no key) and kept
	// nowhere; the other side's is dropped.
	h = newOJ(t, JoinLeft, time.Hour, 0)
	h.feed(t, true, "", "ln", 1)
	h.feed(t, false, "", "rn", 2)
	wantRows(t, "null keys of a left join", h.rows(t), " ln--")
	h = newOJ(t, JoinFull, time.Hour, 0)
	h.feed(t, true, "", "ln", 1)
	h.feed(t, false, "", "rn", 2)
	wantRows(t, "null keys of a full join", h.rows(t), " ln--", " --rn")
	h = newOJ(t, JoinInner, time.Hour, 0)
	if h.fns.OnNoKey != nil {
		t.Error("an inner join handles records without a key: it drops them")
	}
}

// TestOuterJoinMatchCondition: a left record failing left-match has no
// key: padded, never retracted; a right record failing right-match
// meets nothing.
func TestOuterJoinMatchCondition(t *testing.T) {
	h := newOJConfig(t, joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: JoinLeft, TTL: time.Hour,
		LeftMatch: `value.n != "l-no"`, RightMatch: `value.n != "r-no"`})
	h.feed(t, true, "a", "l-no", 1)
	h.feed(t, true, "a", "l1", 2)
	h.feed(t, false, "a", "r-no", 3)
	h.feed(t, false, "a", "r1", 4)
	wantRows(t, "match conditions", h.rows(t), " l-no--", "a l1--", "-D a l1--", "a l1-r1")
	if _, err := (joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: JoinLeft, TTL: time.Hour, LeftMatch: "value.("}).operator(); err == nil || !strings.Contains(err.Error(), "left-match") {
		t.Errorf("a bad left-match: %v", err)
	}
}

func TestOuterJoinTTL(t *testing.T) {
	// Left rows kept 2h, right rows 1h.
	h := newOJ(t, JoinLeft, 2*time.Hour, time.Hour)
	h.feed(t, true, "a", "l1", 1)
	h.feed(t, false, "a", "r1", 2)
	wantRows(t, "first match", h.rows(t), "a l1--", "-D a l1--", "a l1-r1")
	h.tick(61 * time.Minute) // r1 forgotten, l1 kept
	h.feed(t, true, "a", "l2", 3)
	h.feed(t, true, "a", "l3", 4)
	wantRows(t, "rows after the right side's rows expired are padded again", h.rows(t), "a l2--", "a l3--")
	h.feed(t, false, "a", "r2", 5)
	wantRows(t, "only the padded rows are retracted", h.rows(t), "-D a l2--", "-D a l3--", "a l1-r2", "a l2-r2", "a l3-r2")

	// A padded row that expires is not retracted.
	h = newOJ(t, JoinLeft, time.Hour, time.Hour)
	h.feed(t, true, "a", "l1", 1)
	h.tick(30 * time.Minute)
	h.feed(t, true, "a", "l2", 2)
	h.tick(31 * time.Minute) // l1 forgotten, l2 kept and padded
	h.feed(t, false, "a", "r1", 3)
	wantRows(t, "a padded row forgotten", h.rows(t), "a l1--", "a l2--", "-D a l2--", "a l2-r1")
	h.tick(2 * time.Hour) // everything forgotten
	h.feed(t, false, "a", "r2", 4)
	h.feed(t, true, "a", "l3", 5)
	wantRows(t, "after both sides expired", h.rows(t), "a l3-r2")

	// The state is empty once every row expired, the counts too.
	h.tick(2 * time.Hour)
	groups, err := h.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for g, b := range groups {
		if len(b) > 0 {
			t.Errorf("key group %d keeps %d bytes after every row expired", g, len(b))
		}
	}
}

// ojEvent is a record fed to a join.
type ojEvent struct {
	left bool
	k    string
	name string
}

func randomOJEvents(seed int64, n int) []ojEvent {
	rng := rand.New(rand.NewSource(seed))
	var evs []ojEvent
	for i := range n {
		k := fmt.Sprint("k", rng.Intn(12))
		if rng.Intn(15) == 0 {
			k = "" // null
		}
		evs = append(evs, ojEvent{left: rng.Intn(3) > 0, k: k, name: fmt.Sprint("e", i)})
	}
	return evs
}

// foldChangelog applies rows (rows' format) as a changelog: a count per
// row, failing on a retraction of a row not there.
func foldChangelog(t *testing.T, rows []string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, r := range rows {
		if x, ok := strings.CutPrefix(r, "-D "); ok {
			if m[x] == 0 {
				t.Fatalf("retraction of %q, which is not in the result", x)
			}
			m[x]--
			if m[x] == 0 {
				delete(m, x)
			}
			continue
		}
		m[r]++
	}
	return m
}

// batchOuterJoin is the outer join of evs as a batch computes it.
func batchOuterJoin(kind string, evs []ojEvent) map[string]int {
	m := map[string]int{}
	matched := map[string]bool{}
	for _, l := range evs {
		if !l.left {
			continue
		}
		for _, r := range evs {
			if !r.left && l.k != "" && r.k == l.k {
				m[fmt.Sprintf("%s %s-%s", l.k, l.name, r.name)]++
				matched[l.name], matched[r.name] = true, true
			}
		}
	}
	for _, e := range evs {
		if matched[e.name] {
			continue
		}
		switch {
		case e.left && (kind == JoinLeft || kind == JoinFull):
			m[fmt.Sprintf("%s %s--", e.k, e.name)]++
		case !e.left && (kind == JoinRight || kind == JoinFull):
			m[fmt.Sprintf("%s --%s", e.k, e.name)]++
		}
	}
	return m
}

// TestOuterJoinChangelogEqualsBatchJoin: random records of every kind of
// join, many per key, null keys; the emitted changelog, folded, is the
// batch outer join, and no retraction takes out a row not there.
func TestOuterJoinChangelogEqualsBatchJoin(t *testing.T) {
	evs := randomOJEvents(3, 300)
	for _, kind := range []string{JoinInner, JoinLeft, JoinRight, JoinFull} {
		h := newOJ(t, kind, time.Hour, 0)
		for i, e := range evs {
			h.feed(t, e.left, e.k, e.name, int64(i))
		}
		rows := h.rows(t)
		got, want := foldChangelog(t, rows), batchOuterJoin(kind, evs)
		if !maps.Equal(got, want) {
			t.Errorf("%s join: the folded changelog (%d rows) differs from the batch join (%d rows)", kind, len(got), len(want))
		}
		retractions := 0
		for _, r := range rows {
			if strings.HasPrefix(r, "-D ") {
				retractions++
			}
		}
		if (kind == JoinInner) != (retractions == 0) {
			t.Errorf("%s join: %d retractions", kind, retractions)
		}
	}
}

// TestOuterJoinRestoreEmitsNothingTwice: a run cut at a snapshot and
// restored into a new runtime emits, before the cut and after the
// restore, exactly the records of an uncut run, in order (padded counts
// included: a restored run retracts exactly the rows emitted padded).
func TestOuterJoinRestoreEmitsNothingTwice(t *testing.T) {
	evs := randomOJEvents(11, 400)
	for _, kind := range []string{JoinLeft, JoinFull} {
		run := func(h *ojHarness, from, to int) {
			for i := from; i < to; i++ {
				e := evs[i]
				h.feed(t, e.left, e.k, e.name, int64(i))
				if i%50 == 49 {
					h.tick(20 * time.Minute) // some rows expire: ttl 1h
				}
			}
		}
		whole := newOJ(t, kind, time.Hour, 0)
		run(whole, 0, len(evs))
		want := whole.rows(t)
		for _, cut := range []int{1, 137, 250} {
			first := newOJ(t, kind, time.Hour, 0)
			run(first, 0, cut)
			snap, err := first.rt.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			before := first.rows(t)
			run(first, cut, min(cut+60, len(evs))) // emitted after the checkpoint: lost with the crash
			second := newOJ(t, kind, time.Hour, 0)
			*second.clk = time.UnixMilli(1_000_000).Add(time.Duration(cut/50) * 20 * time.Minute)
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

func TestOuterJoinRefusesRetractions(t *testing.T) {
	op, err := joinConfig{LeftKey: "value.k", RightKey: "value.k", Kind: JoinLeft, TTL: time.Hour}.operator()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`{"k":"a"}`, `{"k":null}`} { // with a key and without
		r := krec{Value: v, Headers: map[string]string{RowKindHeader: "-D"}}
		if _, err := keyStep(kAccess, "join", op)(r); err == nil || !strings.Contains(err.Error(), "does not take retractions") {
			t.Errorf("a retraction %s into a join: %v", v, err)
		}
	}
	// The job-file reader refuses a changelog into a join, and knows an
	// outer join's output is one.
	for _, kind := range []string{JoinInner, JoinLeft, JoinFull} {
		p := joinSpec.WithDefaults(Params{"ttl": time.Hour, "kind": kind})
		if ok, _ := joinSpec.ChangelogOf(p, true); ok {
			t.Errorf("%s join takes a changelog", kind)
		}
		if _, out := joinSpec.ChangelogOf(p, false); out != (kind != JoinInner) {
			t.Errorf("%s join: output a changelog %v", kind, out)
		}
	}
	for _, tc := range []struct{ kind, want string }{
		{"full outer", `write kind: full`}, {"left outer", `write kind: left`}, {"cross", `use inner, left, right or full`},
	} {
		if err := (joinConfig{LeftKey: KeyRecordKey, RightKey: KeyRecordKey, Kind: tc.kind, TTL: time.Hour}).validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kind %q: %v, want %q", tc.kind, err, tc.want)
		}
	}
}

// TestOuterJoinInAJob runs a full join in the engine at parallelism 1 and
// 3, on the heap and in Pebble: the folded output (retractions with their
// header) is the batch join.
func TestOuterJoinInAJob(t *testing.T) {
	evs := randomOJEvents(5, 200)
	var left, right []krec
	for _, e := range evs {
		kv := "null"
		if e.k != "" {
			kv = fmt.Sprintf("%q", e.k)
		}
		r := krec{Value: fmt.Sprintf(`{"k":%s,"n":%q}`, kv, e.name)}
		if e.left {
			left = append(left, r)
		} else {
			right = append(right, r)
		}
	}
	want := batchOuterJoin(JoinFull, evs)
	for _, tc := range []struct {
		p       int
		backend string
	}{{1, ""}, {3, ""}, {3, flow.PebbleBackend}} {
		p := tc.p
		opts := []flow.Option{flow.JobName("oj"), flow.Parallelism(p), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
		if tc.backend != "" {
			opts = append(opts, flow.StateBackend(tc.backend), flow.StateDir(t.TempDir()))
		}
		env := flow.New(opts...)
		var ins []flow.Stream[krec]
		for i, in := range [][]krec{left, right} {
			ins = append(ins, flow.From(env, flowtest.NewSource(flowtest.Split(in, 2)), flow.UID(fmt.Sprint("src-", i))))
		}
		s, _, err := BuildFrom(ins, kAccess, []Step{{Op: "join", Params: Params{"left-key": "value.k", "right-key": "value.k", "kind": "full", "ttl": time.Hour}}}, Env{})
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
		for _, r := range sink.Committed() {
			e := fmt.Sprintf("%s@%d %s", r.Key, r.TS, r.Value)
			if kAccess.RowKind(r).Retracts() {
				e = "-D " + e
			}
			h.emitted = append(h.emitted, e)
		}
		got := foldChangelog(t, h.rows(t))
		if !maps.Equal(got, want) {
			t.Errorf("parallelism %d, backend %q: the folded output (%d rows) differs from the batch join (%d rows)", p, tc.backend, len(got), len(want))
		}
	}
}
