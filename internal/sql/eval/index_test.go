package eval

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// indexReader is one read of a value through an index (index.go): a
// select's, or ReadPaths'. It returns what the read gives, as text.
type indexReader struct {
	name string
	read func(value []byte, ix *valueIndex) string
}

// indexReaders are reads that want different members of the same values:
// nested ones, unused columns, other types, a where condition, the
// Nexmark form (a view per event kind) and paths.
func indexReaders(t testing.TB) []indexReader {
	sel := func(name string, s *Select) indexReader {
		return indexReader{name, func(value []byte, ix *valueIndex) string {
			res, err := s.run(&Ctx{}, value, &Meta{}, nil, ix)
			if err != nil {
				return "error: " + err.Error()
			}
			if !res.Keep {
				return "dropped"
			}
			return string(res.Value)
		}}
	}
	paths := func(name string, paths ...[]string) indexReader {
		return indexReader{name, func(value []byte, ix *valueIndex) string {
			out := make([]PathValue, len(paths))
			ok := readPathsWith(value, paths, out, ix)
			return fmt.Sprintf("%v %+v", ok, out)
		}}
	}
	all, err := CompileSelect(mustSchema(t, [2]string{"a", "BIGINT"}, [2]string{"p", "ROW<id BIGINT, q STRING>"},
		[2]string{"s", "STRING"}, [2]string{"", "INT"}), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []indexReader{
		sel("all", all),
		sel("two", mustSelect(t, mustSchema(t, [2]string{"a", "STRING"}, [2]string{"x", "DOUBLE"}, [2]string{"p", "STRING"}),
			"", nil, [2]string{"a", "a"}, [2]string{"x", "x"})),
		sel("where", mustSelect(t, mustSchema(t, [2]string{"p", "ROW<id BIGINT>"}, [2]string{"a", "INT"}),
			"p.id > 0", nil, [2]string{"id", "p.id"})),
		sel("person", mustSelect(t, mustSchema(t, [2]string{"event_type", "INT"},
			[2]string{"person", "ROW<id BIGINT, name STRING>"}, [2]string{"bid", "ROW<price BIGINT>"}),
			"event_type = 0", nil, [2]string{"id", "person.id"}, [2]string{"name", "person.name"})),
		paths("paths", []string{"a"}, []string{"p", "id"}, []string{"p", "q"}, []string{"event_type"},
			[]string{"bid", "dateTime"}, []string{"p"}),
	}
}

// indexValues are values the index tests read; ok says whether each is
// one valid JSON object (some readers still refuse some of them), the
// first ones are objects every reader indexes.
var indexValues = []struct {
	value string
	ok    bool
}{
	{`{"a": 1, "p": {"id": 2, "q": "x"}, "s": "t"}`, true},
	{`{"event_type":2,"person":null,"auction":null,"bid":{"auction":1,"price":9,"dateTime":"2026-01-01 00:00:00.000","extra":"xx"}}`, true},
	{`{"event_type":0,"person":{"id":5,"name":"n"},"auction":null,"bid":null}`, true},
	{`{"": 1, "a": 3}`, true},
	{`{"a": "1", "a": 2, "p": {"id": 1}, "p": {"id": -1}}`, true},
	{`{"p": {"id": "x"}, "a": 3}`, true},
	{`{"p": [1, 2], "x": "1.5"}`, true},
	{`{}`, true},
	{"  \t{\"a\" : 1 , \"x\":[{}]}\n ", true},
	{`{"a\u0062": 1, "a": 2}`, true},
	{`{"\u0061": 5, "x": 1}`, true}, // an escaped key that is a column's name: never indexed
	{`{"a": 1, "x": [` + strings.Repeat("[", 998) + strings.Repeat("]", 998) + `]}`, true},  // 1,000 levels: the limit
	{`{"a": 1, "x": [` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `]}`, false}, // 1,001
	{`{"a": 1, "s": "` + strings.Repeat("x", maxIndexed) + `"}`, true},                      // too large to index
	{`{"s": "a\"b", "a": 1}`, true},
	{`{"x": 1e400, "a": -0}`, true},
	{`{"a": 1`, false},
	{`{"a": 1} x`, false},
	{`[1]`, false},
	{`null`, false},
	{`{"a": tru}`, false},
	{`{"a": 1, "p": {"id": 01}}`, false},
}

// Any read of a value through the index another read built gives what it
// gives reading the value itself, whichever read built it; an index of
// other bytes of the same length is not used.
func TestIndexedReadsAgree(t *testing.T) {
	readers := indexReaders(t)
	for i, v := range indexValues {
		checkIndexedReads(t, readers, []byte(v.value), v.ok, i < indexedValues)
	}
}

// indexedValues: the first indexValues every reader indexes.
const indexedValues = 4

func checkIndexedReads(t *testing.T, readers []indexReader, value []byte, valid, indexed bool) {
	t.Helper()
	for _, b := range readers {
		ix := new(valueIndex)
		b.read(value, ix)
		if ix.built && !valid {
			t.Fatalf("%q: %s indexed a value that is not a JSON object", value, b.name)
		}
		if ix.built && (len(value) > maxIndexed || strings.Contains(string(value), `"\u0061"`)) {
			t.Fatalf("%.40q: %s indexed a value too large or with an escaped key", value, b.name)
		}
		if !ix.built && indexed {
			t.Fatalf("%q: %s left no index", value, b.name)
		}
		if !ix.built {
			continue
		}
		for _, r := range readers {
			want := r.read(value, new(valueIndex))
			if got := r.read(value, ix); got != want {
				t.Errorf("%.200q: %s through the index of %s:\n got %.200s\nwant %.200s", value, r.name, b.name, got, want)
			}
			if !ix.built {
				t.Fatalf("%q: %s dropped the index of %s", value, r.name, b.name)
			}
			// The same length, other bytes: the index is not theirs.
			other := []byte(strings.Replace(string(value), "{", "[", 1))
			if o, w := r.read(other, ix), r.read(other, new(valueIndex)); o != w {
				t.Errorf("%.200q: %s through the index of %.200q:\n got %.200s\nwant %.200s", other, r.name, value, o, w)
			}
			b.read(value, ix) // index value again for the next reader
		}
	}
}

// A buffer indexed, then rewritten in place with other text of the same
// length (a reused buffer): the reads through the pool read the new text.
func TestIndexOfReusedBuffer(t *testing.T) {
	readers := indexReaders(t)
	buf := []byte(`{"a":12,"p":{"id":3}}`)
	for _, next := range []string{
		`{"a":1,"pp":{"id":3}}`, // the same length, members elsewhere
		`{"a":12,"p":{"id":3}]`, // no longer JSON
		`{"p":{"id":4},"a":12}`,
		`{"a":12,"p":{"id":3}}`,
	} {
		for _, r := range readers {
			r.read(buf, nil)
		}
		copy(buf, next)
		for _, r := range readers {
			if got, want := r.read(buf, nil), r.read([]byte(next), new(valueIndex)); got != want {
				t.Errorf("%s after the buffer became %s:\n got %s\nwant %s", r.name, next, got, want)
			}
		}
	}
}

// FuzzIndexedReads: TestIndexedReadsAgree on any value
// (`go test -fuzz FuzzIndexedReads`).
func FuzzIndexedReads(f *testing.F) {
	for _, v := range indexValues {
		f.Add([]byte(v.value))
	}
	readers := indexReaders(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := len(b) > 0 && ValidJSON(b) && strings.HasPrefix(strings.TrimLeft(string(b), " \t\r\n"), "{")
		for _, r := range readers {
			ix := new(valueIndex)
			r.read(b, ix)
			if ix.built && !valid {
				t.Fatalf("%q: %s indexed a value that is not a JSON object", b, r.name)
			}
		}
		if valid {
			checkIndexedReads(t, readers, b, true, false)
		}
	})
}

// Strings read through an index point into the value read, never into
// the index's copy of another value's bytes.
func TestIndexedStringsAreTheCallers(t *testing.T) {
	value := []byte(`{"a": 1, "p": {"id": 2, "q": "xy"}, "s": "text"}`)
	ix := new(valueIndex)
	paths := [][]string{{"s"}, {"p", "q"}}
	out := make([]PathValue, len(paths))
	readPathsWith(value, paths, out, ix) // builds
	if !ix.built {
		t.Fatal("no index")
	}
	other := append([]byte(nil), value...) // the same bytes elsewhere
	if !readPathsWith(other, paths, out, ix) {
		t.Fatal("declined")
	}
	inOther := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= uintptr(unsafe.Pointer(&other[0])) && p < uintptr(unsafe.Pointer(&other[0]))+uintptr(len(other))
	}
	for i, v := range out {
		if !inOther(v.Text) {
			t.Errorf("path %v: %q is not in the value read", paths[i], v.Text)
		}
	}
	sel := mustSelect(t, mustSchema(t, [2]string{"s", "STRING"}), "", nil, [2]string{"s", "s"})
	ctx := &Ctx{}
	if err := sel.dec.decode(ctx, other, &Meta{}, ix); err != nil {
		t.Fatal(err)
	}
	if s := ctx.Row[0].S; s != "text" || !inOther(s) {
		t.Errorf("column s: %q, not in the value read", s)
	}
}

// Values each read once: past idleIndexes unused indexes, only one value
// in indexEvery is indexed; a read that uses an index brings indexing
// back for every value.
func TestIndexBacksOffWhenUnused(t *testing.T) {
	r := indexReaders(t)[0]
	ix := new(valueIndex)
	value := func(i int) []byte { return []byte(fmt.Sprintf(`{"a": %d}`, i)) }
	built := 0
	for i := range idleIndexes + 10*indexEvery {
		r.read(value(i), ix)
		if ix.built {
			built++
		}
	}
	if want := idleIndexes + 10; built != want {
		t.Fatalf("%d values indexed, want %d", built, want)
	}
	// Read until one is indexed, then read it again: the index is used.
	i := 1000
	for ; !ix.built; i++ {
		r.read(value(i), ix)
	}
	r.read(value(i-1), ix)
	for j := range 5 {
		if r.read(value(2000+j), ix); !ix.built {
			t.Fatalf("value %d after a used index: not indexed", j)
		}
	}
}
