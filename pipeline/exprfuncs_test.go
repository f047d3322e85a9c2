package pipeline

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The functions onceflow adds to expr's (docs/operators.md, Functions),
// with the examples the docs give. A Flink job's dedup key
// md5(concat(...)) must be writable as it is.
func TestExprFunctions(t *testing.T) {
	r := krec{Key: "k1", Value: `{"user_id":"u-42","order_id":"o-1","n":7,"amount":12.5,"none":null,"ts":"2026-12-01 10:00:00.123","items":[1,2]}`, TS: 1796119200123}
	for _, tc := range []struct {
		src  string
		want any
	}{
		{`concat(value.user_id, "|", value.order_id)`, "u-42|o-1"},
		{`concat(value.user_id, value.n)`, "u-427"},
		{`concat(value.user_id, value.none)`, nil},   // as Flink's CONCAT: null in, null out
		{`concat(value.items, [3])`, []any{1, 2, 3}}, // expr's concat of arrays still works
		{`concat_ws("|", value.user_id, value.none, value.order_id)`, "u-42|o-1"},
		{`md5("abc")`, "900150983cd24fb0d6963f7d28e17f72"},
		{`sha256("abc")`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`md5(concat(value.user_id, value.order_id))`, md5hex("u-42o-1")},
		{`md5(value.none)`, nil},
		{`upper(value.user_id)`, "U-42"},
		{`lower("AbC")`, "abc"},
		{`to_timestamp(value.ts)`, int64(1796119200123)},
		{`to_timestamp("2026-12-01 10:00:00")`, int64(1796119200000)},
		{`to_timestamp("2026-12-01T10:00:00.5Z")`, int64(1796119200500)},
		{`to_timestamp("01/12/2026 10:00", "dd/MM/yyyy HH:mm")`, int64(1796119200000)},
		{`to_timestamp("2026-12-01", "2006-01-02")`, int64(1796083200000)},
		{`unix_ms(value.ts)`, int64(1796119200123)},
		{`date_format(timestamp)`, "2026-12-01 10:00:00.123"},
		{`date_format(timestamp, "yyyy-MM-dd")`, "2026-12-01"},
		{`date_format(timestamp, "2006-01-02T15:04")`, "2026-12-01T10:00"},
		{`date_format(to_timestamp(value.ts) + 1000, "HH:mm:ss.SSS")`, "10:00:01.123"},
		{`date("2026-12-01 10:00:00", "2006-01-02 15:04:05").UnixMilli()`, int64(1796119200000)},
	} {
		got, err := evalOn(t, tc.src, r)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", tc.src, got, got, tc.want, tc.want)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{`to_timestamp("yesterday")`, `to_timestamp: "yesterday" is not a time`},
		{`date_format("x")`, "date_format: the time must be milliseconds since the epoch"},
	} {
		_, err := evalOn(t, tc.src, r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.src, err, tc.want)
		}
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Every "`expression` → `result`" example of the Functions docs evaluates
// to its result, on a record whose value has the fields they name.
func TestFunctionsDocExamples(t *testing.T) {
	r := krec{Value: `{"user_id":"u-42","order_id":"o-1","none":null}`, TS: 1796119200123} // 2026-12-01 10:00:00.123
	re := regexp.MustCompile("`([^`]+)` → `([^`]+)`")
	examples := re.FindAllStringSubmatch(FunctionsDoc, -1)
	if len(examples) < 7 {
		t.Fatalf("found %d examples in FunctionsDoc, want at least 7", len(examples))
	}
	for _, m := range examples {
		got, err := evalOn(t, m[1], r)
		if err != nil {
			t.Errorf("%s: %v", m[1], err)
			continue
		}
		var want any
		if err := json.Unmarshal([]byte(m[2]), &want); err != nil {
			t.Fatalf("example result %s: %v", m[2], err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) && !(isNumber(want) && fmt.Sprint(got) == strconv.FormatFloat(want.(float64), 'f', -1, 64)) {
			t.Errorf("%s = %v, the docs say %s", m[1], got, m[2])
		}
	}
}

func isNumber(v any) bool { _, ok := v.(float64); return ok }
