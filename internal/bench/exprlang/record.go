package exprlang

import (
	"encoding/json"
	"fmt"
	"reflect"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Record is a Kafka record as onceflow sees it.
type Record struct {
	Key       string
	Value     []byte
	Headers   map[string]string
	Topic     string
	Partition int32
	Offset    int64
	Timestamp int64
}

// SampleValue is the JSON value of the benchmark record (about 150 bytes).
var SampleValue = []byte(`{"order_id":"o-123","user_id":"u-42","amount":129.5,"currency":"EUR","country":"DE","items":[{"sku":"a","qty":2},{"sku":"b","qty":1}],"ts":1764000000000}`)

// SampleRecord returns the benchmark record.
func SampleRecord() *Record {
	return &Record{
		Key:       "o-123",
		Value:     SampleValue,
		Headers:   map[string]string{"source": "web-eu", "trace": "4bf92f3577b34da6"},
		Topic:     "orders",
		Partition: 7,
		Offset:    1234567,
		Timestamp: 1764000000123,
	}
}

// ParseValue parses a record value with encoding/json, the parse both
// engines are given.
func ParseValue(b []byte) (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal(b, &m)
	return m, err
}

// Case is one benchmarked expression, written in each language.
type Case struct {
	Name string
	Expr string // github.com/expr-lang/expr
	CEL  string // CEL
}

// Cases are the workload's expressions. The two texts differ only where
// the languages do: len vs size, infix startsWith/contains vs methods.
var Cases = []Case{
	{"filter", `value.amount > 100 && value.country == "DE"`, `value.amount > 100 && value.country == "DE"`},
	{"keyby", `value.user_id`, `value.user_id`},
	{"map", `{"user": value.user_id, "total": value.amount * 1.19, "n": len(value.items)}`,
		`{"user": value.user_id, "total": value.amount * 1.19, "n": size(value.items)}`},
	{"concat", `key + ":" + value.currency`, `key + ":" + value.currency`},
	{"startswith", `key startsWith "o-" && headers["source"] contains "web"`,
		`key.startsWith("o-") && headers["source"].contains("web")`},
}

// ---------------------------------------------------------------- expr

// ExprEnv is the struct environment for expr. expr reads its fields
// with reflection (runtime.FetchField), only the fields an expression
// names.
type ExprEnv struct {
	Key       string            `expr:"key"`
	Value     map[string]any    `expr:"value"`
	Headers   map[string]string `expr:"headers"`
	Topic     string            `expr:"topic"`
	Partition int32             `expr:"partition"`
	Offset    int64             `expr:"offset"`
	Timestamp int64             `expr:"timestamp"`
}

// exprMapTypes declares the names and types for compiling against a
// map environment.
func exprMapTypes() map[string]any {
	return map[string]any{
		"key": "", "value": map[string]any{}, "headers": map[string]string{},
		"topic": "", "partition": int32(0), "offset": int64(0), "timestamp": int64(0),
	}
}

// CompileExprMap compiles src for a map[string]any environment; the VM
// reads top-level names from it without reflection (OpLoadFast).
func CompileExprMap(src string) (*vm.Program, error) {
	return expr.Compile(src, expr.Env(exprMapTypes()))
}

// CompileExprStruct compiles src for an ExprEnv environment.
func CompileExprStruct(src string) (*vm.Program, error) {
	return expr.Compile(src, expr.Env(ExprEnv{}))
}

// BindExprMap fills a reused map environment with r and its parsed value.
// Boxing the string and the int64s allocates.
func BindExprMap(m map[string]any, r *Record, value map[string]any) {
	m["key"] = r.Key
	m["value"] = value
	m["headers"] = r.Headers
	m["topic"] = r.Topic
	m["partition"] = r.Partition
	m["offset"] = r.Offset
	m["timestamp"] = r.Timestamp
}

// LazyExpr is the per-record state of an expr program compiled with
// CompileExprLazy: the environment holds only a pointer to it, and the
// record's value is parsed the first time the expression reads it.
type LazyExpr struct {
	Rec    *Record
	Parse  func([]byte) (map[string]any, error)
	Parses int // how many times Parse ran, for the laziness test

	value  map[string]any
	parsed bool
}

// Reset points l at r, dropping the previous record's parsed value.
func (l *LazyExpr) Reset(r *Record) { l.Rec, l.value, l.parsed = r, nil, false }

func (l *LazyExpr) get() (map[string]any, error) {
	if !l.parsed {
		l.Parses++
		v, err := l.Parse(l.Rec.Value)
		if err != nil {
			return nil, err
		}
		l.value, l.parsed = v, true
	}
	return l.value, nil
}

// lazyNames rewrites every record name into a call of a function given
// the per-record state, so a name is read only when evaluation gets to it.
type lazyNames struct{}

func (lazyNames) Visit(node *ast.Node) {
	id, ok := (*node).(*ast.IdentifierNode)
	if !ok {
		return
	}
	if _, ok := exprMapTypes()[id.Value]; !ok {
		return
	}
	ast.Patch(node, &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: "__" + id.Value},
		Arguments: []ast.Node{&ast.IdentifierNode{Value: "__rec"}},
	})
}

// CompileExprLazy compiles src so that the environment is
// map[string]any{"__rec": *LazyExpr}; value is parsed on first use.
func CompileExprLazy(src string) (*vm.Program, error) {
	env := exprMapTypes()
	env["__rec"] = (*LazyExpr)(nil)
	rec := func(p []any) *Record { return p[0].(*LazyExpr).Rec }
	return expr.Compile(src,
		expr.Env(env),
		expr.Patch(lazyNames{}),
		expr.Function("__value", func(p ...any) (any, error) { return p[0].(*LazyExpr).get() },
			new(func(*LazyExpr) map[string]any)),
		expr.Function("__key", func(p ...any) (any, error) { return rec(p).Key, nil },
			new(func(*LazyExpr) string)),
		expr.Function("__headers", func(p ...any) (any, error) { return rec(p).Headers, nil },
			new(func(*LazyExpr) map[string]string)),
		expr.Function("__topic", func(p ...any) (any, error) { return rec(p).Topic, nil },
			new(func(*LazyExpr) string)),
		expr.Function("__partition", func(p ...any) (any, error) { return rec(p).Partition, nil },
			new(func(*LazyExpr) int32)),
		expr.Function("__offset", func(p ...any) (any, error) { return rec(p).Offset, nil },
			new(func(*LazyExpr) int64)),
		expr.Function("__timestamp", func(p ...any) (any, error) { return rec(p).Timestamp, nil },
			new(func(*LazyExpr) int64)),
	)
}

// ---------------------------------------------------------------- CEL

// NewCELEnv declares the record names for CEL.
func NewCELEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("key", cel.StringType),
		cel.Variable("value", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("topic", cel.StringType),
		cel.Variable("partition", cel.IntType),
		cel.Variable("offset", cel.IntType),
		cel.Variable("timestamp", cel.IntType),
	)
}

// CompileCEL parses, checks and plans src.
func CompileCEL(env *cel.Env, src string) (cel.Program, error) {
	a, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(a)
}

// CELActivation resolves the record names on demand: nothing is boxed
// or parsed for a name the expression does not read (or does not reach,
// past a short-circuit), and no reflection is involved. Reused per worker.
type CELActivation struct {
	Rec    *Record
	Parse  func([]byte) (map[string]any, error)
	Parses int

	value  ref.Val
	parsed bool
}

// Reset points a at r, dropping the previous record's parsed value.
func (a *CELActivation) Reset(r *Record) { a.Rec, a.value, a.parsed = r, nil, false }

// SetValue supplies an already parsed value (the benchmarks' shared input).
func (a *CELActivation) SetValue(v map[string]any) {
	a.value, a.parsed = types.NewStringInterfaceMap(types.DefaultTypeAdapter, v), true
}

// ResolveName implements interpreter.Activation.
func (a *CELActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "key":
		return types.String(a.Rec.Key), true
	case "value":
		if !a.parsed {
			a.Parses++
			v, err := a.Parse(a.Rec.Value)
			if err != nil {
				return types.WrapErr(err), true
			}
			a.SetValue(v)
		}
		return a.value, true
	case "headers":
		return types.NewStringStringMap(types.DefaultTypeAdapter, a.Rec.Headers), true
	case "topic":
		return types.String(a.Rec.Topic), true
	case "partition":
		return types.Int(a.Rec.Partition), true
	case "offset":
		return types.Int(a.Rec.Offset), true
	case "timestamp":
		return types.Int(a.Rec.Timestamp), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *CELActivation) Parent() interpreter.Activation { return nil }

// CELToGo turns a CEL result into the Go value onceflow passes on
// (string, float64, int64, bool, map[string]any, []any).
func CELToGo(v ref.Val) (any, error) {
	switch v := v.(type) {
	case types.String:
		return string(v), nil
	case types.Bool:
		return bool(v), nil
	case types.Double:
		return float64(v), nil
	case types.Int:
		return int64(v), nil
	case *types.Err:
		return nil, v
	case traits.Mapper:
		m := make(map[string]any, int(v.Size().(types.Int)))
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			e, err := CELToGo(v.Get(k))
			if err != nil {
				return nil, err
			}
			m[string(ks)] = e
		}
		return m, nil
	}
	return v.ConvertToNative(reflect.TypeOf((*any)(nil)).Elem())
}
