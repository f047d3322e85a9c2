package pipeline

import (
	"reflect"
	"testing"
)

// TestExprFastPath: the expressions the fast path takes give what the VM
// gives, value for value and error for error, and the planner's event
// time expression does take it.
func TestExprFastPath(t *testing.T) {
	exprs := []struct {
		src  string
		kind ResultKind
		fast bool
	}{
		{"((value.event_type == 0)) ? (to_timestamp(value.person.dateTime)) : (((value.event_type == 1)) ? (to_timestamp(value.auction.dateTime)) : (to_timestamp(value.bid.dateTime)))", AnyResult, true},
		{"to_timestamp(value.t)", AnyResult, true},
		{"value.g0", AnyResult, true},
		{"value.a.b", AnyResult, true},
		{"value.n != 2", BoolResult, true},
		{`value.s == "x" ? 1 : nil`, AnyResult, true},
		{"value.n == 2 ? true : value.b", BoolResult, true},
		{"value.n", BoolResult, true},
		{"value.n + 1", AnyResult, false},
		{"key", AnyResult, false},
		{"to_timestamp(value.t, 'yyyy-MM-dd')", AnyResult, false},
	}
	values := []string{
		`{"event_type":0,"person":{"dateTime":"2026-01-01 00:00:00.123"}}`,
		`{"event_type":1,"auction":{"dateTime":"2026-02-28 23:59:59.999"}}`,
		`{"event_type":2,"bid":{"dateTime":"2024-02-29 12:00:00.000"}}`,
		`{"event_type":2,"bid":{"dateTime":"2026-02-29 12:00:00.000"}}`, // no such day
		`{"event_type":2,"bid":{"dateTime":"2026-04-31 12:00:00.000"}}`,
		`{"event_type":2,"bid":{"dateTime":"2026-01-01T00:00:01.5Z"}}`,
		`{"event_type":2,"bid":{"dateTime":"2026-01-01 24:00:00.000"}}`,
		`{"event_type":2,"bid":{"dateTime":"2026-01-01 00:00:00.00x"}}`,
		`{"event_type":2,"bid":{"dateTime":null}}`,
		`{"event_type":2,"bid":{"dateTime":17}}`,
		`{"event_type":"0","person":{"dateTime":"2026-01-01 00:00:00.123"}}`,
		`{"event_type":0.0,"person":{"dateTime":"2026-01-01 00:00:00.123"}}`,
		`{"t":"1999-12-31 23:59:59.001","g0":1000,"a":{"b":[1,{"c":2}]},"n":2,"s":"x","b":false}`,
		`{"t":"1999-12-31 23:59:59","g0":"1000","n":"2","s":"y","b":"no"}`,
		`{"n":2.5}`,
		`{}`,
		` { "t" : "2026-01-01 00:00:00.000" , "a" : { "b" : [1, {"c": 2}] }, "n": -1.5e3 } `,
		`{"a":{"b":1},"a":{"b":2}}`,
		`{"a":[{"b":1}],"g0":1e2,"n":0}`,
		`{"a":{"b":{"x":[1,"y",null]}},"s":"x\"y","t":"2026-01-01 00:00:00.000"}`,
		`{"a":{"b":true,"b":false}}`,
		`{"a":null,"g0":-0,"n":12345678901234567890}`,
		`{"event_type":2,"bid":{"dateTime":"2026-01-01 00:00:00.000"},"event_type":0}`,
		`[{"a":1}]`,
		`not json`,
		`{"n":2,`,
	}
	for _, x := range exprs {
		e, err := CompileExpr(x.src, x.kind)
		if err != nil {
			t.Fatalf("%s: %v", x.src, err)
		}
		if (e.fast != nil) != x.fast {
			t.Errorf("%s: fast path %v, want %v", x.src, e.fast != nil, x.fast)
		}
		vmOnly, err := CompileExpr(x.src, x.kind)
		if err != nil {
			t.Fatal(err)
		}
		vmOnly.fast = nil
		for _, v := range values {
			r := &handle[krec]{acc: &kAccess, rec: krec{Value: v}}
			got, gotErr := e.Eval(r)
			want, wantErr := vmOnly.Eval(r)
			if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("%s over %s: fast path %#v, %v; VM %#v, %v", x.src, v, got, gotErr, want, wantErr)
			}
		}
	}
}

// TestExprFastPathMutations: over every one-byte change and cut of a few
// records (most of them no longer JSON), the fast path's one-pass reader
// agrees with the VM's gjson reads.
func TestExprFastPathMutations(t *testing.T) {
	srcs := []string{
		"((value.event_type == 0)) ? (to_timestamp(value.person.dateTime)) : (((value.event_type == 1)) ? (to_timestamp(value.auction.dateTime)) : (to_timestamp(value.bid.dateTime)))",
		"value.a.b",
		"value.n",
	}
	docs := []string{
		`{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"dateTime":"2026-01-01 00:00:00.000","extra":"ab"}}`,
		`{"a":{"b":[1,{"c":-2.5e1}],"n":true},"n":12}`,
	}
	alphabet := []byte("{}[]\":,\\ 0123456789-.eEtrufalsn\x01")
	for _, src := range srcs {
		e, err := CompileExpr(src, AnyResult)
		if err != nil {
			t.Fatal(err)
		}
		vmOnly, _ := CompileExpr(src, AnyResult)
		vmOnly.fast = nil
		check := func(v string) {
			r := &handle[krec]{acc: &kAccess, rec: krec{Value: v}}
			got, gotErr := e.Eval(r)
			want, wantErr := vmOnly.Eval(r)
			if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("%s over %q: fast path %#v, %v; VM %#v, %v", src, v, got, gotErr, want, wantErr)
			}
		}
		for _, d := range docs {
			for i := 0; i <= len(d); i++ {
				check(d[:i])
				for _, c := range alphabet {
					if i < len(d) {
						check(d[:i] + string(c) + d[i+1:])
					}
					check(d[:i] + string(c) + d[i:])
				}
			}
		}
	}
}

func BenchmarkExprEventTime(b *testing.B) {
	src := "((value.event_type == 0)) ? (to_timestamp(value.person.dateTime)) : (((value.event_type == 1)) ? (to_timestamp(value.auction.dateTime)) : (to_timestamp(value.bid.dateTime)))"
	for _, fast := range []bool{false, true} {
		name := "vm"
		if fast {
			name = "fast"
		}
		b.Run(name, func(b *testing.B) {
			e, err := CompileExpr(src, AnyResult)
			if err != nil {
				b.Fatal(err)
			}
			if !fast {
				e.fast = nil
			}
			r := &handle[krec]{acc: &kAccess, rec: krec{Value: `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":1001,"price":13015233,"channel":"Facebook","url":"https://www.nexmark.com/hszk/nmop/kak/item.htm?query=1","dateTime":"2026-01-01 00:00:00.000","extra":"onayzqxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`}}
			for i := 0; i < b.N; i++ {
				if _, err := e.Eval(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
