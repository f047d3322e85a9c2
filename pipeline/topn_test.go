package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// topNFake drives a top-n operator as the engine does: Prepare in the
// stateless step, then OnRecord with the record's key set.
type topNFake struct {
	*fakeTime
	op Operator
	tm Timed
}

func newTopN(t *testing.T, c TopNConfig) *topNFake {
	t.Helper()
	if c.RankField == "" {
		c.RankField = "rank"
	}
	op, err := c.operator()
	if err != nil {
		t.Fatal(err)
	}
	f := &topNFake{op: op}
	f.restore(t, nil)
	return f
}

// restore gives the operator a new runtime, with the state of a snapshot
// (nil: empty), as a restart does.
func (f *topNFake) restore(t *testing.T, snap map[int][]byte) {
	t.Helper()
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	f.tm = f.op.Timed(rt.Store())
	rt.Seal()
	if snap != nil {
		if err := rt.Restore(snap); err != nil {
			t.Fatal(err)
		}
	}
	var emitted []string
	if f.fakeTime != nil {
		emitted = f.emitted
	}
	f.fakeTime = &fakeTime{rt: rt, timers: map[string]map[int64]bool{}, ptimers: map[string]map[int64]bool{}, emitted: emitted}
}

// feed hands the operator a record of partition key k with value v at
// time ts; the error is Prepare's.
func (f *topNFake) feed(t *testing.T, k, v string, ts int64) error {
	t.Helper()
	h := &handle[krec]{acc: &kAccess, rec: krec{Key: k, Value: v, TS: ts, Topic: "in", Offset: ts}}
	prep, err := f.op.Prepare(h)
	if err != nil {
		return err
	}
	f.setKey(k)
	h.group, h.prep = k, prep
	if err := f.tm.OnRecord(h, f, f); err != nil {
		t.Fatal(err)
	}
	return nil
}

func (f *topNFake) take() []string {
	out := f.emitted
	f.emitted = nil
	return out
}

func TestTopNOrderAndRanks(t *testing.T) {
	f := newTopN(t, TopNConfig{N: 3, Order: []string{"value.price desc", "value.seq"}, RankField: "rn"})
	step := func(k string, price, seq int, want ...string) {
		t.Helper()
		if err := f.feed(t, k, fmt.Sprintf(`{"price":%d,"seq":%d}`, price, seq), int64(seq)); err != nil {
			t.Fatal(err)
		}
		if got := f.take(); !slices.Equal(got, want) {
			t.Errorf("price %d seq %d: emitted %q\nwant %q", price, seq, got, want)
		}
	}
	step("a", 10, 1, `["a",1]@1 {"price":10,"seq":1,"rn":1}`)
	step("a", 20, 2, `["a",1]@2 {"price":20,"seq":2,"rn":1}`, `["a",2]@2 {"price":10,"seq":1,"rn":2}`)
	step("b", 5, 3, `["b",1]@3 {"price":5,"seq":3,"rn":1}`) // keys are independent
	step("a", 15, 4, `["a",2]@4 {"price":15,"seq":4,"rn":2}`, `["a",3]@4 {"price":10,"seq":1,"rn":3}`)
	// The top 3 is full: 20, 15, 10. A lower row emits nothing; a row
	// equal to the third on price but with a later seq does not enter.
	step("a", 9, 5)
	step("a", 10, 6)
	// The second sort key breaks the tie: seq 0 ranks before seq 1.
	step("a", 10, 0, `["a",3]@0 {"price":10,"seq":0,"rn":3}`)
	// A new best moves every rank down; the third falls out.
	step("a", 30, 7, `["a",1]@7 {"price":30,"seq":7,"rn":1}`, `["a",2]@7 {"price":20,"seq":2,"rn":2}`, `["a",3]@7 {"price":15,"seq":4,"rn":3}`)
}

func TestTopNTiesInArrivalOrder(t *testing.T) {
	f := newTopN(t, TopNConfig{N: 2, Order: []string{"value.p"}})
	for i, want := range [][]string{
		{`["k",1]@0 {"p":1,"id":0,"rank":1}`},
		{`["k",2]@1 {"p":1,"id":1,"rank":2}`}, // equal: after the earlier
		nil,                                   // equal to the last kept: stays out (N boundary)
		{`["k",1]@3 {"p":0,"id":3,"rank":1}`, `["k",2]@3 {"p":1,"id":0,"rank":2}`},
	} {
		p := 1
		if i == 3 {
			p = 0
		}
		if err := f.feed(t, "k", fmt.Sprintf(`{"p":%d,"id":%d}`, p, i), int64(i)); err != nil {
			t.Fatal(err)
		}
		if got := f.take(); !slices.Equal(got, want) {
			t.Errorf("record %d: emitted %q\nwant %q", i, got, want)
		}
	}
}

func TestTopNNullsAndKinds(t *testing.T) {
	for _, tc := range []struct {
		order string
		want  []string // the ids in rank order
	}{
		{"value.v", []string{"null", "f", "1", "2.5", "x"}},
		{"value.v desc", []string{"x", "2.5", "1", "f", "null"}},
		{"value.v asc nulls last", []string{"f", "1", "2.5", "x", "null"}},
		{"value.v DESC NULLS FIRST", []string{"null", "x", "2.5", "1", "f"}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			f := newTopN(t, TopNConfig{N: 5, Order: []string{tc.order}})
			for _, v := range []string{`1`, `null`, `"x"`, `2.5`, `false`} {
				id := strings.Trim(v, `"`)
				if v == "false" {
					id = "f"
				}
				if err := f.feed(t, "k", fmt.Sprintf(`{"id":%q,"v":%s}`, id, v), 0); err != nil {
					t.Fatal(err)
				}
			}
			ranks := map[string]string{}
			for _, e := range f.take() {
				kv := strings.SplitN(e, " ", 2)
				var row struct{ ID string }
				if err := json.Unmarshal([]byte(kv[1]), &row); err != nil {
					t.Fatal(err)
				}
				ranks[kv[0]] = row.ID
			}
			var got []string
			for i := 1; i <= 5; i++ {
				got = append(got, ranks[fmt.Sprintf(`["k",%d]@0`, i)])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ranks %q, want %q", got, tc.want)
			}
		})
	}
}

// topNInput is a random input: a few keys, sort values with many ties
// (a number and a text), and nulls.
func topNInput(rng *rand.Rand, n, keys int) [][2]string {
	var in [][2]string
	for i := range n {
		var a any = rng.IntN(10)
		if rng.IntN(10) == 0 {
			a = nil
		}
		b := string(rune('a' + rng.IntN(3)))
		v, _ := json.Marshal(map[string]any{"a": a, "b": b, "i": i})
		in = append(in, [2]string{fmt.Sprintf("k%d", rng.IntN(keys)), string(v)})
	}
	return in
}

// The rows the upserts leave per key and rank equal, after every record,
// a brute-force top N of the records so far: sorted (stably, so equal rows
// stay in arrival order) and cut at N.
func TestTopNMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{1, 3, 10} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			f := newTopN(t, TopNConfig{N: n, Order: []string{"value.a desc", "value.b"}})
			table := map[string]string{} // key and rank -> row
			seen := map[string][]map[string]any{}
			for i, r := range topNInput(rng, 400, 4) {
				if err := f.feed(t, r[0], r[1], int64(i)); err != nil {
					t.Fatal(err)
				}
				for _, e := range f.take() {
					kv := strings.SplitN(e, " ", 2)
					table[strings.SplitN(kv[0], "@", 2)[0]] = kv[1]
				}
				var row map[string]any
				if err := json.Unmarshal([]byte(r[1]), &row); err != nil {
					t.Fatal(err)
				}
				seen[r[0]] = append(seen[r[0]], row)
				rows := slices.Clone(seen[r[0]])
				sort.SliceStable(rows, func(i, j int) bool {
					ai, aj := rows[i]["a"], rows[j]["a"]
					if (ai == nil) != (aj == nil) {
						return aj == nil // desc: nulls last
					}
					if ai != nil && ai.(float64) != aj.(float64) {
						return ai.(float64) > aj.(float64)
					}
					return rows[i]["b"].(string) < rows[j]["b"].(string)
				})
				for rank := 1; rank <= min(n, len(rows)); rank++ {
					got := table[fmt.Sprintf(`[%q,%d]`, r[0], rank)]
					var g map[string]any
					if err := json.Unmarshal([]byte(got), &g); err != nil {
						t.Fatalf("record %d: rank %d of %s: %q: %v", i, rank, r[0], got, err)
					}
					want := rows[rank-1]
					if g["i"] != want["i"] || g["rank"] != float64(rank) {
						t.Fatalf("record %d: rank %d of %s holds %s, want row %v", i, rank, r[0], got, want["i"])
					}
				}
				if len(table) > 4*n {
					t.Fatalf("%d rows in the table, more than n per key", len(table))
				}
			}
		})
	}
}

// A restore from a snapshot taken mid-stream, through the state's
// codec, gives the output an uninterrupted run gives.
func TestTopNRestoreMidStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	in := topNInput(rng, 300, 40)
	cfg := TopNConfig{N: 3, Order: []string{"value.a desc nulls first", "value.b"}, TTL: time.Hour}
	whole := newTopN(t, cfg)
	for i, r := range in {
		if err := whole.feed(t, r[0], r[1], int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cut := range []int{1, 57, 150, 299} {
		f := newTopN(t, cfg)
		for i, r := range in[:cut] {
			if err := f.feed(t, r[0], r[1], int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := f.rt.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		f.restore(t, snap)
		for i, r := range in[cut:] {
			if err := f.feed(t, r[0], r[1], int64(cut+i)); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(f.emitted, whole.emitted) {
			t.Errorf("restored after %d records: %d outputs differ from the uninterrupted run's %d", cut, len(f.emitted), len(whole.emitted))
		}
	}
	if len(whole.emitted) < len(in)/4 {
		t.Errorf("only %d outputs for %d records: the test proves little", len(whole.emitted), len(in))
	}
}

// Integers beyond float64's precision keep their order through a
// snapshot.
func TestTopNRowRoundTrip(t *testing.T) {
	in := topRow{Sort: []any{1<<60 + 1, "x", nil, 2.5, true}, Value: json.RawMessage(`{"a":1}`)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back topRow
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, in) {
		t.Errorf("round trip of %+v: %+v", in, back)
	}
}

func TestTopNPoisonRecords(t *testing.T) {
	f := newTopN(t, TopNConfig{N: 2, Order: []string{"value.a + 1"}, RankField: "rn"})
	for _, tc := range []struct{ value, want string }{
		{`[1]`, "the value is not a JSON object"},
		{`{"a":`, "the value is not a JSON object"},
		{`{"a":1,"rn":2}`, "the value has a field rn already: set rank-field to another name"},
		{`{"a":"x"}`, "top-n order value.a + 1"},
	} {
		err := f.feed(t, "k", tc.value, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.value, err, tc.want)
		}
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("poison records emitted %q", got)
	}
	// A binary key (by default the record key) is not UTF-8: as JSON
	// text it would be changed, and two keys could share ranks.
	if err := f.feed(t, "\x00\x00\x00\x80", `{"a":1}`, 0); err == nil || !strings.Contains(err.Error(), "not UTF-8 text") {
		t.Errorf("a binary key: %v, want an error saying it is not UTF-8", err)
	}
	f = newTopN(t, TopNConfig{N: 2, Order: []string{"value.a"}, RankField: "rn"})
	if err := f.feed(t, "k", ` { } `, 0); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !slices.Equal(got, []string{`["k",1]@0 {"rn":1}`}) {
		t.Errorf("an empty object: %q", got)
	}
}

func TestTopNConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  TopNConfig
		want string
	}{
		{TopNConfig{N: 0, Order: []string{"value.a"}, RankField: "r"}, "n is 0: give a number of rows from 1 to 10000"},
		{TopNConfig{N: 3, RankField: "r"}, "order is empty"},
		{TopNConfig{N: 3, Order: []string{"value.a last"}, RankField: "r"}, `order: "value.a last": write nulls first or nulls last after the expression`},
		{TopNConfig{N: 3, Order: []string{"desc"}, RankField: "r"}, `order: "desc": `},
		{TopNConfig{N: 3, Order: []string{"value.a"}}, "rank-field is empty"},
		{TopNConfig{N: 3, Order: []string{"value.a"}, RankField: "r", TTL: -time.Second}, "ttl must be positive"},
	} {
		_, err := tc.cfg.operator()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The step runs in a job, on either state backend: a keyed exchange,
// the upserts out. With Pebble every read decodes the rows kept, so the
// two integers that one float64 cannot tell apart show that decoding
// keeps them exact.
func TestTopNStep(t *testing.T) {
	in := []krec{
		{Key: "x", Value: `{"g":"a","p":1}`, TS: 1},
		{Key: "y", Value: `{"g":"a","p":3}`, TS: 2},
		{Key: "z", Value: `{"g":"b","p":2}`, TS: 3},
		{Key: "w", Value: `{"g":"a","p":2}`, TS: 4},
		{Key: "v", Value: `not json`, TS: 5},
		{Key: "u", Value: `{"g":"c","p":1152921504606846976}`, TS: 6},
		{Key: "t", Value: `{"g":"c","p":1152921504606846977}`, TS: 7},
	}
	want := []string{
		`["a",1]@1 {"g":"a","p":1,"rank":1}`,
		`["a",1]@2 {"g":"a","p":3,"rank":1}`,
		`["a",2]@2 {"g":"a","p":1,"rank":2}`,
		`["a",2]@4 {"g":"a","p":2,"rank":2}`,
		`["b",1]@3 {"g":"b","p":2,"rank":1}`,
		`["c",1]@6 {"g":"c","p":1152921504606846976,"rank":1}`,
		`["c",1]@7 {"g":"c","p":1152921504606846977,"rank":1}`,
		`["c",2]@7 {"g":"c","p":1152921504606846976,"rank":2}`,
	}
	for _, backend := range []string{flow.MemoryBackend, flow.PebbleBackend} {
		t.Run(backend, func(t *testing.T) {
			env := flow.New(flow.JobName("test"), flow.Parallelism(2), flow.StateBackend(backend), flow.StateDir(t.TempDir()),
				flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			s, failures, err := Build(flow.From(env, flowtest.NewSource(flowtest.Split(in, 1)), flow.UID("src")), kAccess,
				[]Step{{Op: "top-n", Params: Params{"key": "value.g", "n": 2, "order": []string{"value.p desc"}}}}, Env{Policy: flow.DeadLetterOnError})
			if err != nil {
				t.Fatal(err)
			}
			sink, dlq := flowtest.NewSink[krec](), flowtest.NewSink[flow.Failure[krec]]()
			flow.To(s, sink, flow.UID("sink"))
			flow.To(failures[0], dlq, flow.UID("dlq"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range sink.Committed() {
				got = append(got, fmt.Sprintf("%s@%d %s", r.Key, r.TS, r.Value))
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("output %q\nwant %q", got, want)
			}
			if d := dlq.Committed(); len(d) != 1 || d[0].Record.Key != "v" {
				t.Errorf("dead letters %+v, want the record that is not JSON", d)
			}
		})
	}
}
