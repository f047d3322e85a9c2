// Package connector is what every connector declares about itself: the
// delivery guarantees it gives, whether it can be a job's commit point or
// take part in another one, and the fields a job file (and later a SQL
// table's WITH options) configures it with. Connectors register a Spec in
// their package's init; the job-file reader, the commit-point choice and
// docs/connectors.md read the registry (docs/design.md, "Where an
// extension goes").
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

// Side is what a connector reads (its source side) or writes (its sink
// side): where a job file configures it and with which fields.
type Side struct {
	// Section is the job-file section ("source", "sink.postgres").
	Section string
	// Fields are the section's fields, in the order the docs list them.
	Fields []Field

	// The hooks of a sink side that a job file configures in a section
	// of its own (Section "sink.<name>"); each may be nil.

	// Validate checks the rules that span fields, or the section and the
	// job's delivery, once the section decoded (types, required fields
	// and defaults are checked by then). It returns *FieldError values,
	// joined (errors.Join), which the job-file reader reports at the
	// lines they name.
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

// FieldNames lists the side's fields' names, sorted.
func (s *Side) FieldNames() []string {
	var out []string
	for _, f := range s.Fields {
		out = append(out, f.Name)
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
	seen := map[string]bool{}
	for _, f := range side.Fields {
		switch {
		case f.Name == "":
			return errors.New("a field has no name")
		case seen[f.Name]:
			return fmt.Errorf("field %q is declared twice", f.Name)
		case f.Doc == "":
			return fmt.Errorf("field %q has no doc", f.Name)
		case f.Required && f.Default != "":
			return fmt.Errorf("field %q is required and has a default", f.Name)
		}
		if err := f.checkKind(); err != nil {
			return err
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
		{Name: "key", Kind: ListValue, Type: "list of columns", Doc: "The primary key columns: a row whose key exists is updated. Required with delivery at-least-once."},
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
	p("The others take part in its commit with prepared transactions (`two-phase`), or the job file is refused.\n\n")
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
			p("\n### `%s`\n\n| field | type | default | |\n|---|---|---|---|\n", side.Section)
			for _, f := range side.Fields {
				def := f.Default
				switch {
				case f.Required:
					def = "required"
				case def == "":
					def = "–"
				}
				doc := f.Doc
				if f.Secret {
					doc += " A secret: never printed."
				}
				p("| `%s` | %s | %s | %s |\n", f.Name, f.TypeName(), def, doc)
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
