package kafkatest

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// Record is a record read back from a topic, as the output checks see it.
type Record struct {
	Key, Value string
	Partition  int32
	Offset     int64
}

// examples is how many values of each kind of anomaly a check names.
const examples = 3

// CheckExactlyOnce reports an error unless got holds every value of want
// exactly as often as want does (once, for unique inputs) and nothing
// else: the output of a pass-through job read back read_committed. what
// names the output or the client that read it. It names a few lost,
// duplicated and unexpected values, then the totals, and returns whether
// the check passed.
func CheckExactlyOnce(tb testing.TB, what string, got, want []string) bool {
	tb.Helper()
	expected := make(map[string]int, len(want))
	for _, v := range want {
		expected[v]++
	}
	seen := make(map[string]int, len(got))
	for _, v := range got {
		seen[v]++
	}
	var lost, dup, unexpected []string
	for v, n := range expected {
		switch {
		case seen[v] < n:
			lost = append(lost, v)
		case seen[v] > n:
			dup = append(dup, v)
		}
	}
	for v := range seen {
		if expected[v] == 0 {
			unexpected = append(unexpected, v)
		}
	}
	if len(lost)+len(dup)+len(unexpected) == 0 {
		return true
	}
	for _, l := range []struct {
		kind string
		vs   []string
	}{{"lost", lost}, {"duplicated", dup}, {"unexpected", unexpected}} {
		slices.Sort(l.vs)
		for _, v := range l.vs[:min(len(l.vs), examples)] {
			tb.Errorf("%s: %s %q (%d times, want %d)", what, l.kind, v, seen[v], expected[v])
		}
	}
	tb.Errorf("%s: %d records, want the %d inputs exactly once: %d lost, %d duplicated, %d unexpected",
		what, len(got), len(want), len(lost), len(dup), len(unexpected))
	return false
}

// CheckCounts reports an error unless out, the output of a job counting
// records per key, holds for each of keys keys exactly the counts
// 1..perKey, in that order, in one partition: no count lost, repeated or
// out of order. what names the output or the client that read it. It
// reports the first problem and returns whether the check passed.
func CheckCounts(tb testing.TB, what string, out []Record, keys, perKey int) bool {
	tb.Helper()
	byKey := map[string][]Record{}
	for _, r := range out {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	if len(byKey) != keys {
		tb.Errorf("%s: counts for %d keys, want %d", what, len(byKey), keys)
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		rs := byKey[k]
		if len(rs) != perKey {
			tb.Errorf("%s: key %s has %d counts, want %d", what, k, len(rs), perKey)
			return false
		}
		for i, r := range rs {
			if i > 0 && (r.Partition != rs[i-1].Partition || r.Offset < rs[i-1].Offset) {
				tb.Errorf("%s: key %s spread over partitions or out of order", what, k)
				return false
			}
			if r.Value != strconv.Itoa(i+1) {
				tb.Errorf("%s: key %s count #%d is %q, want %d (a gap or a repeat)", what, k, i+1, r.Value, i+1)
				return false
			}
		}
	}
	return true
}

// SeqValues returns "<prefix>0" .. "<prefix>n-1": the values of generated
// inputs, to check pass-through output against.
func SeqValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}
