package connector

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/suggest"
)

// ValueKind is what a field's value is: what the decoders of a job file's
// section and of a SQL table's WITH options read it as.
type ValueKind uint8

// The value kinds. The zero kind is text.
const (
	// TextValue is a string, trimmed. With Field.Secret a ${VAR} value is
	// read from the environment.
	TextValue ValueKind = iota
	// IntValue is a whole number (int).
	IntValue
	// BoolValue is true or false (yes/no, on/off).
	BoolValue
	// DurationValue is a Go duration or whole days ("7d"), not negative
	// (time.Duration).
	DurationValue
	// SizeValue is a number of bytes, plain or with a binary unit
	// ("64MiB") (int64).
	SizeValue
	// EnumValue is one of Field.Enum, case-insensitive (string).
	EnumValue
	// ListValue is a list of strings; written as one value, its items are
	// comma-separated ([]string).
	ListValue
	// MapValue maps names to text, in the order written ([]Entry).
	MapValue
	// ColumnsValue maps table columns to column sources in the pipeline's
	// expression language, timestamp(<source>) included ([]Entry). The
	// compiler turns it into the build context's row function.
	ColumnsValue
	// SourceValue is one column source in the pipeline's expression
	// language (string).
	SourceValue
	// GroupValue is a mapping of the field's own Fields
	// (startup: {mode: timestamp, timestamp: …}) or, written as one
	// value, its first field's value (startup: latest). Its fields'
	// values are stored as "<group>.<field>" (Config.String("startup.mode"));
	// its own is true when it was written as one value (bool).
	GroupValue
	// MapsValue maps names to mappings of names to text, in the order
	// written: topic to {partition: offset} ([]Entry, each with its
	// Entries). As a SQL option an entry is the key
	// '<field>.<name>.<inner name>' (the inner name after the last dot).
	MapsValue
)

var kindNames = map[ValueKind]string{
	TextValue: "string", IntValue: "int", BoolValue: "bool", DurationValue: "duration",
	SizeValue: "size", EnumValue: "enum", ListValue: "list of strings",
	MapValue: "map of name to text", ColumnsValue: "map of column to source", SourceValue: "column source",
	GroupValue: "group of fields", MapsValue: "map of name to map of name to text",
}

func (k ValueKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind " + strconv.Itoa(int(k))
}

// scalar tells whether a value of the kind is written as one value.
func (k ValueKind) scalar() bool {
	return k != ListValue && k != MapValue && k != ColumnsValue && k != GroupValue && k != MapsValue
}

// entries tells whether a value of the kind is a list of entries.
func (k ValueKind) entries() bool { return k == MapValue || k == ColumnsValue || k == MapsValue }

// Entry is one name of a MapValue, ColumnsValue or MapsValue and its
// text (MapValue, ColumnsValue) or its own entries (MapsValue).
type Entry struct {
	Name, Value string
	// Entries are the names and texts of a MapsValue's entry, in the
	// order written.
	Entries []Entry
	// Line is where the name is in the job file; 0 when not read from one.
	Line int
}

// Value is one field of a decoded section.
type Value struct {
	// V is the value, of the Go type its field's kind says.
	V any
	// Line is where the field is in the job file; 0 when the field was
	// not written (a default) or not read from a file (SQL options).
	Line int
	// Set tells whether the field was written (rather than defaulted).
	Set bool
}

// Config is a connector's section once decoded: each field's value, of the
// Go type its kind says, and where it was written. Fields left out hold
// their spec's default, unset.
type Config struct {
	// Section is the section it was read from ("sink.postgres"), for
	// messages.
	Section string
	// Line is where the section starts in the job file; 0 when not read
	// from one.
	Line   int
	values map[string]Value
}

// NewConfig returns an empty config of section.
func NewConfig(section string, line int) *Config {
	return &Config{Section: section, Line: line, values: map[string]Value{}}
}

// Put stores field name's value (decoders call it).
func (c *Config) Put(name string, v any, line int, set bool) {
	c.values[name] = Value{V: v, Line: line, Set: set}
}

// Has tells whether field name was written.
func (c *Config) Has(name string) bool { return c.values[name].Set }

// LineOf is where field name was written; 0 if it was not (or not in a
// file).
func (c *Config) LineOf(name string) int { return c.values[name].Line }

// Get returns field name's value, nil without one.
func (c *Config) Get(name string) any { return c.values[name].V }

// String returns a text, enum or source field's value, "" without one.
func (c *Config) String(name string) string { s, _ := c.Get(name).(string); return s }

// Int returns an int field's value, 0 without one.
func (c *Config) Int(name string) int { n, _ := c.Get(name).(int); return n }

// Bool returns a bool field's value.
func (c *Config) Bool(name string) bool { b, _ := c.Get(name).(bool); return b }

// Duration returns a duration field's value.
func (c *Config) Duration(name string) time.Duration { d, _ := c.Get(name).(time.Duration); return d }

// Size returns a size field's value in bytes.
func (c *Config) Size(name string) int64 { n, _ := c.Get(name).(int64); return n }

// List returns a list field's value.
func (c *Config) List(name string) []string { l, _ := c.Get(name).([]string); return l }

// Map returns a map, maps or columns field's entries, in the order
// written.
func (c *Config) Map(name string) []Entry { m, _ := c.Get(name).([]Entry); return m }

// Names lists the fields that hold a value (written or defaulted), sorted.
func (c *Config) Names() []string {
	var out []string
	for n := range c.values {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LineAt is the line of at, as FieldError.At names it, if it is written:
// a field ("table"), a group's field ("startup.mode"), an entry of a map
// field ("columns.n") or of a maps field ("startup.offsets.orders" or
// "startup.offsets.orders.0"); 0 if not.
func (c *Config) LineAt(at string) int {
	if l := c.LineOf(at); l != 0 {
		return l
	}
	// The longest field name at starts with, then its entries.
	for i := len(at) - 1; i > 0; i-- {
		if at[i] != '.' {
			continue
		}
		name, rest := at[:i], at[i+1:]
		v, ok := c.values[name]
		if !ok {
			continue
		}
		entries, _ := v.V.([]Entry)
		for _, e := range entries {
			if e.Name == rest {
				return e.Line
			}
			if inner, ok := strings.CutPrefix(rest, e.Name+"."); ok {
				for _, ie := range e.Entries {
					if ie.Name == inner {
						return ie.Line
					}
				}
			}
		}
		return 0
	}
	return 0
}

// Field returns the side's field called name; a group's field is named
// "<group>.<field>".
func (side *Side) Field(name string) (Field, bool) {
	group, sub, inGroup := strings.Cut(name, ".")
	for _, f := range side.Fields {
		switch {
		case !inGroup && f.Name == name:
			return f, true
		case inGroup && f.Name == group && f.Kind == GroupValue:
			for _, g := range f.Fields {
				if g.Name == sub {
					return g, true
				}
			}
		}
	}
	return Field{}, false
}

// ApplyDefaults stores the default of every field c has no value of, a
// group's fields' included. Defaults are checked when the spec is
// registered, so they parse.
func (side *Side) ApplyDefaults(c *Config) { applyDefaults(c, "", side.Fields) }

func applyDefaults(c *Config, prefix string, fields []Field) {
	for _, f := range fields {
		if f.Kind == GroupValue {
			applyDefaults(c, prefix+f.Name+".", f.Fields)
			continue
		}
		if _, ok := c.values[prefix+f.Name]; ok || f.Default == "" || !f.Kind.scalar() {
			continue
		}
		if v, err := f.Parse(f.Default); err == nil {
			c.Put(prefix+f.Name, v, 0, false)
		}
	}
}

// Parse reads the text of a scalar field (not a list or map) as its kind
// says. The error names the problem, not the field.
func (f Field) Parse(s string) (any, error) {
	s = strings.TrimSpace(s)
	switch f.Kind {
	case IntValue:
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("must be a whole number, not %q", s)
		}
		return n, nil
	case BoolValue:
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, fmt.Errorf("must be true or false, not %q", s)
	case DurationValue:
		d, err := ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration: write a number with a unit, such as 500ms, 10s, 5m, 24h or 7d", s)
		}
		if d < 0 {
			return nil, fmt.Errorf("must not be negative (got %s)", s)
		}
		return d, nil
	case SizeValue:
		return ParseSize(s)
	case EnumValue:
		if c, ok := f.Choose(s); ok {
			return c, nil
		}
		return nil, fmt.Errorf("%q is not one of %s%s", s, strings.Join(f.Enum, ", "), suggest.Suggest(strings.ToLower(s), f.Enum))
	case ListValue, MapValue, ColumnsValue, GroupValue, MapsValue:
		return nil, fmt.Errorf("a %s is not one value", f.Kind)
	}
	return s, nil
}

// Choose returns the choice of an enum field that s spells:
// case-insensitive, and underscores count as dashes unless the choices use
// underscores; one of the field's Aliases stands for its choice.
func (f Field) Choose(s string) (string, bool) {
	norm := strings.ToLower(strings.TrimSpace(s))
	spells := func(c string) bool {
		alt := strings.ReplaceAll(norm, "_", "-")
		if strings.Contains(c, "_") {
			alt = strings.ReplaceAll(norm, "-", "_")
		}
		return norm == c || alt == c
	}
	for _, c := range f.Enum {
		if spells(c) {
			return c, true
		}
	}
	for a, c := range f.Aliases {
		if spells(a) {
			return c, true
		}
	}
	return "", false
}

// ParseDuration reads a Go duration ("90s", "1h30m"), 0, or whole days
// ("7d"), which is how retention is usually thought of.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		const most = int64(time.Duration(1<<63-1) / (24 * time.Hour))
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > most || n < -most {
			return 0, errors.New("bad day count")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	if s == "0" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// sizeUnits are the units ParseSize accepts, by lower-case spelling.
var sizeUnits = map[string]int64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}

// decimalSizeUnits are the spellings ParseSize refuses as ambiguous, with
// the binary unit to suggest instead.
var decimalSizeUnits = map[string]string{"k": "KiB", "kb": "KiB", "m": "MiB", "mb": "MiB", "g": "GiB", "gb": "GiB", "t": "TiB", "tb": "TiB"}

// ParseSize reads a number of bytes: plain ("67108864") or a whole number
// with a binary unit ("64MiB", "512 KiB", "1GiB"; case does not matter).
// Decimal units (MB, GB) and bare letters (64M) are refused rather than
// guessed, since both readings are common.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" || num == "-" {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes, or a whole number with a unit (B, KiB, MiB, GiB, TiB), such as 64MiB", s)
	}
	if alt, ok := decimalSizeUnits[unit]; ok {
		return 0, fmt.Errorf("%q is ambiguous (decimal or binary units?): write %s%s (1 %s = %d bytes) or the number of bytes", s, strings.TrimPrefix(num, "-"), alt, alt, sizeUnits[strings.ToLower(alt)])
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes, or a whole number with a unit (B, KiB, MiB, GiB, TiB), such as 64MiB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<63-1)/mult || n < -(1<<63-1)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	return n * mult, nil
}

// FieldError is a problem with a connector's section that a Validate hook
// finds. At names where it is, best first: a field of the section
// ("table"), an entry of a map field ("columns.n"), "" for the section
// itself, or DeliveryField for the job's delivery setting. The job-file
// reader reports it at the line of the first of them written in the file.
type FieldError struct {
	At  []string
	Msg string
}

func (e *FieldError) Error() string { return e.Msg }

// DeliveryField in FieldError.At stands for the job's delivery setting
// (sink.delivery in a job file).
const DeliveryField = "^delivery"

// Errorf returns a FieldError at the first of at that is written.
func Errorf(at []string, format string, args ...any) *FieldError {
	return &FieldError{At: at, Msg: fmt.Sprintf(format, args...)}
}

// At is a convenience for the At of a FieldError.
func At(names ...string) []string { return names }

// Check is what a sink's Validate hook knows besides its section.
type Check struct {
	// Delivery is the job's delivery (ExactlyOnce, AtLeastOnce or None).
	Delivery Delivery
	// Role is how this sink delivers under the commit-point rules
	// (docs/design.md, "Database sinks"): ExactlyOnce as the commit
	// point, TwoPhase under another one, else the job's delivery.
	Role Delivery
	// Source checks a column source in the pipeline's expression language;
	// SQLSource one of a table column, which may also be
	// timestamp(<source>). Nil: not checked.
	Source, SQLSource func(expr string) error
	// Sources say what a column source can be, for messages.
	Sources []string
}

// Describe is what a sink's Describe hook knows besides its section.
type Describe struct {
	// Role is how the sink delivers (as Check.Role).
	Role Delivery
	// Delivery is the job's delivery.
	Delivery Delivery
	// CommitPoint names the job's commit point ("" without one).
	CommitPoint string
}

// option is what one name of a SQL option stands for.
type option struct {
	// path is where the value is stored: "<field>" or "<group>.<field>".
	path  string
	field Field
	// group is the group of a group's field, "" for a field of the side;
	// shorthand: the option is the group's own name, its first field's
	// value (startup = 'latest').
	group     string
	shorthand bool
}

// options are the names SQL options may give the side's fields: each
// field's Name and SQL names; a group's name and SQL names (its first
// field's value, as in a job file), and "<group>.<field>" and the SQL
// names of its fields. Two fields sharing a name are an error.
func (side *Side) options() (map[string]option, error) {
	out := map[string]option{}
	var err error
	add := func(o option, names ...string) {
		for _, n := range names {
			if prev, dup := out[n]; dup && err == nil {
				err = fmt.Errorf("the option %q names both %q and %q", n, prev.path, o.path)
			}
			out[n] = o
		}
	}
	for _, f := range side.Fields {
		if f.Kind != GroupValue {
			add(option{path: f.Name, field: f}, append([]string{f.Name}, f.SQL...)...)
			continue
		}
		first := f.Fields[0]
		add(option{path: f.Name + "." + first.Name, field: first, group: f.Name, shorthand: true}, append([]string{f.Name}, f.SQL...)...)
		for _, g := range f.Fields {
			path := f.Name + "." + g.Name
			add(option{path: path, field: g, group: f.Name}, append([]string{path}, g.SQL...)...)
		}
	}
	return out, err
}

// DecodeStrings decodes a section from text options, as SQL's
// CREATE TABLE … WITH ('key' = 'value') writes them. A field is named by
// its Name or one of its SQL names (Flink's: 'scan.startup.mode'), a
// group's field by "<group>.<field>" or its SQL names, and the group's
// own name gives its first field. A list is comma- or semicolon-separated
// ('topic' = 'a;b', Flink's way); a map field's entries are keys
// name.entry ('columns.user_id' = 'key'); a secret's ${VAR} is read by
// env. The defaults are filled in; required fields, unknown keys (with
// "did you mean"), a field given twice and values that do not parse are
// errors, joined.
func (side *Side) DecodeStrings(section string, opts map[string]string, env func(string) (string, bool)) (*Config, error) {
	c := NewConfig(section, 0)
	var errs []error
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known, err := side.options()
	if err != nil {
		return c, err
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	givenBy := map[string]string{}
	for _, k := range keys {
		raw := opts[k]
		o, ok := known[k]
		entry := ""
		if !ok {
			// The longest known name k starts with: a map field's entry, or
			// a mistake.
			for i := len(k) - 1; i > 0 && !ok; i-- {
				if k[i] == '.' {
					o, ok = known[k[:i]]
					entry = k[i+1:]
				}
			}
			switch {
			case !ok:
				msg := fmt.Sprintf("%s: unknown option %q", section, k)
				s := suggest.Closest(k, names)
				if first, _, dotted := strings.Cut(k, "."); s == "" && dotted {
					s = suggest.Closest(first, names) // a map field's entry: 'columnz.id'
				}
				if s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else {
					msg += "; known options: " + strings.Join(names, ", ")
				}
				errs = append(errs, Errorf(At(""), "%s", msg))
				continue
			case !o.field.Kind.entries():
				errs = append(errs, Errorf(At(""), "%s: unknown option %q (did you mean %q?)", section, k, strings.TrimSuffix(k, "."+entry)))
				continue
			}
		}
		name := o.path
		if entry == "" {
			if by, dup := givenBy[name]; dup {
				errs = append(errs, Errorf(At(name), "%s: options %q and %q both give %s: keep one", section, by, k, name))
				continue
			}
			givenBy[name] = k
		}
		if o.group != "" {
			shorthand := o.shorthand && (!c.Has(o.group) || c.Bool(o.group))
			c.Put(o.group, shorthand, 0, true)
		}
		f := o.field
		switch {
		case f.Kind.entries():
			if entry == "" {
				errs = append(errs, Errorf(At(name), "%s.%s is a map: write each entry as its own option, '%s.<name>' = '<value>'", section, k, k))
				continue
			}
			if f.Kind != MapsValue {
				c.Put(name, append(c.Map(name), Entry{Name: entry, Value: strings.TrimSpace(raw)}), 0, true)
				continue
			}
			outer, inner, ok := cutLast(entry, ".")
			if !ok {
				errs = append(errs, Errorf(At(name), "%s: option %q: write each entry as '%s.<name>.<inner name>' = '<value>'", section, k, strings.TrimSuffix(k, "."+entry)))
				continue
			}
			es := c.Map(name)
			i := slices.IndexFunc(es, func(e Entry) bool { return e.Name == outer })
			if i < 0 {
				es, i = append(es, Entry{Name: outer}), len(es)
			}
			es[i].Entries = append(es[i].Entries, Entry{Name: inner, Value: strings.TrimSpace(raw)})
			c.Put(name, es, 0, true)
		case f.Kind == ListValue:
			var l []string
			for _, p := range strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ';' }) {
				l = append(l, strings.TrimSpace(p))
			}
			c.Put(name, l, 0, true)
		default:
			if f.Secret {
				if v, ok := strings.CutPrefix(strings.TrimSpace(raw), "${"); ok && strings.HasSuffix(v, "}") {
					val, set := env(strings.TrimSuffix(v, "}"))
					if !set {
						errs = append(errs, Errorf(At(name), "%s.%s refers to the environment variable %s, which is not set", section, k, strings.TrimSuffix(v, "}")))
						continue
					}
					raw = val
				}
			}
			v, err := f.Parse(raw)
			if err != nil {
				errs = append(errs, Errorf(At(name), "%s.%s: %v", section, k, err))
				continue
			}
			c.Put(name, v, 0, true)
		}
	}
	errs = append(errs, side.Missing(c)...)
	side.ApplyDefaults(c)
	return c, errors.Join(errs...)
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// Missing reports the required fields c has no value of.
func (side *Side) Missing(c *Config) []error {
	var errs []error
	for _, f := range side.Fields {
		if f.Required && !c.Has(f.Name) {
			hint := f.IfMissing
			if hint == "" {
				hint = "give it a value"
			}
			errs = append(errs, Errorf(At(""), "%s.%s is missing: %s", c.Section, f.Name, hint))
		}
	}
	return errs
}

// checkKind checks that the field's kind, enum, secret and default fit
// together.
func (f Field) checkKind() error {
	switch {
	case f.Kind == EnumValue && len(f.Enum) == 0:
		return fmt.Errorf("field %q is an enum without values", f.Name)
	case f.Kind != EnumValue && len(f.Enum) > 0:
		return fmt.Errorf("field %q has enum values but is a %s", f.Name, f.Kind)
	case f.Secret && f.Kind != TextValue:
		return fmt.Errorf("field %q is a secret but a %s", f.Name, f.Kind)
	case f.Default != "" && !f.Kind.scalar():
		return fmt.Errorf("field %q: a %s has no default", f.Name, f.Kind)
	case len(f.Aliases) > 0 && f.Kind != EnumValue:
		return fmt.Errorf("field %q has aliases but is a %s", f.Name, f.Kind)
	}
	for a, c := range f.Aliases {
		if a != strings.ToLower(a) || !slices.Contains(f.Enum, c) {
			return fmt.Errorf("field %q: alias %q is not lower case or stands for no value (%q)", f.Name, a, c)
		}
	}
	if f.Default != "" && f.Kind != TextValue {
		if _, err := f.Parse(f.Default); err != nil {
			return fmt.Errorf("field %q: default %q: %v", f.Name, f.Default, err)
		}
	}
	if f.Kind == EnumValue && slices.ContainsFunc(f.Enum, func(s string) bool { return s != strings.ToLower(s) }) {
		return fmt.Errorf("field %q: enum values are lower case", f.Name)
	}
	return nil
}
