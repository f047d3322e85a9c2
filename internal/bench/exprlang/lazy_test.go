package exprlang

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// lazyCases: an expression (expr, CEL) and how many times the record's
// value must be parsed to evaluate it on SampleRecord (topic "orders").
var lazyCases = []struct {
	expr, cel string
	parses    int
}{
	{`key + ":x"`, `key + ":x"`, 0},
	{`headers["source"] == "web-eu"`, `headers["source"] == "web-eu"`, 0},
	{`value.amount > 100 && value.country == "DE"`, `value.amount > 100 && value.country == "DE"`, 1},
	{`topic == "payments" && value.amount > 100`, `topic == "payments" && value.amount > 100`, 0},
	{`topic == "orders" && value.amount > 100`, `topic == "orders" && value.amount > 100`, 1},
	{`topic == "orders" || value.amount > 100`, `topic == "orders" || value.amount > 100`, 0},
}

// TestLazy checks that, with the record bound through CELActivation
// (CEL) or the rewrite of CompileExprLazy (expr), a record's JSON is
// parsed only when evaluation reads value, and at most once.
func TestLazy(t *testing.T) {
	env, err := NewCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	r := SampleRecord()
	for _, c := range lazyCases {
		pe, err := CompileExprLazy(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		lz := &LazyExpr{Parse: ParseValue}
		lz.Reset(r)
		if _, err := expr.Run(pe, map[string]any{"__rec": lz}); err != nil {
			t.Fatal(err)
		}
		if lz.Parses != c.parses {
			t.Errorf("expr %s: parsed %d times, want %d", c.expr, lz.Parses, c.parses)
		}

		pc, err := CompileCEL(env, c.cel)
		if err != nil {
			t.Fatal(err)
		}
		act := &CELActivation{Parse: ParseValue}
		act.Reset(r)
		if _, _, err := pc.Eval(act); err != nil {
			t.Fatal(err)
		}
		if act.Parses != c.parses {
			t.Errorf("cel %s: parsed %d times, want %d", c.cel, act.Parses, c.parses)
		}
	}
}

// BenchmarkLazy: a filter whose cheap first test fails on this record,
// with the real encoding/json parse. "eager" parses every record first.
func BenchmarkLazy(b *testing.B) {
	const src = `topic == "payments" && value.amount > 100`
	r := SampleRecord()
	b.Run("expr_eager", func(b *testing.B) {
		p, err := CompileExprMap(src)
		if err != nil {
			b.Fatal(err)
		}
		var machine vm.VM
		m := make(map[string]any, 8)
		b.ReportAllocs()
		for b.Loop() {
			v, err := ParseValue(r.Value)
			if err != nil {
				b.Fatal(err)
			}
			BindExprMap(m, r, v)
			out, err := machine.Run(p, m)
			if err != nil {
				b.Fatal(err)
			}
			sink = out
		}
	})
	b.Run("expr_lazy", func(b *testing.B) {
		p, err := CompileExprLazy(src)
		if err != nil {
			b.Fatal(err)
		}
		var machine vm.VM
		lz := &LazyExpr{Parse: ParseValue}
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
	b.Run("cel_lazy", func(b *testing.B) {
		env, err := NewCELEnv()
		if err != nil {
			b.Fatal(err)
		}
		p, err := CompileCEL(env, src)
		if err != nil {
			b.Fatal(err)
		}
		act := &CELActivation{Parse: ParseValue}
		b.ReportAllocs()
		for b.Loop() {
			act.Reset(r)
			out, _, err := p.Eval(act)
			if err != nil {
				b.Fatal(err)
			}
			sink = out
		}
	})
}

// errorCases are mistakes a job file author makes.
var errorCases = []struct{ name, expr, cel string }{
	{"typo >>", `value.amount >> 3`, `value.amount >> 3`},
	{"unknown name", `vlaue.x`, `vlaue.x`},
	{"= for ==", `value.amount > 100 && value.country = "DE"`, `value.amount > 100 && value.country = "DE"`},
	{"type error", `key + 1`, `key + 1`},
	{"unknown function", `lenght(value.items)`, `sise(value.items)`},
}

// TestCompileErrors prints each engine's compile error (go test -v -run
// CompileErrors) and checks both reject every case.
func TestCompileErrors(t *testing.T) {
	env, err := NewCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range errorCases {
		_, errE := CompileExprMap(c.expr)
		_, errC := CompileCEL(env, c.cel)
		fmt.Fprintf(&sb, "### %s\nexpr  %s\n%v\n\ncel   %s\n%v\n\n", c.name, c.expr, errE, c.cel, errC)
		if errE == nil || errC == nil {
			t.Errorf("%s: expr err %v, cel err %v", c.name, errE, errC)
		}
	}
	t.Log("\n" + sb.String())
}

// TestRuntimeErrors prints each engine's error for a misspelt JSON field,
// which no checker can see since value's fields are dynamic.
func TestRuntimeErrors(t *testing.T) {
	env, err := NewCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	r, v := SampleRecord(), mustValue(t)
	const src = `value.amout > 100`
	pe, err := CompileExprMap(src)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	BindExprMap(m, r, v)
	_, errE := expr.Run(pe, m)
	pc, err := CompileCEL(env, src)
	if err != nil {
		t.Fatal(err)
	}
	act := &CELActivation{Parse: ParseValue}
	act.Reset(r)
	_, _, errC := pc.Eval(act)
	if errE == nil || errC == nil {
		t.Errorf("expr err %v, cel err %v", errE, errC)
	}
	t.Logf("\nexpr  %s\n%v\n\ncel   %s\n%v", src, errE, src, errC)
}

// TestJSONNumbers: JSON numbers are float64, CEL has no double+int
// overload, so arithmetic with an integer literal fails in CEL at run
// time (the checker cannot see it: value's fields are dyn). expr mixes.
func TestJSONNumbers(t *testing.T) {
	env, err := NewCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	r, v := SampleRecord(), mustValue(t)
	for _, src := range []string{`value.amount + 1`, `value.items[0].qty * 2`} {
		pe, err := CompileExprMap(src)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		BindExprMap(m, r, v)
		outE, errE := expr.Run(pe, m)
		pc, err := CompileCEL(env, src)
		if err != nil {
			t.Fatal(err)
		}
		act := &CELActivation{Parse: ParseValue}
		act.Reset(r)
		outC, _, errC := pc.Eval(act)
		if errE != nil || errC == nil {
			t.Errorf("%s: expr %v %v, cel %v %v", src, outE, errE, outC, errC)
		}
		t.Logf("%s: expr %v, cel error %q", src, outE, errC)
	}
}
