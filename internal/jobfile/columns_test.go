package jobfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
)

// legacyJSONField is how column sources read a JSON field before they were
// pipeline expressions, frozen: the new reader must give the same SQL
// values (docs/design.md, "Database sinks").
func legacyJSONField(value []byte, path []string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the value is not JSON: %v", err)
	}
	for i, f := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			if v == nil {
				return nil, nil
			}
			return nil, fmt.Errorf("%s is not a JSON object", strings.Join(append([]string{"value"}, path[:i]...), "."))
		}
		v = obj[f]
	}
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		return f, err
	case map[string]any, []any:
		b, err := json.Marshal(x)
		return string(b), err
	}
	return v, nil
}

func TestColumnsDialectMatchesLegacy(t *testing.T) {
	values := []string{
		`{"id":7,"user":{"id":"u1","age":31,"score":2.5,"tags":["a","b"],"addr":{"city":"Oslo","zip":null}},"ok":true,"n":null,"big":-9007199254740991,"neg":-3,"exp":1e3,"s":"x y"}`,
		`{"user":{}}`,
		`{}`,
		`null`,
	}
	fields := []string{"id", "user", "user.id", "user.age", "user.score", "user.tags", "user.addr", "user.addr.city", "user.addr.zip", "ok", "n", "big", "neg", "exp", "s", "absent", "user.absent", "s.x", "user.tags.a"}
	for _, v := range values {
		for _, f := range fields {
			r := kafka.Record{Key: []byte("k"), Value: []byte(v), Topic: "t", Partition: 3, Offset: 9, Timestamp: time.UnixMilli(1700000000000)}
			want, werr := legacyJSONField(r.Value, strings.Split(f, "."))
			for _, spelling := range []string{"record.value." + f, "value." + f} {
				read, err := columnValueOf(spelling, columnSources)
				if err != nil {
					t.Fatalf("%s: %v", spelling, err)
				}
				got, gerr := read(r)
				if werr != nil && strings.HasSuffix(werr.Error(), "is not a JSON object") {
					// The one difference, on purpose: a path through a
					// string or a list is null, as in every other
					// expression (a filter, a key), where the legacy reader
					// made the record poison.
					want, werr = nil, nil
				}
				if (gerr != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
					t.Errorf("%s over %s: %#v, %v; the legacy reader %#v, %v", spelling, v, got, gerr, want, werr)
				}
			}
		}
	}
	// The record's own parts, in both spellings, and a value that is not
	// JSON: a poison record for a field, its text for raw.
	r := kafka.Record{Key: nil, Value: []byte("not json"), Topic: "t", Partition: 3, Offset: 9, Timestamp: time.UnixMilli(1700000000000)}
	for _, tc := range []struct {
		sources []string
		want    any
	}{
		{[]string{"record.key", "key"}, nil},
		{[]string{"record.value", "raw"}, "not json"},
		{[]string{"record.topic", "topic"}, "t"},
		{[]string{"record.partition", "partition"}, int64(3)},
		{[]string{"record.offset", "offset"}, int64(9)},
		{[]string{"record.timestamp", "timestamp"}, time.UnixMilli(1700000000000)},
	} {
		for _, s := range tc.sources {
			read, err := columnValueOf(s, columnSources)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := read(r); err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: %#v, %v; want %#v", s, got, err, tc.want)
			}
		}
	}
	for _, s := range []string{"record.value.id", "value.id"} {
		read, _ := columnValueOf(s, columnSources)
		if _, err := read(r); err == nil {
			t.Errorf("%s over a value that is not JSON: no error, want a poison record", s)
		}
	}
	// What only the expression language can say.
	read, err := columnValueOf(`concat(value.user.id, "-", key)`, columnSources)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(kafka.Record{Key: []byte("k"), Value: []byte(values[0])}); err != nil || got != "u1-k" {
		t.Errorf("concat: %#v, %v", got, err)
	}
}
