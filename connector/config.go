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
)

var kindNames = map[ValueKind]string{
	TextValue: "string", IntValue: "int", BoolValue: "bool", DurationValue: "duration",
	SizeValue: "size", EnumValue: "enum", ListValue: "list of strings",
	MapValue: "map of name to text", ColumnsValue: "map of column to source", SourceValue: "column source",
}

func (k ValueKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind " + strconv.Itoa(int(k))
}

// scalar tells whether a value of the kind is written as one value.
func (k ValueKind) scalar() bool { return k != ListValue && k != MapValue && k != ColumnsValue }

// Entry is one name of a MapValue or ColumnsValue and its text.
type Entry struct {
	Name, Value string
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

// Map returns a map or columns field's entries, in the order written.
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

// Field returns the side's field called name.
func (side *Side) Field(name string) (Field, bool) {
	for _, f := range side.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// ApplyDefaults stores the default of every field c has no value of.
// Defaults are checked when the spec is registered, so they parse.
func (side *Side) ApplyDefaults(c *Config) {
	for _, f := range side.Fields {
		if _, ok := c.values[f.Name]; ok || f.Default == "" || !f.Kind.scalar() {
			continue
		}
		if v, err := f.Parse(f.Default); err == nil {
			c.Put(f.Name, v, 0, false)
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
	case ListValue, MapValue, ColumnsValue:
		return nil, fmt.Errorf("a %s is not one value", f.Kind)
	}
	return s, nil
}

// Choose returns the choice of an enum field that s spells:
// case-insensitive, and underscores count as dashes unless the choices use
// underscores.
func (f Field) Choose(s string) (string, bool) {
	norm := strings.ToLower(strings.TrimSpace(s))
	for _, c := range f.Enum {
		alt := strings.ReplaceAll(norm, "_", "-")
		if strings.Contains(c, "_") {
			alt = strings.ReplaceAll(norm, "-", "_")
		}
		if norm == c || alt == c {
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

// DecodeStrings decodes a section from text options, as SQL's
// CREATE TABLE … WITH ('key' = 'value') writes them: a list is
// comma-separated, a map field's entries are keys name.entry
// ('columns.user_id' = 'key'), a secret's ${VAR} is read by env. The
// defaults are filled in; required fields, unknown keys (with "did you
// mean") and values that do not parse are errors, joined.
func (side *Side) DecodeStrings(section string, opts map[string]string, env func(string) (string, bool)) (*Config, error) {
	c := NewConfig(section, 0)
	var errs []error
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	names := side.FieldNames()
	for _, k := range keys {
		raw := opts[k]
		name, entry, isEntry := strings.Cut(k, ".")
		f, ok := side.Field(name)
		if !ok {
			msg := fmt.Sprintf("%s: unknown option %q", section, k)
			if s := suggest.Closest(name, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += "; known options: " + strings.Join(names, ", ")
			}
			errs = append(errs, Errorf(At(""), "%s", msg))
			continue
		}
		switch {
		case f.Kind == MapValue || f.Kind == ColumnsValue:
			if !isEntry || entry == "" {
				errs = append(errs, Errorf(At(name), "%s.%s is a map: write each entry as its own option, '%s.<name>' = '<value>'", section, name, name))
				continue
			}
			c.Put(name, append(c.Map(name), Entry{Name: entry, Value: strings.TrimSpace(raw)}), 0, true)
		case isEntry:
			errs = append(errs, Errorf(At(""), "%s: unknown option %q (did you mean %q?)", section, k, name))
		case f.Kind == ListValue:
			var l []string
			for _, p := range strings.Split(raw, ",") {
				l = append(l, strings.TrimSpace(p))
			}
			c.Put(name, l, 0, true)
		default:
			if f.Secret {
				if v, ok := strings.CutPrefix(strings.TrimSpace(raw), "${"); ok && strings.HasSuffix(v, "}") {
					val, set := env(strings.TrimSuffix(v, "}"))
					if !set {
						errs = append(errs, Errorf(At(name), "%s.%s refers to the environment variable %s, which is not set", section, name, strings.TrimSuffix(v, "}")))
						continue
					}
					raw = val
				}
			}
			v, err := f.Parse(raw)
			if err != nil {
				errs = append(errs, Errorf(At(name), "%s.%s: %v", section, name, err))
				continue
			}
			c.Put(name, v, 0, true)
		}
	}
	errs = append(errs, side.Missing(c)...)
	side.ApplyDefaults(c)
	return c, errors.Join(errs...)
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
