package exprlang

import (
	"encoding/json"
	"reflect"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	gojson "github.com/goccy/go-json"
	"github.com/tidwall/gjson"
	"github.com/valyala/fastjson"
)

var sink any

// want is each case's result on SampleRecord.
var want = map[string]any{
	"filter":     true,
	"keyby":      "u-42",
	"map":        map[string]any{"user": "u-42", "total": 129.5 * 1.19, "n": nil}, // n checked apart
	"concat":     "o-123:EUR",
	"startswith": true,
}

func mustValue(tb testing.TB) map[string]any {
	v, err := ParseValue(SampleValue)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func checkResult(t *testing.T, engine, name string, got any) {
	t.Helper()
	if name == "map" {
		m, ok := got.(map[string]any)
		if !ok || m["user"] != "u-42" || m["total"] != 129.5*1.19 || len(m) != 3 {
			t.Errorf("%s %s: got %#v", engine, name, got)
		}
		switch n := m["n"].(type) {
		case int:
			if n != 2 {
				t.Errorf("%s %s: n = %v", engine, name, n)
			}
		case int64:
			if n != 2 {
				t.Errorf("%s %s: n = %v", engine, name, n)
			}
		default:
			t.Errorf("%s %s: n is %T", engine, name, n)
		}
		return
	}
	if !reflect.DeepEqual(got, want[name]) {
		t.Errorf("%s %s: got %#v, want %#v", engine, name, got, want[name])
	}
}

// TestSameResults checks that every variant benchmarked computes the same.
func TestSameResults(t *testing.T) {
	r, v := SampleRecord(), mustValue(t)
	env, err := NewCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Cases {
		pm, err := CompileExprMap(c.Expr)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		BindExprMap(m, r, v)
		got, err := expr.Run(pm, m)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "expr/map", c.Name, got)

		ps, err := CompileExprStruct(c.Expr)
		if err != nil {
			t.Fatal(err)
		}
		got, err = expr.Run(ps, &ExprEnv{r.Key, v, r.Headers, r.Topic, r.Partition, r.Offset, r.Timestamp})
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "expr/struct", c.Name, got)

		pl, err := CompileExprLazy(c.Expr)
		if err != nil {
			t.Fatal(err)
		}
		lz := &LazyExpr{Parse: ParseValue}
		lz.Reset(r)
		got, err = expr.Run(pl, map[string]any{"__rec": lz})
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "expr/lazy", c.Name, got)

		pc, err := CompileCEL(env, c.CEL)
		if err != nil {
			t.Fatal(c.Name, err)
		}
		act := &CELActivation{Parse: ParseValue}
		act.Reset(r)
		out, _, err := pc.Eval(act)
		if err != nil {
			t.Fatal(c.Name, err)
		}
		g, err := CELToGo(out)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "cel/activation", c.Name, g)

		out, _, err = pc.Eval(map[string]any{
			"key": r.Key, "value": v, "headers": r.Headers, "topic": r.Topic,
			"partition": r.Partition, "offset": r.Offset, "timestamp": r.Timestamp,
		})
		if err != nil {
			t.Fatal(c.Name, err)
		}
		g, err = CELToGo(out)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "cel/map", c.Name, g)
	}
}

// ---------------------------------------------------------------- JSON

func BenchmarkJSON(b *testing.B) {
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(SampleValue, &m); err != nil {
				b.Fatal(err)
			}
			sink = m
		}
	})
	b.Run("goccy_go-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := gojson.Unmarshal(SampleValue, &m); err != nil {
				b.Fatal(err)
			}
			sink = m
		}
	})
	// fastjson parses into its own reused tree, not map[string]any: the
	// engines cannot read it without a conversion. Shown for scale.
	b.Run("fastjson_tree", func(b *testing.B) {
		b.ReportAllocs()
		var p fastjson.Parser
		for b.Loop() {
			v, err := p.ParseBytes(SampleValue)
			if err != nil {
				b.Fatal(err)
			}
			sink = v.GetFloat64("amount")
		}
	})
	// gjson reads the two fields the filter needs without parsing the rest.
	b.Run("gjson_two_fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res := gjson.GetManyBytes(SampleValue, "amount", "country")
			sink = res[0].Float() > 100 && res[1].Str == "DE"
		}
	})
}

// ---------------------------------------------------------------- eval

// Every eval benchmark binds the record's names and evaluates, per
// record, with the value already parsed (the same map[string]any for
// all), and turns the result into the Go value onceflow passes on.

func BenchmarkEval(b *testing.B) {
	r, v := SampleRecord(), mustValue(b)
	env, err := NewCELEnv()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range Cases {
		b.Run(c.Name+"/expr_map", func(b *testing.B) {
			p, err := CompileExprMap(c.Expr)
			if err != nil {
				b.Fatal(err)
			}
			var machine vm.VM
			m := make(map[string]any, 8)
			b.ReportAllocs()
			for b.Loop() {
				BindExprMap(m, r, v)
				out, err := machine.Run(p, m)
				if err != nil {
					b.Fatal(err)
				}
				sink = out
			}
		})
		b.Run(c.Name+"/expr_struct", func(b *testing.B) {
			p, err := CompileExprStruct(c.Expr)
			if err != nil {
				b.Fatal(err)
			}
			var machine vm.VM
			e := new(ExprEnv)
			b.ReportAllocs()
			for b.Loop() {
				*e = ExprEnv{r.Key, v, r.Headers, r.Topic, r.Partition, r.Offset, r.Timestamp}
				out, err := machine.Run(p, e)
				if err != nil {
					b.Fatal(err)
				}
				sink = out
			}
		})
		b.Run(c.Name+"/expr_lazy", func(b *testing.B) {
			p, err := CompileExprLazy(c.Expr)
			if err != nil {
				b.Fatal(err)
			}
			var machine vm.VM
			lz := &LazyExpr{Parse: func([]byte) (map[string]any, error) { return v, nil }}
			m := map[string]any{"__rec": lz}
			b.ReportAllocs()
			for b.Loop() {
				lz.Reset(r)
				out, err := machine.Run(p, m)
				if err != nil {
					b.Fatal(err)
				}
				sink = out
			}
		})
		b.Run(c.Name+"/cel_activation", func(b *testing.B) {
			p, err := CompileCEL(env, c.CEL)
			if err != nil {
				b.Fatal(err)
			}
			act := &CELActivation{}
			b.ReportAllocs()
			for b.Loop() {
				act.Reset(r)
				act.SetValue(v)
				out, _, err := p.Eval(act)
				if err != nil {
					b.Fatal(err)
				}
				g, err := CELToGo(out)
				if err != nil {
					b.Fatal(err)
				}
				sink = g
			}
		})
		b.Run(c.Name+"/cel_map", func(b *testing.B) {
			p, err := CompileCEL(env, c.CEL)
			if err != nil {
				b.Fatal(err)
			}
			m := make(map[string]any, 8)
			b.ReportAllocs()
			for b.Loop() {
				BindExprMap(m, r, v) // same map shape; CEL adapts Go values on read
				out, _, err := p.Eval(m)
				if err != nil {
					b.Fatal(err)
				}
				g, err := CELToGo(out)
				if err != nil {
					b.Fatal(err)
				}
				sink = g
			}
		})
	}
}

// BenchmarkCELMapResult is the map case with CEL split up: evaluation
// alone, and with each way of turning its result into map[string]any.
func BenchmarkCELMapResult(b *testing.B) {
	r, v := SampleRecord(), mustValue(b)
	env, err := NewCELEnv()
	if err != nil {
		b.Fatal(err)
	}
	p, err := CompileCEL(env, Cases[2].CEL)
	if err != nil {
		b.Fatal(err)
	}
	mapType := reflect.TypeOf(map[string]any{})
	for _, conv := range []struct {
		name string
		f    func(ref.Val) (any, error)
	}{
		{"eval_only", func(v ref.Val) (any, error) { return v, nil }},
		{"CELToGo", CELToGo},
		{"ConvertToNative", func(v ref.Val) (any, error) { return v.ConvertToNative(mapType) }},
	} {
		b.Run(conv.name, func(b *testing.B) {
			act := &CELActivation{}
			b.ReportAllocs()
			for b.Loop() {
				act.Reset(r)
				act.SetValue(v)
				out, _, err := p.Eval(act)
				if err != nil {
					b.Fatal(err)
				}
				g, err := conv.f(out)
				if err != nil {
					b.Fatal(err)
				}
				sink = g
			}
		})
	}
}

// ---------------------------------------------------------------- compile

func BenchmarkCompile(b *testing.B) {
	src := Cases[2] // the map expression, the longest
	b.Run("expr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := CompileExprMap(src.Expr)
			if err != nil {
				b.Fatal(err)
			}
			sink = p
		}
	})
	b.Run("cel", func(b *testing.B) {
		env, err := NewCELEnv()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := CompileCEL(env, src.CEL)
			if err != nil {
				b.Fatal(err)
			}
			sink = p
		}
	})
	// Once per process (or per job): declaring the CEL environment.
	b.Run("cel_newenv", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			env, err := NewCELEnv()
			if err != nil {
				b.Fatal(err)
			}
			sink = env
		}
	})
}

var _ = cel.StringType
