package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/internal/plan"
)

// Spec describes an operator for the registry: how a job file writes it,
// what its fields are, how they are checked, and how the operator is
// built. Operators register their spec in init with Register; the job
// file reader, Build and the reference docs (docs/operators.md) all read
// it, so an operator is added in one place.
type Spec struct {
	// Name is the operator's name in a job file ("dedupe").
	Name string
	// Summary says in one sentence what the operator does.
	Summary string
	// Doc says more, in Markdown paragraphs, for the reference docs.
	// Optional.
	Doc string
	// Fields are the step's parameters, in the order the docs list them.
	// Every step also takes uid: (its id), which is not listed here.
	Fields []Field
	// IDField names the field whose value is part of the step's default id
	// (name:value, such as dedupe:record.key): the one that says what the
	// step's state is about. Empty: the id is the name.
	IDField string
	// Retractions says what the step does with a changelog's retractions
	// (docs/design.md, "Changelogs"): nil refuses them (the job-file
	// reader refuses a step after one that emits a changelog, and a
	// retraction reaching it at run time is a poison record). Otherwise
	// it returns whether the step takes them (passes them on, as a
	// stateless select or filter does, or folds them in, as an aggregate
	// with retractions does) and whether its output is a changelog
	// (emits retractions of its own, or passes its input's on).
	Retractions func(p Params, in bool) (takes, out bool)
	// StateFields, for a stateful operator, name the fields whose values
	// shape its state: a restore from a checkpoint taken while any of them
	// had another value is refused (StateLayout; docs/design.md, "State
	// across query changes"). Fields that only bound or route the state
	// (ttl, late-topic) are not among them. Nil: not checked.
	StateFields []string
	// SubsetFields, among StateFields, name string-list fields that say
	// which columns the state's rows hold (a pruned join side's kept
	// rows): rows holding more serve a job that reads fewer, so a restore
	// whose checkpoint names a superset, or none (rows of every column),
	// is accepted. StateLayout writes them last, marked (~name=[...]),
	// and the engine compares them as sets (engine.LayoutCompatible).
	SubsetFields []string
	// Stateful tells whether the operator keeps keyed state under the
	// step's id (Build returns an Operator with Process), or none (Map).
	Stateful bool
	// Props says what the operator does to partitioning, routing and
	// event time for these params (with defaults applied): the planner
	// reads it to cut a scale-out job and to check routes, never the
	// operator's name (docs/design.md, "Scale-out"). Keyed and Key are
	// filled from Stateful and the key field by PropsOf; Props sets the
	// rest. Required.
	Props func(p Params) Props
	// Validate checks the rules beyond the fields' types on params with
	// defaults applied, every required field set and every value of its
	// field's type; it returns *FieldError values, joined. Optional.
	Validate func(p Params) error
	// Build returns the operator for params that passed Check.
	Build func(p Params, env Env) (Operator, error)
	// Describe says in a few words what the step does with these params,
	// for `onceflow validate` ("dedupe by record.key, ttl 24h"). Optional.
	Describe func(p Params) string
	// DescribeIn, when set, is Describe for a step that says what the
	// job's settings (Env: its event time) make it do.
	DescribeIn func(p Params, env Env) string
	// GoFunc names the Go entry point of the operator ("Dedupe"), for the
	// reference docs. Optional.
	GoFunc string
	// Example is a step as a job file writes it, for the reference docs
	// ("- dedupe: { key: record.key, ttl: 24h }").
	Example string
	// Inputs is how many streams a step of the operator reads: 0 (one, the
	// stream before it), 2 (join) or ManyInputs (union). A step with more
	// than one input can only be the first step of a stream that names as
	// many inputs (docs/design.md, "Named streams").
	Inputs int
}

// ManyInputs is Spec.Inputs of an operator that reads any number of
// streams, two or more.
const ManyInputs = -1

// TakesInputs reports whether a step of the operator can read n streams.
func (s Spec) TakesInputs(n int) bool {
	switch s.Inputs {
	case 0, 1:
		return n == 1
	case ManyInputs:
		return n >= 2
	}
	return n == s.Inputs
}

// InputsText says how many inputs the operator takes, for messages.
func (s Spec) InputsText() string {
	switch s.Inputs {
	case 0, 1:
		return "one input"
	case ManyInputs:
		return "two or more inputs"
	}
	return fmt.Sprintf("%d inputs", s.Inputs)
}

// Field is one parameter of a step.
type Field struct {
	// Name is the field's key in a job file ("ttl").
	Name string
	Type Type
	// Default is the value when the field is not given, of Type's Go type;
	// nil for none.
	Default any
	// Required fields must be given. Missing is then what the error for a
	// missing field tells the user to do, after "is missing: ".
	Required bool
	Missing  string
	// Description says what the field means.
	Description string
	// Example is a value as a job file writes it ("24h").
	Example string
	// Vars are names an Expression field's expression may use besides the
	// record's (explode's item and index).
	Vars []string
}

// Type is the kind of value a field holds.
type Type int

// The field types.
const (
	// String is text, held as a string.
	String Type = iota + 1
	// Duration is a time span, held as a time.Duration. A job file writes
	// it with a unit: 500ms, 10s, 5m, 24h or 7d.
	Duration
	// KeyExpr is a key expression, held as a string: what a keyed
	// operator partitions records by (KeyRecordKey, or any expression
	// whose value is a string or number, such as value.user_id).
	KeyExpr
	// Expression is an expression over the record, held as a string
	// (docs/operators.md, Expressions).
	Expression
	// Condition is an expression whose value is true or false, held as a
	// string.
	Condition
	// ExprMap maps names to expressions, held as a map[string]string.
	ExprMap
	// StringList is a list of strings, held as a []string.
	StringList
	// StringMap maps names to strings, held as a map[string]string.
	StringMap
	// Cases are route's conditions and topics, held as a []Case.
	Cases
	// OrderedMap maps names to strings keeping the order a job file
	// writes them in (select's schema and columns), held as a []Named.
	OrderedMap
	// Int is a whole number, held as an int (top-n's n).
	Int
	// Bool is true or false, held as a bool (aggregate's update-before).
	Bool
)

// Named is one entry of an OrderedMap field: a name and its text.
type Named struct {
	Name string
	Text string
}

// Case is one branch of route: records for which If holds go to Topic.
type Case struct {
	If    string
	Topic string
}

// KeyRecordKey is the key expression of the record's own key
// (RecordAccess.Key).
const KeyRecordKey = "record.key"

func (t Type) String() string {
	switch t {
	case String:
		return "string"
	case Duration:
		return "duration"
	case KeyExpr:
		return "key expression"
	case Expression:
		return "expression"
	case Condition:
		return "condition"
	case ExprMap:
		return "map of expressions"
	case StringList:
		return "list of strings"
	case StringMap:
		return "map of strings"
	case Cases:
		return "list of cases"
	case OrderedMap:
		return "ordered map of strings"
	case Int:
		return "whole number"
	case Bool:
		return "true or false"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Check reports what is wrong with v as a value of type t, or nil.
func (t Type) Check(v any) error { return t.check(v, nil) }

// Check reports what is wrong with v as a value of the field, or nil.
func (f Field) Check(v any) error { return f.Type.check(v, f.Vars) }

// check is Check with the extra names an expression may use.
func (t Type) check(v any, vars []string) error {
	switch t {
	case String:
		if _, ok := v.(string); ok {
			return nil
		}
	case Duration:
		if _, ok := v.(time.Duration); ok {
			return nil
		}
	case KeyExpr, Expression:
		if s, ok := v.(string); ok {
			_, err := CompileExpr(s, AnyResult, vars...)
			return err
		}
	case Condition:
		if s, ok := v.(string); ok {
			_, err := CompileExpr(s, BoolResult)
			return err
		}
	case ExprMap:
		if m, ok := v.(map[string]string); ok {
			for _, k := range sortedKeys(m) {
				if _, err := CompileExpr(m[k], AnyResult); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
			return nil
		}
	case StringList:
		if _, ok := v.([]string); ok {
			return nil
		}
	case Int:
		if _, ok := v.(int); ok {
			return nil
		}
	case Bool:
		if _, ok := v.(bool); ok {
			return nil
		}
	case StringMap:
		if _, ok := v.(map[string]string); ok {
			return nil
		}
	case OrderedMap:
		if m, ok := v.([]Named); ok {
			seen := map[string]bool{}
			for _, n := range m {
				if n.Name == "" {
					return errors.New("an entry has an empty name")
				}
				if seen[n.Name] {
					return fmt.Errorf("%s is given twice", n.Name)
				}
				seen[n.Name] = true
			}
			return nil
		}
	case Cases:
		if cs, ok := v.([]Case); ok {
			for i, c := range cs {
				if c.Topic == "" {
					return fmt.Errorf("case %d has no topic: give each case an if and a topic", i)
				}
				if _, err := CompileExpr(c.If, BoolResult); err != nil {
					return fmt.Errorf("case %d: %w", i, err)
				}
			}
			return nil
		}
	default:
		return fmt.Errorf("unknown field type %d", int(t))
	}
	return fmt.Errorf("%v is a %T, not a %s", v, v, t)
}

// Params are a step's field values by field name: a string for String,
// KeyExpr, Expr and Condition fields, a time.Duration for Duration fields,
// a map[string]string for ExprMap, a []string for StringList, a []Case
// for Cases, a []Named for OrderedMap and an int for Int.
type Params map[string]any

// Map returns the map[string]string value of field name, or nil.
func (p Params) Map(name string) map[string]string {
	m, _ := p[name].(map[string]string)
	return m
}

// List returns the []string value of field name, or nil.
func (p Params) List(name string) []string {
	l, _ := p[name].([]string)
	return l
}

// Ordered returns the []Named value of field name, or nil.
func (p Params) Ordered(name string) []Named {
	n, _ := p[name].([]Named)
	return n
}

// Cases returns the []Case value of field name, or nil.
func (p Params) Cases(name string) []Case {
	c, _ := p[name].([]Case)
	return c
}

// Int returns the int value of field name, or 0.
func (p Params) Int(name string) int {
	n, _ := p[name].(int)
	return n
}

// keyOfField is the key-of field of the keyed steps whose key an earlier
// step may have made (a SQL select's key columns): it computes nothing,
// but it is one of their StateFields, so a restore into keys made of other
// columns is refused instead of reading one grouping's state as another's
// (docs/design.md, "State layouts").
var keyOfField = Field{Name: "key-of", Type: StringList, Example: "[ user_id ]",
	Description: "What the record key was made of by the steps before, such as a SQL query's GROUP BY or PARTITION BY expressions: it computes nothing, but it is part of the step's state layout, so a restore whose keys are made of something else is refused."}

// StateLayout is the layout of a step of spec s with params p (defaults
// applied) as checkpoints record it: the operator's name and each of its
// StateFields with its value, in a canonical text. "" when s declares no
// StateFields.
func (s Spec) StateLayout(p Params) string {
	if len(s.StateFields) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(s.Name)
	var subsets []string
	for _, f := range s.StateFields {
		if slices.Contains(s.SubsetFields, f) {
			subsets = append(subsets, f)
			continue
		}
		// A field at its default (or, without one, at its zero value) is
		// left out, so a field added to a spec later does not change the
		// layout of steps that leave it, nor one written as its default.
		fd, ok := s.Field(f)
		val := p[f]
		if !ok || val == nil || fmt.Sprint(val) == fmt.Sprint(fd.Default) || fd.Default == nil && reflect.ValueOf(val).IsZero() {
			continue
		}
		if str, isStr := val.(string); isStr {
			if f == "time" {
				// A window's time: what matters to its state is only
				// whether its timers are processing-time ones.
				if str != "processing" {
					continue
				}
			} else if d, err := time.ParseDuration(str); err == nil {
				val = d // a signed duration held as text: one form for one span
			}
		}
		fmt.Fprintf(&b, " %s=", f)
		switch v := val.(type) {
		case map[string]string:
			b.WriteString("{")
			for i, k := range sortedKeys(v) {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s: %q", k, v[k])
			}
			b.WriteString("}")
		case string:
			fmt.Fprintf(&b, "%q", v)
		default:
			fmt.Fprint(&b, v)
		}
	}
	for _, f := range subsets {
		// A subset field: a sorted column list, written as JSON so a
		// column's name may hold any character (engine.LayoutCompatible).
		cols := p.List(f)
		if len(cols) == 0 {
			continue
		}
		cols = slices.Clone(cols)
		slices.Sort(cols)
		js, _ := json.Marshal(cols)
		fmt.Fprintf(&b, " ~%s=%s", f, js)
	}
	return b.String()
}

// ChangelogOf says whether a step with params p takes its input (a
// changelog when in) and whether its output is a changelog.
func (s Spec) ChangelogOf(p Params, in bool) (ok, out bool) {
	if s.Retractions == nil {
		return !in, false
	}
	takes, out := s.Retractions(p, in)
	return !in || takes, out
}

// passesRetractions is the Retractions of a stateless step that changes
// each record alone and keeps its row kind: it takes a changelog, and its
// output is one when its input is.
func passesRetractions(_ Params, in bool) (takes, out bool) { return true, in }

// Bool returns the bool value of field name, or false.
func (p Params) Bool(name string) bool {
	b, _ := p[name].(bool)
	return b
}

// Text returns the string value of field name, or "".
func (p Params) Text(name string) string {
	s, _ := p[name].(string)
	return s
}

// Duration returns the time.Duration value of field name, or 0.
func (p Params) Duration(name string) time.Duration {
	d, _ := p[name].(time.Duration)
	return d
}

// FieldError is a problem with one field of a step. Its text starts with
// the field's name: "ttl must be positive: …" (Msg), or "key:
// unsupported key expression …" (Err, what is wrong with the value).
type FieldError struct {
	Field string
	// Msg is the rest of the sentence after the field's name.
	Msg string
	// Err, when set, is the error about the field's value; Msg is then
	// unused.
	Err error
}

func (e *FieldError) Error() string {
	if e.Err != nil {
		return e.Field + ": " + e.Err.Error()
	}
	return e.Field + " " + e.Msg
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// Field returns the field called name.
func (s Spec) Field(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// FieldNames returns the names of the fields, sorted.
func (s Spec) FieldNames() []string {
	names := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		names[i] = f.Name
	}
	sort.Strings(names)
	return names
}

// WithDefaults returns a copy of p in which every field that has a default
// and no value has its default.
func (s Spec) WithDefaults(p Params) Params {
	out := make(Params, len(s.Fields))
	for k, v := range p {
		out[k] = v
	}
	for _, f := range s.Fields {
		if _, ok := out[f.Name]; !ok && f.Default != nil {
			out[f.Name] = f.Default
		}
	}
	return out
}

// Check checks p (with defaults applied): that every value belongs to a
// field and is of its type, that every required field has one, and then
// the operator's own rules (Validate). The error joins one *FieldError per
// problem, in field order.
func (s Spec) Check(p Params) error {
	var errs []error
	for _, name := range sortedKeys(p) {
		if _, ok := s.Field(name); !ok {
			errs = append(errs, &FieldError{Field: name, Msg: fmt.Sprintf("is not a field of %s; known fields: %s", s.Name, strings.Join(s.FieldNames(), ", "))})
		}
	}
	for _, f := range s.Fields {
		v, ok := p[f.Name]
		switch {
		case !ok && f.Required:
			errs = append(errs, &FieldError{Field: f.Name, Msg: "is missing: " + f.Missing})
		case ok:
			if err := f.Type.check(v, f.Vars); err != nil {
				errs = append(errs, &FieldError{Field: f.Name, Err: err})
			}
		}
	}
	if len(errs) == 0 && s.Validate != nil {
		return s.Validate(p)
	}
	return errors.Join(errs...)
}

// DefaultID is the id of a step of this operator with params p (defaults
// applied here) and no explicit uid: the name, and the value of IDField
// after a colon.
func (s Spec) DefaultID(p Params) string {
	if s.IDField == "" {
		return s.Name
	}
	v, ok := s.WithDefaults(p)[s.IDField]
	if !ok {
		return s.Name + ":"
	}
	return s.Name + ":" + fmt.Sprint(v)
}

// Explain says in a few words what a step with params p does: Describe,
// or the name and the field values.
func (s Spec) Explain(p Params) string { return s.ExplainIn(p, Env{}) }

// ExplainIn is Explain for a step of a job run with env.
func (s Spec) ExplainIn(p Params, env Env) string {
	p = s.WithDefaults(p)
	if s.DescribeIn != nil {
		return s.DescribeIn(p, env)
	}
	if s.Describe != nil {
		return s.Describe(p)
	}
	var parts []string
	for _, f := range s.Fields {
		if v, ok := p[f.Name]; ok {
			parts = append(parts, f.Name+" "+formatValue(v))
		}
	}
	if len(parts) == 0 {
		return s.Name
	}
	return s.Name + ", " + strings.Join(parts, ", ")
}

var registry = struct {
	sync.RWMutex
	specs map[string]Spec
}{specs: map[string]Spec{}}

// Register adds an operator to the registry; operators call it from init.
// It panics when the spec is incomplete or its name is taken: both are
// mistakes in the program, not in a job.
func Register(s Spec) {
	if err := s.selfCheck(); err != nil {
		panic(fmt.Sprintf("pipeline.Register(%q): %v", s.Name, err))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.specs[s.Name]; dup {
		panic(fmt.Sprintf("pipeline.Register: operator %q is registered twice", s.Name))
	}
	s.Fields = slices.Clone(s.Fields)
	registry.specs[s.Name] = s
}

// selfCheck finds mistakes in a spec before it is registered.
func (s Spec) selfCheck() error {
	switch {
	case s.Name == "":
		return errors.New("the operator has no name")
	case s.Summary == "":
		return errors.New("no summary")
	case s.Build == nil:
		return errors.New("no Build function")
	case s.Props == nil:
		return errors.New("no Props function: say what the operator does to keys, routing and event time")
	}
	for _, f := range s.StateFields {
		if _, ok := s.Field(f); !ok {
			return fmt.Errorf("StateFields names %q, which is no field", f)
		}
	}
	seen := map[string]bool{"uid": true} // every step's own field
	for _, f := range s.Fields {
		switch {
		case f.Name == "":
			return errors.New("a field has no name")
		case seen[f.Name]:
			return fmt.Errorf("field %q is declared twice, or is uid (every step has it)", f.Name)
		case f.Required && f.Missing == "":
			return fmt.Errorf("required field %q says nothing (Missing) about how to set it", f.Name)
		case f.Required && f.Default != nil:
			return fmt.Errorf("field %q is required and has a default", f.Name)
		case f.Description == "":
			return fmt.Errorf("field %q has no description", f.Name)
		}
		if f.Type < String || f.Type > Bool {
			return fmt.Errorf("field %q has an unknown type %d", f.Name, int(f.Type))
		}
		if f.Default != nil {
			if err := f.Type.Check(f.Default); err != nil {
				return fmt.Errorf("field %q: the default: %v", f.Name, err)
			}
		}
		seen[f.Name] = true
	}
	if _, ok := s.Field(s.IDField); s.IDField != "" && !ok {
		return fmt.Errorf("IDField %q is not a field", s.IDField)
	}
	return nil
}

// Lookup returns the spec of the operator called name.
func Lookup(name string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.specs[name]
	return s, ok
}

// Specs returns every registered spec, by name.
func Specs() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Spec, 0, len(registry.specs))
	for _, name := range sortedKeys(registry.specs) {
		out = append(out, registry.specs[name])
	}
	return out
}

// Names returns the names of the registered operators, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	return sortedKeys(registry.specs)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// formatValue writes a field value as a job file would.
func formatValue(v any) string {
	if d, ok := v.(time.Duration); ok {
		return durfmt.Short(d)
	}
	return fmt.Sprint(v)
}

// Props is what the planner knows about an operator (see Spec.Props).
type Props = plan.Props

// KeyEffect says whether records keep their keys through an operator.
type KeyEffect = plan.KeyEffect

// What an operator does to keys.
const (
	KeysLost = plan.KeysLost
	KeysKept = plan.KeysKept
)

// PropsOf is what a step with these params (defaults applied) does, as
// the planner sees it: the spec's Props, with Keyed from Stateful and, for
// a keyed step, Key from its key field (record.key when unset).
func (s Spec) PropsOf(p Params) Props {
	pr := s.Props(p)
	pr.Keyed = s.Stateful
	if !s.Stateful {
		pr.Key, pr.RightKey = "", ""
	} else if pr.Key == "" {
		pr.Key = p.Text("key")
		if pr.Key == "" {
			pr.Key = KeyRecordKey
		}
	}
	return pr
}

// keepsKeys is the Props of an operator that passes records on unchanged
// or not at all (filter, dedupe).
func keepsKeys(Params) Props { return Props{Keys: KeysKept} }

// losesKeys is the Props of an operator that changes or replaces records.
func losesKeys(Params) Props { return Props{Keys: KeysLost} }
