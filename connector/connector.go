// Package connector is what every connector declares about itself: the
// delivery guarantees it gives, whether it can be a job's commit point or
// take part in another one, and the fields a job file's section and a SQL
// table's WITH options (under Flink's names where they differ) configure
// it with. Connectors register a Spec in their package's init; the
// job-file reader (Kafka's source: and sink: included), the commit-point
// choice and docs/connectors.md read the registry (docs/design.md, "Where
// an extension goes").
//
// The package imports only the standard library and internal/suggest
// (itself standard-library only): it is the contract, not a connector.
// Building a sink for a job's records is the business of package
// connector/build, which knows the record and sink types.
package connector

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Delivery is what a sink guarantees about duplicates. It is declared once
// here; the connectors' Delivery types are aliases of it.
type Delivery string

// Deliveries. A job file's sink.delivery is one of the first three;
// TwoPhase is the role a database sink takes when another sink is the
// commit point (docs/design.md, "Database sinks").
const (
	// ExactlyOnce: every result is written once, committed with the
	// checkpoint.
	ExactlyOnce Delivery = "exactly-once"
	// AtLeastOnce: results may be written again after a failure; writes
	// are fenced per attempt where the sink can (upserts, SET).
	AtLeastOnce Delivery = "at-least-once"
	// None: written as it comes, no guarantee (Kafka only).
	None Delivery = "none"
	// TwoPhase: prepared transactions, committed when another commit
	// point commits the checkpoint.
	TwoPhase Delivery = "two-phase"
)

// Kind says what a connector can be in a job: bits of KindSource,
// KindSink and KindLookup (a table a join reads by key; reserved for SQL lookup joins).
type Kind uint8

const (
	KindSource Kind = 1 << iota
	KindSink
	KindLookup
)

func (k Kind) String() string {
	var s []string
	for _, c := range []struct {
		k    Kind
		name string
	}{{KindSource, "source"}, {KindSink, "sink"}, {KindLookup, "lookup"}} {
		if k&c.k != 0 {
			s = append(s, c.name)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	out := s[0]
	for _, x := range s[1:] {
		out += ", " + x
	}
	return out
}

// Field is one configuration field of a connector, as a job file writes
// it.
type Field struct {
	// Name is the key in the connector's section ("batch-rows").
	Name string
	// Kind is what the value is, for the decoders (TextValue when left
	// out).
	Kind ValueKind
	// Enum are the values an EnumValue field takes, lower case.
	Enum []string
	// Type says what the value is, for people, when the kind does not say
	// it well ("URL", "set, hset, incrby or hincrby"); empty: the kind's
	// name (or its enum's values).
	Type string
	// Default is the value when the field is left out, as a job file
	// writes it; empty: none.
	Default string
	// Required: the job file must set it.
	Required bool
	// Secret: the value is read from the environment (${VAR}) and never
	// printed.
	Secret bool
	// Doc says what the field does, in one or two sentences.
	Doc string
	// IfMissing completes the message "<section>.<field> is missing: …"
	// of a required field, saying what to write.
	IfMissing string
	// DefaultText says the default for people when it is not one value a
	// job file could write: it depends on the job ("onceflow-<job>") or
	// is a behaviour ("one subtask per partition"). The decoders store no
	// value; whoever reads the section applies it. Only without Default.
	DefaultText string
	// SQL are the other names a SQL table's WITH (…) options may give the
	// field, besides Name: Flink's option first ('scan.startup.mode'),
	// which docs/connectors.md lists. Side.DecodeStrings accepts each.
	SQL []string
	// SQLOnly: only a SQL table's WITH options set the field; a job file's
	// section has no such key (the job file says it elsewhere, such as
	// kafka.brokers, or has no use for it).
	SQLOnly bool
	// Aliases are other spellings of an EnumValue's values, such as
	// Flink's ("earliest-offset" for earliest), lower case: both decoders
	// accept them and store the value they stand for.
	Aliases map[string]string
	// Fields are a GroupValue's own fields, written under it
	// (startup.mode); a group's fields are not required.
	Fields []Field
}

// TypeName is the field's Type, or its kind's name.
func (f Field) TypeName() string {
	switch {
	case f.Type != "":
		return f.Type
	case f.Kind == EnumValue:
		return strings.Join(f.Enum, ", ")
	}
	return f.Kind.String()
}

// SQLName is the option a SQL table's WITH (…) names the field with in
// the docs: its first SQL name, else its Name.
func (f Field) SQLName() string {
	if len(f.SQL) > 0 {
		return f.SQL[0]
	}
	return f.Name
}

// Side is what a connector reads (its source side) or writes (its sink
// side): where a job file configures it and with which fields.
type Side struct {
	// Section is the job-file section ("source", "sink.postgres").
	Section string
	// Fields are the section's fields, in the order the docs list them.
	Fields []Field

	// The hooks of a side; each may be nil. Validate applies to every
	// side (Kafka's source: included), the others to a sink side that a
	// job file configures in a section of its own (Section
	// "sink.<name>").

	// Validate checks the rules that span fields, or the section and the
	// job's delivery, once the section decoded (types, required fields
	// and defaults are checked by then). It returns *FieldError values,
	// joined (errors.Join), which the job-file reader reports at the
	// lines they name. Of a source side it is told no delivery.
	Validate func(c *Config, chk Check) error
	// Explain names the sink in a job's plan ("postgres table orders");
	// nil: the connector's name.
	Explain func(c *Config) string
	// Describe is the sink's line in `onceflow validate`'s summary, after
	// its label; secrets redacted. Nil: the section and its role.
	Describe func(c *Config, d Describe) string
	// DeadLetterPlace says where the sink keeps the records it rejects
	// under errors.policy dead-letter (docs/design.md, "Database
	// sinks"); nil: it keeps none, and a job file with that policy is
	// refused.
	DeadLetterPlace func(job string) string
}

// Spec describes a connector.
type Spec struct {
	// Name is the connector's name: its section in a job file
	// (sink.postgres) and its 'connector' option in SQL.
	Name string
	// Summary says in one sentence what it does.
	Summary string
	// Doc says more, in Markdown paragraphs, for docs/connectors.md.
	// Optional.
	Doc string
	// Source and Sink are its two sides; nil: it has none.
	Source, Sink *Side
	// Deliveries are the guarantees it can give as a sink.
	Deliveries []Delivery
	// CommitPoint: under exactly-once it can be the job's commit point.
	CommitPoint bool
	// CommitRank orders the sinks that can be the commit point: of the
	// sinks a job writes to, the one with the lowest rank is (Kafka 0,
	// Redis 10, PostgreSQL 20, MySQL 30: docs/design.md, "Database
	// sinks"). The others take part by TwoPhase, or are refused.
	CommitRank int
	// GoPackage is the import path Go programs use it from.
	GoPackage string
}

// Kinds says what the connector can be.
func (s Spec) Kinds() Kind {
	var k Kind
	if s.Source != nil {
		k |= KindSource
	}
	if s.Sink != nil {
		k |= KindSink
	}
	return k
}

// Supports tells whether the connector gives delivery d.
func (s Spec) Supports(d Delivery) bool { return slices.Contains(s.Deliveries, d) }

// FieldNames lists the names of the side's fields a job file writes
// (not the SQLOnly ones), sorted.
func (s *Side) FieldNames() []string {
	var out []string
	for _, f := range s.Fields {
		if !f.SQLOnly {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

var registry struct {
	sync.RWMutex
	specs map[string]Spec
}

// Register adds a connector; it panics on a spec with a mistake or a name
// already taken, as init-time registration should.
func Register(s Spec) {
	if err := s.selfCheck(); err != nil {
		panic(fmt.Sprintf("connector.Register(%q): %v", s.Name, err))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.specs == nil {
		registry.specs = map[string]Spec{}
	}
	if _, dup := registry.specs[s.Name]; dup {
		panic(fmt.Sprintf("connector.Register: %q is registered twice", s.Name))
	}
	s.Deliveries = slices.Clone(s.Deliveries)
	registry.specs[s.Name] = s
}

func (s Spec) selfCheck() error {
	switch {
	case s.Name == "":
		return errors.New("no name")
	case s.Summary == "":
		return errors.New("no summary")
	case s.Kinds() == 0:
		return errors.New("neither a source nor a sink side")
	case s.Sink != nil && len(s.Deliveries) == 0:
		return errors.New("a sink without deliveries")
	case s.CommitPoint && !s.Supports(ExactlyOnce):
		return errors.New("a commit point must support exactly-once")
	}
	for _, side := range []*Side{s.Source, s.Sink} {
		if side == nil {
			continue
		}
		if side.Section == "" {
			return errors.New("a side without a job-file section")
		}
		if err := side.selfCheck(); err != nil {
			return fmt.Errorf("%s: %w", side.Section, err)
		}
	}
	return nil
}

func (side *Side) selfCheck() error {
	if err := checkFields(side.Fields, false); err != nil {
		return err
	}
	_, err := side.options()
	return err
}

// checkFields checks fields, the fields of a group when inGroup.
func checkFields(fields []Field, inGroup bool) error {
	seen := map[string]bool{}
	for _, f := range fields {
		switch {
		case f.Name == "" || strings.Contains(f.Name, "."):
			return fmt.Errorf("field %q: a name is not empty and has no dot", f.Name)
		case seen[f.Name]:
			return fmt.Errorf("field %q is declared twice", f.Name)
		case f.Doc == "":
			return fmt.Errorf("field %q has no doc", f.Name)
		case f.Required && f.Default != "":
			return fmt.Errorf("field %q is required and has a default", f.Name)
		case f.DefaultText != "" && f.Default != "":
			return fmt.Errorf("field %q has a Default and a DefaultText", f.Name)
		case inGroup && (f.Required || f.Kind == GroupValue || f.SQLOnly):
			return fmt.Errorf("field %q of a group is required, a group or SQL only", f.Name)
		case f.Kind == GroupValue && (len(f.Fields) == 0 || f.Default != "" || f.Required):
			return fmt.Errorf("group %q has no fields, or a default, or is required", f.Name)
		case f.Kind != GroupValue && len(f.Fields) > 0:
			return fmt.Errorf("field %q has fields but is a %s", f.Name, f.Kind)
		}
		if err := f.checkKind(); err != nil {
			return err
		}
		if err := checkFields(f.Fields, true); err != nil {
			return fmt.Errorf("group %q: %w", f.Name, err)
		}
		seen[f.Name] = true
	}
	return nil
}

// Lookup returns the connector called name.
func Lookup(name string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.specs[name]
	return s, ok
}

// Specs lists every registered connector, by CommitRank then name.
func Specs() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	var out []Spec
	for _, s := range registry.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CommitRank != out[j].CommitRank {
			return out[i].CommitRank < out[j].CommitRank
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Names lists the registered connectors' names, sorted.
func Names() []string {
	var out []string
	for _, s := range Specs() {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// CommitPoint picks, of the sinks a job writes to (by connector name), the
// one whose commit is the job's commit point under exactly-once: the
// lowest CommitRank among those that can be one; "" if none can. The
// others must support TwoPhase (Participants) to be exactly-once too.
func CommitPoint(sinks []string) string {
	best, bestRank := "", 0
	for _, n := range sinks {
		s, ok := Lookup(n)
		if !ok || !s.CommitPoint {
			continue
		}
		if best == "" || s.CommitRank < bestRank {
			best, bestRank = n, s.CommitRank
		}
	}
	return best
}

// TableFields are the fields of a database table sink (sink.postgres,
// sink.mysql); dsn says what the server's address looks like, example is
// a dsn field as a job file writes it, for messages.
func TableFields(dsn, example string) []Field {
	return []Field{
		{Name: "dsn", Type: "string", Required: true, Secret: true, Doc: "The server and database: " + dsn + "; usually ${VAR}, read from the environment.",
			IfMissing: "name the server and database, such as " + example},
		{Name: "table", Type: "table name", Required: true, Doc: "The table to write to, optionally schema-qualified.",
			IfMissing: "name the table to write to"},
		{Name: "columns", Kind: ColumnsValue, Required: true, Doc: "Where each column's value comes from, in the pipeline's expression language: key, raw (the value as text), topic, partition, offset, timestamp, value.<field>, any expression (concat(value.a, '-', key)), or timestamp(<source>) for a TIMESTAMP column. record.key, record.value and record.value.<field> are the same names.",
			IfMissing: "map each column to where its value comes from, such as columns: {user_id: record.key, n: record.value}"},
		{Name: "key", Kind: ListValue, Type: "list of columns", Doc: "The primary key columns: a row whose key exists is updated, and a retraction (a row an updating result takes back) deletes the row of its key. Required with delivery at-least-once, and for a result that retracts rows."},
		{Name: "batch-rows", Kind: IntValue, Default: "1000", Doc: "How many rows go to the server at once."},
	}
}

// WriteReference writes docs/connectors.md: every registered connector,
// its sides with their fields, its deliveries and its commit role.
func WriteReference(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<!-- Generated from the connector specs (package connector) by `go test ./connector -update`: edit the specs, not this file. -->\n\n")
	p("# Connectors\n\n")
	p("What each connector reads or writes, the job-file fields that configure it, and the guarantees it gives. ")
	p("Under `delivery: exactly-once` one sink's commit is the job's commit point: of the sinks a job writes to, the one listed first below that can be one. ")
	p("The others take part in its commit with prepared transactions (`two-phase`), or the job file is refused. ")
	p("A SQL table's `WITH (…)` options name the same fields: the SQL option column lists the names each accepts, Flink's first; a group's own name (`startup`) gives its first field, and a list is separated by `;` or `,`.\n\n")
	p("| connector | reads | writes | deliveries | commit point |\n|---|---|---|---|---|\n")
	for _, s := range Specs() {
		var ds []string
		for _, d := range s.Deliveries {
			ds = append(ds, string(d))
		}
		p("| [%s](#%s) | %s | %s | %s | %s |\n", s.Name, s.Name, yesNo(s.Source != nil), yesNo(s.Sink != nil), strings.Join(ds, ", "), commitRole(s))
	}
	for _, s := range Specs() {
		p("\n## %s\n\n%s\n", s.Name, s.Summary)
		if s.Doc != "" {
			p("\n%s\n", s.Doc)
		}
		if s.GoPackage != "" {
			p("\nGo: `%s`.\n", s.GoPackage)
		}
		for _, side := range []*Side{s.Source, s.Sink} {
			if side == nil {
				continue
			}
			p("\n### `%s`\n\n| field | SQL option | type | default | |\n|---|---|---|---|---|\n", side.Section)
			var row func(prefix string, f Field)
			row = func(prefix string, f Field) {
				def := f.Default
				switch {
				case f.Required:
					def = "required"
				case f.DefaultText != "":
					def = f.DefaultText
				case def == "":
					def = "–"
				}
				doc := f.Doc
				if f.Secret {
					doc += " A secret: never printed."
				}
				if len(f.Aliases) > 0 {
					var as []string
					for a, c := range f.Aliases {
						as = append(as, fmt.Sprintf("`%s` for %s", a, c))
					}
					sort.Strings(as)
					doc += " Also spelt " + strings.Join(as, ", ") + "."
				}
				name := "`" + prefix + f.Name + "`"
				if f.SQLOnly {
					name = "– (SQL only)"
				}
				// Every name SQL accepts, Flink's first.
				var sqls []string
				for _, n := range append(slices.Clone(f.SQL), prefix+f.Name) {
					sqls = append(sqls, "`"+n+"`")
				}
				sql := strings.Join(sqls, ", ")
				p("| %s | %s | %s | %s | %s |\n", name, sql, f.TypeName(), def, doc)
				for _, g := range f.Fields {
					row(prefix+f.Name+".", g)
				}
			}
			for _, f := range side.Fields {
				row("", f)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "–"
}

func commitRole(s Spec) string {
	switch {
	case s.CommitPoint && s.Supports(TwoPhase):
		return fmt.Sprintf("yes (rank %d); else two-phase", s.CommitRank)
	case s.CommitPoint:
		return fmt.Sprintf("yes (rank %d); cannot take part in another", s.CommitRank)
	case s.Supports(TwoPhase):
		return "two-phase only"
	}
	return "–"
}
