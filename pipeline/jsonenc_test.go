package pipeline

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var encStrings = []string{
	"", "a", "user-42", `q"r`, `back\slash`, "<b>&amp;</b>", "tab\there\nnl\r\b\f", "\x00\x01\x1f\x7f",
	"é日本", "😀", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "key.with.dots", "Z", "z",
}

var encFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 1.5, 0.1, 1.19 * 129.5, 1e20, 1e21, 1.5e21, 1e-6, 9.99e-7, 1e-7, 123456789.123,
	5e-324, math.MaxFloat64, -2.5e-10, 11817831.564, 1e100,
}

func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(10)
	if depth == 0 && k >= 7 {
		k = r.IntN(7)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return encStrings[r.IntN(len(encStrings))]
	case 3:
		return int(r.Int64()) >> r.IntN(64)
	case 4:
		return int64(r.Int64()) >> r.IntN(64)
	case 5:
		return encFloats[r.IntN(len(encFloats))]
	case 6:
		// Any bits; NaN and the infinities are Marshal's error.
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Float64frombits(r.Uint64())}[r.IntN(4)]
	case 7:
		n := r.IntN(4)
		l := make([]any, n)
		for i := range l {
			l[i] = randValue(r, depth-1)
		}
		if n == 0 && r.IntN(2) == 0 {
			l = nil
		}
		return l
	default:
		n := r.IntN(5)
		m := make(map[string]any, n)
		for range n {
			m[encStrings[r.IntN(len(encStrings))]] = randValue(r, depth-1)
		}
		if n == 0 && r.IntN(2) == 0 {
			m = nil
		}
		return m
	}
}

// TestEncodeJSONMatchesMarshal compares EncodeJSON with json.Marshal,
// which it replaced, over random values: the bytes, and whether it fails.
func TestEncodeJSONMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fast, failed := 0, 0
	for range 50000 {
		v := randValue(r, 4)
		want, werr := json.Marshal(v)
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			continue // EncodeJSON's own message
		}
		got, err := EncodeJSON(v)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%#v: EncodeJSON %s, %v; Marshal %s, %v", v, got, err, want, werr)
		}
		if _, ok := appendJSON(nil, v); ok {
			fast++
		}
		if werr != nil {
			failed++
		}
	}
	if fast < 40000 || failed < 100 {
		t.Fatalf("%d values written without reflection, %d Marshal errors: the generator misses cases", fast, failed)
	}
	// Types expressions can make that appendJSON leaves to Marshal.
	for _, v := range []any{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Second, []int{1, 2}, map[string]int{"b": 1, "a": 2},
		float32(1.5), []string{"x"}, map[string]any{"t": time.Minute}} {
		want, _ := json.Marshal(v)
		got, err := EncodeJSON(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%#v: EncodeJSON %s, %v; Marshal %s", v, got, err, want)
		}
	}
}
