package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
	"github.com/tidwall/gjson"

	"github.com/onceflow/onceflow/internal/sql/eval"
)

// Expressions are written in the expr language (github.com/expr-lang/expr;
// the choice against CEL is measured in internal/bench/exprlang). An
// expression sees one record through these names:
//
//	key        the record key, a string
//	value      the record value parsed as JSON (value.user.id, value.items[0])
//	raw        the record value as a string, unparsed
//	headers    the record headers, a map of strings
//	topic      the topic it was read from
//	partition  its partition
//	offset     its offset
//	timestamp  its timestamp, in milliseconds since the Unix epoch
//
// record.key, record.value, ... are the same names (the key expression
// record.key of earlier job files).
//
// Parsing is lazy and partial. A path into the value with constant names
// and indexes (value.user.id, value["a b"], value.items[0]) is read
// straight from the JSON text without parsing the rest, and only when
// the expression is evaluated; only the bare name value (such as
// len(value) or a map built from the whole value) parses the whole
// document. An expression that never names value reads no JSON at all.

// ExpressionsDoc is the Expressions section of the reference docs
// (docs/operators.md).
const ExpressionsDoc = `Conditions, keys and values are expressions in the [expr language](https://expr-lang.org/docs/language-definition), ` +
	"compiled once when the job starts (a mistake is reported with the job file's line and the column in the expression) and evaluated per record. " +
	"An expression sees the record through these names:\n\n" +
	"| name | what it is |\n|---|---|\n" +
	"| `key` | the record key, a string |\n" +
	"| `value` | the record value parsed as JSON: `value.user.id`, `value.items[0].sku`, `value[\"a b\"]` |\n" +
	"| `raw` | the record value as a string, unparsed |\n" +
	"| `headers` | the headers, a map of strings: `headers.trace` |\n" +
	"| `topic`, `partition`, `offset` | where the record was read |\n" +
	"| `timestamp` | the record timestamp, in milliseconds since the Unix epoch |\n\n" +
	"`record.key`, `record.value`, ... are the same names. Operators (`+ - * / % **`, `== != < <= > >=`, `&& || !`, `??` for a default, " +
	"`in`, `contains`, `startsWith`, `matches`, `? :`) are the language's; the functions are its builtins and those onceflow adds " +
	"(Functions, below). JSON numbers are integers when written without a fraction " +
	"(an id keeps all its digits), otherwise floats; a missing field is `null`.\n\n" +
	"Parsing is lazy: a path into the value (`value.a.b`, `value.items[0]`) is read straight from the JSON text, only when the expression " +
	"is evaluated, without parsing the rest; an expression that never names `value` reads no JSON at all. A record an expression fails on " +
	"(the value is not JSON, `null` compared with a number) is a poison record for `errors.policy`; write `value.amount ?? 0` where a field may be missing.\n"

// The names an expression can use, with the type the checker assumes.
var exprNames = []string{"key", "value", "raw", "headers", "topic", "partition", "offset", "timestamp"}

// jsonFunc is the function record paths are rewritten into.
const jsonFunc = "__json"

// varFunc is the function the caller's extra names are rewritten into:
// their values are of any type, which the checker cannot be told
// otherwise.
const varFunc = "__var"

// recName is the environment entry holding the record being evaluated.
const recName = "__rec"

// Expr is a compiled expression over a record. It is safe for concurrent
// use by several subtasks.
type Expr struct {
	src  string
	prog *vm.Program
	// uses are the record names the expression reads (besides JSON
	// paths, which go through recName).
	uses []string
	// extra are the names a caller binds besides the record's (explode's
	// item).
	extra []string
	json  bool // reads JSON paths
	vars  bool // reads the caller's names
	pool  sync.Pool
	// fast evaluates the expression without the VM (exprfast.go), nil
	// when it has a part the fast path does not know; boolResult: its
	// result must be a boolean.
	fast       fastFn
	fp         *fastPaths
	boolResult bool
}

// ExprError is an expression that does not compile: Column is the
// position in the expression (from 1) of the problem.
type ExprError struct {
	Expr   string
	Column int
	Msg    string
}

func (e *ExprError) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("expression %q %s", e.Expr, e.Msg)
	}
	return fmt.Sprintf("expression %q: %s at column %d", e.Expr, e.Msg, e.Column)
}

// ResultKind is what a caller needs an expression to produce.
type ResultKind int

// The result kinds.
const (
	// AnyResult: any value (map's fields, aggregates' inputs).
	AnyResult ResultKind = iota
	// BoolResult: true or false (filter, route's if).
	BoolResult
)

// CompileExpr compiles src. extra names variables the caller binds with
// EvalWith besides the record's (explode's item).
func CompileExpr(src string, kind ResultKind, extra ...string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &ExprError{Expr: src, Msg: "is empty: write one, such as value.user_id (docs/operators.md, Expressions)"}
	}
	env := map[string]any{
		"key": "", "raw": "", "topic": "", "partition": 0, "offset": 0, "timestamp": 0,
		"headers": map[string]string{}, "value": any(nil), recName: (*evalCtx)(nil),
		"record": map[string]any{},
	}
	p := &pathPatcher{extra: extra}
	opts := []expr.Option{
		expr.Env(env),
		expr.Patch(p),
		expr.Function(jsonFunc, func(params ...any) (any, error) {
			return params[0].(*evalCtx).path(params[1].(string))
		}),
		expr.Function(varFunc, func(params ...any) (any, error) {
			return params[0].(*evalCtx).vars[params[1].(int)], nil
		}),
	}
	opts = append(opts, exprFunctions()...)
	if kind == BoolResult {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, exprError(src, err)
	}
	e := &Expr{src: src, prog: prog, extra: extra, json: p.json, vars: p.vars}
	ids := &identCollector{}
	node := prog.Node()
	ast.Walk(&node, ids)
	seen := map[string]bool{}
	for _, n := range ids.names {
		if !seen[n] && n != recName && !contains(extra, n) {
			seen[n] = true
			e.uses = append(e.uses, n)
		}
	}
	sort.Strings(e.uses)
	if !e.vars { // compileFast refuses any name but the paths'
		e.fp = &fastPaths{plain: true}
		e.fast, e.boolResult = compileFast(node, e.fp), kind == BoolResult
	}
	e.pool.New = func() any { return &evalCtx{env: make(map[string]any, len(e.uses)+len(extra)+1)} }
	return e, nil
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// exprError turns expr's error into an ExprError with the column.
func exprError(src string, err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &ExprError{Expr: src, Column: fe.Column + 1, Msg: fe.Message}
	}
	return &ExprError{Expr: src, Column: 1, Msg: err.Error()}
}

// access is the set of RecordAccess functions evaluating the
// expression calls.
func (e *Expr) access() Access {
	var a Access
	for _, n := range e.uses {
		switch n {
		case "key":
			a |= UsesKey
		case "value", "raw":
			a |= UsesValue | UsesPosition
		case "headers":
			a |= UsesHeaders
		case "topic", "partition", "offset", "timestamp":
			a |= UsesMeta
		case "record":
			a |= UsesKey | UsesValue | UsesPosition | UsesHeaders | UsesMeta
		}
	}
	if e.json {
		a |= UsesValue | UsesPosition
	}
	return a
}

// String returns the expression's text.
func (e *Expr) String() string { return e.src }

// ReadsValue reports whether the expression reads the record value (and
// so may parse JSON).
func (e *Expr) ReadsValue() bool {
	return e.json || contains(e.uses, "value") || contains(e.uses, "raw") || contains(e.uses, "record")
}

// IsRecordKey reports whether the expression is the record key itself
// (key or record.key): keyed operators then partition by the key with no
// evaluation.
func (e *Expr) IsRecordKey() bool {
	s := strings.TrimSpace(e.src)
	return s == "key" || s == KeyRecordKey
}

// Eval evaluates the expression over r.
func (e *Expr) Eval(r Record) (any, error) { return e.EvalWith(r) }

// EvalWith evaluates the expression over r with the caller's extra names
// bound to vars, in the order CompileExpr was given them.
func (e *Expr) EvalWith(r Record, vars ...any) (any, error) {
	c := e.pool.Get().(*evalCtx)
	c.rec, c.parsed, c.doc, c.valid, c.pvRead = r, false, nil, 0, 0
	if e.fast != nil {
		v, ok := e.fast(c)
		if _, isBool := v.(bool); ok && (isBool || !e.boolResult) {
			c.rec = nil
			e.pool.Put(c)
			return v, nil
		}
		// A case the fast path leaves to the VM: evaluate it again
		// there (the value was read once more, at most).
		c.parsed, c.doc, c.valid = false, nil, 0
	}
	env := c.env
	for _, n := range e.uses {
		switch n {
		case "key":
			env[n] = r.Key()
		case "raw":
			env[n] = string(r.Value())
		case "value":
			v, err := c.whole()
			if err != nil {
				c.release(&e.pool)
				return nil, err
			}
			env[n] = v
		case "headers":
			env[n] = r.Headers()
		case "topic":
			env[n] = r.Meta().Topic
		case "partition":
			env[n] = int(r.Meta().Partition)
		case "offset":
			env[n] = int(r.Meta().Offset)
		case "timestamp":
			env[n] = int(r.Meta().Timestamp)
		case "record":
			m := r.Meta()
			v, err := c.whole()
			if err != nil {
				c.release(&e.pool)
				return nil, err
			}
			env[n] = map[string]any{"key": r.Key(), "value": v, "raw": string(r.Value()), "headers": r.Headers(),
				"topic": m.Topic, "partition": int(m.Partition), "offset": int(m.Offset), "timestamp": int(m.Timestamp)}
		}
	}
	c.vars = c.vars[:0]
	for i := range e.extra {
		if i < len(vars) {
			c.vars = append(c.vars, vars[i])
		} else {
			c.vars = append(c.vars, nil)
		}
	}
	if e.json || e.vars {
		env[recName] = c
	}
	out, err := c.vm.Run(e.prog, env)
	c.release(&e.pool)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", e.src, runtimeError(err))
	}
	return out, nil
}

// runtimeError drops expr's snippet of the expression (the message
// already names it).
func runtimeError(err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return errors.New(fe.Message)
	}
	return err
}

// EvalBool evaluates an expression compiled with BoolResult.
func (e *Expr) EvalBool(r Record) (bool, error) {
	v, err := e.Eval(r)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("expression %q gave %s, not true or false", e.src, describeValue(v))
	}
	return b, nil
}

// EvalKey evaluates the expression as a key: a string as it is, a number
// in its shortest decimal form, true or false; null, a list or an object
// is an error (ErrNoKey).
func (e *Expr) EvalKey(r Record) (string, error) {
	k, _, err := e.evalKeyOrNull(r, false)
	return k, err
}

// evalKeyOrNull is EvalKey, but with nullOK a null (or missing) value is
// no error: null is true. The record key is never null.
func (e *Expr) evalKeyOrNull(r Record, nullOK bool) (string, bool, error) {
	if e.IsRecordKey() {
		return r.Key(), false, nil
	}
	v, err := e.Eval(r)
	if nullOK && err == nil && v == nil {
		return "", true, nil
	}
	k, err := e.keyOf(v, err)
	return k, false, err
}

func (e *Expr) keyOf(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	k, ok := keyText(v)
	if !ok {
		return "", fmt.Errorf("%w: expression %q gave %s, not a string or number", ErrNoKey, e.src, describeValue(v))
	}
	return k, nil
}

// ErrNoKey is wrapped by the error of a key expression whose value cannot
// be a key.
var ErrNoKey = errors.New("no key for the record")

// keyText writes a scalar as key text.
func keyText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// describeValue names a value's JSON kind for errors.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null (is the field missing?)"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case int, int64, float64:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// evalCtx is one evaluation's state: the record, its value parsed once,
// the VM and the environment, reused through the Expr's pool.
type evalCtx struct {
	vm     vm.VM
	env    map[string]any
	rec    Record
	parsed bool
	doc    any
	vars   []any
	// valid is 1 once the value was found to be JSON, -1 when not, 0
	// before a path was read.
	valid int8
	// pvs are the fast path's values (exprfast.go); pvRead is 1 once
	// read, -1 when eval.ReadPaths declined the value, 0 before.
	pvs    []eval.PathValue
	pvRead int8
}

func (c *evalCtx) release(p *sync.Pool) {
	c.rec, c.doc = nil, nil
	clear(c.vars)
	for k := range c.env {
		c.env[k] = nil
	}
	p.Put(c)
}

// whole parses the whole value, once per evaluation.
func (c *evalCtx) whole() (any, error) {
	if !c.parsed {
		v, err := ParseJSON(c.rec.Value())
		if err != nil {
			return nil, fmt.Errorf("the value is not JSON: %w", err)
		}
		c.doc, c.parsed = v, true
	}
	return c.doc, nil
}

// path reads one path (gjson syntax, escaped) from the value. A missing
// field is nil; a value that is not JSON is an error.
func (c *evalCtx) path(p string) (any, error) {
	if c.parsed {
		return walkPath(c.doc, p), nil
	}
	raw := c.rec.Value()
	if c.valid == 0 {
		c.valid = 1
		if !gjson.ValidBytes(raw) {
			c.valid = -1
		}
	}
	if c.valid < 0 {
		return nil, errors.New("the value is not JSON")
	}
	return resultValue(gjson.GetBytes(raw, p)), nil
}

// walkPath follows a gjson path through an already parsed document.
func walkPath(doc any, p string) any {
	for _, seg := range splitPath(p) {
		switch x := doc.(type) {
		case map[string]any:
			doc = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			doc = x[i]
		default:
			return nil
		}
	}
	return doc
}

// splitPath undoes escapePath's joining.
func splitPath(p string) []string {
	var segs []string
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 < len(p) {
				i++
				b.WriteByte(p[i])
			}
		case '.':
			segs = append(segs, b.String())
			b.Reset()
		default:
			b.WriteByte(p[i])
		}
	}
	return append(segs, b.String())
}

// resultValue converts what gjson found.
func resultValue(r gjson.Result) any {
	switch r.Type {
	case gjson.Null:
		return nil
	case gjson.False:
		return false
	case gjson.True:
		return true
	case gjson.String:
		return r.Str
	case gjson.Number:
		return number(r.Raw, r.Num)
	case gjson.JSON:
		v, err := ParseJSON([]byte(r.Raw))
		if err != nil {
			return nil // unreachable: the document was valid
		}
		return v
	}
	return nil
}

// number is an integer when the JSON text is one that fits an int64
// (ids keep their digits), else a float64.
func number(raw string, f float64) any {
	if strings.ContainsAny(raw, ".eE") {
		return f
	}
	if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return int(i)
	}
	return f
}

// ParseJSON parses a JSON document into maps, lists, strings, booleans,
// nil and numbers (int when integral and in range, float64 otherwise).
func ParseJSON(b []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("text after the JSON value")
	}
	return fixNumbers(v), nil
}

func fixNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return number(string(x), f)
	case map[string]any:
		for k, e := range x {
			x[k] = fixNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fixNumbers(e)
		}
	}
	return v
}

// EncodeJSON writes an expression's value as JSON: maps with sorted keys,
// integral floats without a fraction, NaN and infinities refused.
func EncodeJSON(v any) ([]byte, error) {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return nil, fmt.Errorf("%v cannot be written as JSON", f)
	}
	return json.Marshal(v)
}

// identCollector lists the identifiers of a tree.
type identCollector struct{ names []string }

func (c *identCollector) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.IdentifierNode); ok {
		c.names = append(c.names, n.Value)
	}
}

// pathPatcher rewrites member chains on value (value.a.b, value["x"][0])
// into __json(__rec, "a.b") calls that read only that path, and
// record.key and friends into the plain names.
type pathPatcher struct {
	extra []string
	json  bool
	vars  bool
}

func (p *pathPatcher) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok {
		for i, n := range p.extra {
			if id.Value == n {
				p.vars = true
				ast.Patch(node, &ast.CallNode{
					Callee:    &ast.IdentifierNode{Value: varFunc},
					Arguments: []ast.Node{&ast.IdentifierNode{Value: recName}, &ast.IntegerNode{Value: i}},
				})
				return
			}
		}
	}
	if n, ok := (*node).(*ast.MemberNode); ok {
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "record" {
			if s, ok := n.Property.(*ast.StringNode); ok && contains(exprNames, s.Value) {
				// record.value.x becomes value.x, which the
				// member above then rewrites into a path.
				ast.Patch(node, &ast.IdentifierNode{Value: s.Value})
				return
			}
		}
		seg, ok := pathSegment(n.Property)
		if !ok {
			return
		}
		var prefix string
		switch base := n.Node.(type) {
		case *ast.IdentifierNode:
			if base.Value != "value" {
				return
			}
		case *ast.CallNode:
			prev, ok := jsonCallPath(base)
			if !ok {
				return
			}
			prefix = prev + "."
		default:
			return
		}
		p.json = true
		ast.Patch(node, &ast.CallNode{
			Callee:    &ast.IdentifierNode{Value: jsonFunc},
			Arguments: []ast.Node{&ast.IdentifierNode{Value: recName}, &ast.StringNode{Value: prefix + seg}},
		})
	}
}

// pathSegment is a constant property as an escaped path segment.
func pathSegment(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return escapePath(x.Value), true
	case *ast.IntegerNode:
		if x.Value < 0 {
			return "", false
		}
		return strconv.Itoa(x.Value), true
	}
	return "", false
}

// jsonCallPath returns the path of a rewritten __json call.
func jsonCallPath(c *ast.CallNode) (string, bool) {
	id, ok := c.Callee.(*ast.IdentifierNode)
	if !ok || id.Value != jsonFunc || len(c.Arguments) != 2 {
		return "", false
	}
	s, ok := c.Arguments[1].(*ast.StringNode)
	if !ok {
		return "", false
	}
	return s.Value, true
}

// escapePath escapes gjson's special characters in a field name.
func escapePath(s string) string {
	if !strings.ContainsAny(s, `.*?|#@\!=<>%`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`.*?|#@\!=<>%`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
