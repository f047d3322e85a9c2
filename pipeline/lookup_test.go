package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

func TestLookupCacheBoundedLRU(t *testing.T) {
	c := NewLookupCache(2, 0, 0, time.Now)
	c.Put("a", [][]byte{[]byte(`{"x":1}`)})
	c.Put("b", nil) // a missing key: cached as no rows
	if _, ok := c.Get("a"); !ok {
		t.Fatal("a is not cached")
	}
	c.Put("c", [][]byte{[]byte(`{"x":3}`)}) // full: b, least recently used, goes
	if c.Len() != 2 {
		t.Fatalf("the cache holds %d keys, want 2 (its max)", c.Len())
	}
	if _, ok := c.Get("b"); ok {
		t.Error("b, the least recently used, was kept past the size bound")
	}
	if rows, ok := c.Get("a"); !ok || string(rows[0]) != `{"x":1}` {
		t.Errorf("a: %q %v", rows, ok)
	}
	c.Put("d", nil)
	if _, ok := c.Get("c"); ok {
		t.Error("c should have gone (a was read after it)")
	}
	if rows, ok := c.Get("d"); !ok || len(rows) != 0 {
		t.Errorf("the missing key d: rows %q, cached %v; want no rows, cached", rows, ok)
	}
	for i := range 1000 {
		c.Put(fmt.Sprint(i), nil)
	}
	if c.Len() != 2 {
		t.Errorf("after 1000 puts the cache holds %d keys, want 2", c.Len())
	}
}

func TestLookupCacheExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	w := NewLookupCache(10, time.Minute, 0, clock)
	w.Put("k", nil)
	now = now.Add(59 * time.Second)
	if _, ok := w.Get("k"); !ok {
		t.Fatal("expired before expire-after-write")
	}
	now = now.Add(time.Second)
	if _, ok := w.Get("k"); ok {
		t.Error("kept past expire-after-write (reads do not extend it)")
	}
	if w.Len() != 0 {
		t.Errorf("an expired key is still held: %d", w.Len())
	}
	a := NewLookupCache(10, 0, time.Minute, clock)
	a.Put("k", nil)
	for range 5 {
		now = now.Add(50 * time.Second)
		if _, ok := a.Get("k"); !ok {
			t.Fatal("expired although read within expire-after-access")
		}
	}
	now = now.Add(time.Minute)
	if _, ok := a.Get("k"); ok {
		t.Error("kept a minute after its last read (expire-after-access)")
	}
}

// fakeTable is a LookupTable over rows by key text (several columns'
// values joined by "|"), failing the first fail calls.
type fakeTable struct {
	mu      sync.Mutex
	rows    map[string][]string
	fail    int
	calls   int
	batches []int
}

func (f *fakeTable) Get(_ context.Context, keys [][]string) ([][][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("connection refused")
	}
	f.batches = append(f.batches, len(keys))
	out := make([][][]byte, len(keys))
	for i, k := range keys {
		for _, r := range f.rows[strings.Join(k, "|")] {
			out[i] = append(out[i], []byte(r))
		}
	}
	return out, nil
}

func (f *fakeTable) Close() error { return nil }

var lookupAccess = func() RecordAccess[rec] {
	a := recAccess
	a.WithValue = func(r rec, v []byte) rec { return rec{Key: r.Key, Value: string(v)} }
	return a
}()

func runLookup(t *testing.T, in []rec, cfg LookupConfig) (result, *lookupOp) {
	t.Helper()
	var op *lookupOp
	res := run(t, in, 1, func(s flow.Stream[rec]) (flow.Stream[rec], []flow.Stream[flow.Failure[rec]], error) {
		o, err := cfg.operator()
		if err != nil {
			return s, nil, err
		}
		op = o.Reporter.(*lookupOp)
		out, bad, err := apply(s, lookupAccess, "lookup", "lookup:t", o, flow.DeadLetterOnError)
		if err != nil {
			return s, nil, err
		}
		return out, []flow.Stream[flow.Failure[rec]]{*bad}, nil
	})
	return res, op
}

func TestLookupJoinInnerAndLeft(t *testing.T) {
	var in []rec
	for i := range 300 {
		k := []string{`1`, `2`, `3`, `null`, `"2"`}[i%5]
		in = append(in, rec{"all", fmt.Sprintf(`{"n":%d,"k":%s}`, i, k)})
	}
	table := map[string][]string{"1": {`{"id":1,"v":"one"}`}, "2": {`{"id":2,"v":"two"}`, `{"id":2,"v":"deux"}`}}
	for _, kind := range []string{LookupInner, LookupLeft} {
		t.Run(kind, func(t *testing.T) {
			ft := &fakeTable{rows: table, fail: 2}
			res, op := runLookup(t, in, LookupConfig{Table: ft, Source: LookupSource{Table: "t", Keys: []string{"id"}, Columns: []string{"id", "v"}},
				KeyExprs: []string{"value.k"}, Kind: kind, Cache: LookupCachePartial, BatchSize: 64, MaxRetries: 3})
			if res.err != nil {
				t.Fatal(res.err)
			}
			var want []string
			for i := range 300 {
				k := []string{`1`, `2`, `3`, `null`, `"2"`}[i%5]
				left := fmt.Sprintf(`{"n":%d,"k":%s}`, i, k)
				rows := table[strings.Trim(k, `"`)]
				if k == "null" {
					rows = nil
				}
				for _, r := range rows {
					want = append(want, fmt.Sprintf(`{"left":%s,"right":%s}`, left, r))
				}
				if len(rows) == 0 && kind == LookupLeft {
					want = append(want, fmt.Sprintf(`{"left":%s,"right":null}`, left))
				}
			}
			got := res.byKey["all"]
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got %d records, want %d (in order); first got %q, want %q", len(got), len(want), first(got), first(want))
			}
			if h, m := op.hits.Load(), op.misses.Load(); m != 3 || h != 240-3 {
				// keys 1, 2 and 3 (the string "2" is the key 2) miss once; null is never looked up
				t.Errorf("cache hits %d, misses %d; want 237 and 3", h, m)
			}
			if op.retries.Load() != 2 {
				t.Errorf("retries %d, want 2 (the table failed twice)", op.retries.Load())
			}
			for _, b := range ft.batches {
				if b > 64 {
					t.Errorf("a query of %d keys: batch-size is 64", b)
				}
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func TestLookupJoinWithoutCacheBatches(t *testing.T) {
	var in []rec
	for i := range 1000 {
		in = append(in, rec{"all", fmt.Sprintf(`{"a":%d,"b":"x%d"}`, i%7, i%3)})
	}
	rows := map[string][]string{}
	for a := range 7 {
		for b := range 3 {
			if (a+b)%2 == 0 {
				rows[fmt.Sprintf("%d|x%d", a, b)] = []string{fmt.Sprintf(`{"a":%d,"b":"x%d"}`, a, b)}
			}
		}
	}
	ft := &fakeTable{rows: rows}
	res, op := runLookup(t, in, LookupConfig{Table: ft, Source: LookupSource{Table: "t", Keys: []string{"a", "b"}, Columns: []string{"a", "b"}},
		KeyExprs: []string{"value.a", "value.b"}, BatchSize: 100})
	if res.err != nil {
		t.Fatal(res.err)
	}
	n := 0
	for i := range 1000 {
		if (i%7+i%3)%2 == 0 {
			n++
		}
	}
	if got := len(res.byKey["all"]); got != n {
		t.Errorf("%d joined records, want %d", got, n)
	}
	if ft.calls > 1000/100*2 || ft.calls < 10 {
		t.Errorf("%d queries for 1000 records in batches of 100", ft.calls)
	}
	for _, b := range ft.batches {
		if b > 21 {
			t.Errorf("a query of %d keys: there are 21 distinct keys, each asked once per batch", b)
		}
	}
	if op.hits.Load()+op.misses.Load() != 0 {
		t.Error("cache none counted cache hits or misses")
	}
}

func TestLookupJoinFailsAfterRetries(t *testing.T) {
	ft := &fakeTable{rows: map[string][]string{}, fail: 100}
	res, _ := runLookup(t, recs("a", `{"k":1}`), LookupConfig{Table: ft, Source: LookupSource{Table: "t", Keys: []string{"id"}, Columns: []string{"id"}},
		KeyExprs: []string{"value.k"}, MaxRetries: 2})
	if res.err == nil || !strings.Contains(res.err.Error(), "failed 3 times (lookup.max-retries 2)") {
		t.Fatalf("the job ended with %v; want the lookup's failure after 3 tries", res.err)
	}
	if len(res.byKey) != 0 {
		t.Errorf("a record passed although its lookup failed: %v", res.byKey)
	}
}

func TestLookupConfigRefusals(t *testing.T) {
	spec, _ := Lookup("lookup")
	p := spec.WithDefaults(Params{"connector": "oracle", "dsn": "x", "table": "t", "keys": []Named{{"id", "value.k"}}, "columns": []string{"id"}, "kind": "right", "cache": "full"})
	err := spec.Check(p)
	for _, want := range []string{`connector is "oracle", which is no lookup connector`, `kind is "right": a lookup join is inner or left`, `cache is "full": partial or none`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want %q", err, want)
		}
	}
}
