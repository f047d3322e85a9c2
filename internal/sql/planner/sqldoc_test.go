package planner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/sql/eval"
)

// sqlDocPath is the SQL reference page; its sections between
// <!-- generated: NAME --> and <!-- end generated: NAME --> are written
// from the code by sqlDocSections.
var sqlDocPath = filepath.Join("..", "..", "..", "docs", "sql.md")

// docs/sql.md's generated sections are the planner's option lists and
// settings and the function registry: the test fails when the page is out
// of date, and go test ./internal/sql/planner -run TestSQLDocs -update
// rewrites them (the rest of the page is written by hand).
func TestSQLDocs(t *testing.T) {
	page, err := os.ReadFile(sqlDocPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fillGenerated(page, sqlDocSections())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(sqlDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, page) {
		t.Errorf("%s is out of date with the planner and the function registry: go test ./internal/sql/planner -run TestSQLDocs -update rewrites its generated sections", sqlDocPath)
	}
}

// Every option the planner accepts, every connector, aggregate and
// setting has its sentence: a new one cannot reach the page undocumented.
func TestSQLDocsComplete(t *testing.T) {
	for _, o := range lookupOptions {
		if optionDoc("jdbc", o) == "" {
			t.Errorf("lookup option %q has no entry in optionDocs (reference.go)", o)
		}
	}
	for _, o := range kafkaSourceOptions {
		if optionDoc("kafka", o) == "" {
			t.Errorf("kafka source option %q has no entry in optionDocs (reference.go)", o)
		}
	}
	for c, opts := range sinkOptions {
		if connectorDocs[c] == "" {
			t.Errorf("connector %q has no entry in connectorDocs (reference.go)", c)
		}
		for _, o := range opts {
			if optionDoc(c, o) == "" {
				t.Errorf("%s option %q has no entry in optionDocs (reference.go)", c, o)
			}
		}
	}
	for c := range connectors {
		if _, ok := sinkOptions[c]; !ok {
			t.Errorf("connector %q has no option list", c)
		}
	}
	for name := range aggregateFuncs {
		if aggregateDocs[name] == "" {
			t.Errorf("aggregate %s has no entry in aggregateDocs (reference.go)", name)
		}
	}
	for k, s := range settingKeys {
		if settingBecomes(s) == "" {
			t.Errorf("SET '%s': section %q is not described by settingBecomes", k, s.section)
		}
	}
}

// The SQL option names the Kafka connector's spec declares (Field.SQL,
// which docs/connectors.md lists) are the ones the planner accepts on a
// Kafka table, so the two pages agree.
func TestSQLDocsKafkaSpec(t *testing.T) {
	check := func(side *connector.Side, accepted []string, what string) {
		ok := map[string]bool{}
		for _, o := range accepted {
			ok[o] = true
		}
		var walk func(fs []connector.Field)
		walk = func(fs []connector.Field) {
			for _, f := range fs {
				for _, n := range f.SQL {
					if !ok[n] {
						t.Errorf("kafka.Spec declares the SQL option %q on the %s side (field %s) and the planner does not accept it on a %s table", n, side.Section, f.Name, what)
					}
				}
				walk(f.Fields)
			}
		}
		walk(side.Fields)
	}
	check(kafka.Spec.Source, kafkaSourceOptions, "kafka source")
	check(kafka.Spec.Sink, sinkOptions["kafka"], "kafka sink")
}

var generatedRE = regexp.MustCompile(`(?s)(<!-- generated: ([a-z-]+) -->\n).*?(<!-- end generated: ([a-z-]+) -->)`)

// fillGenerated replaces each generated section of page by its text in
// sections; every section must be on the page once.
func fillGenerated(page []byte, sections map[string]string) ([]byte, error) {
	seen := map[string]bool{}
	var errs []string
	out := generatedRE.ReplaceAllFunc(page, func(m []byte) []byte {
		sm := generatedRE.FindSubmatch(m)
		name, end := string(sm[2]), string(sm[4])
		if name != end {
			errs = append(errs, fmt.Sprintf("section %q ends as %q", name, end))
			return m
		}
		text, ok := sections[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("unknown generated section %q", name))
			return m
		}
		if seen[name] {
			errs = append(errs, fmt.Sprintf("section %q is on the page twice", name))
		}
		seen[name] = true
		return []byte(string(sm[1]) + "\n" + text + "\n" + string(sm[3]))
	})
	for name := range sections {
		if !seen[name] {
			errs = append(errs, fmt.Sprintf("section %q is missing: add <!-- generated: %s --> and <!-- end generated: %s --> to the page", name, name, name))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s: %s", sqlDocPath, strings.Join(errs, "; "))
	}
	return out, nil
}

func sqlDocSections() map[string]string {
	return map[string]string{
		"connectors": connectorsSection(),
		"settings":   settingsSection(),
		"functions":  functionsSection(),
		"aggregates": aggregatesSection(),
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func connectorsSection() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	names := connectorNames()
	p("| connector | read by a query | written by `INSERT INTO` | read by a lookup join | |\n|---|---|---|---|---|\n")
	for _, c := range names {
		p("| [`%s`](#%s) | %s | %s | %s | %s |\n", c, c, yesNo(connectors[c].source), yesNo(connectors[c].sink), yesNo(connectors[c].lookup), cell(connectorDocs[c]))
	}
	table := func(c string, opts []string) {
		p("\n| option | |\n|---|---|\n")
		for _, o := range opts {
			p("| `%s` | %s |\n", o, cell(optionDoc(c, o)))
		}
	}
	for _, c := range names {
		p("\n### %s\n\n%s\n", c, connectorDocs[c])
		if connectors[c].source {
			p("\nRead by a query:\n")
			table(c, kafkaSourceOptions)
			p("\nWritten by `INSERT INTO`:\n")
		}
		table(c, sinkOptions[c])
		if connectors[c].lookup {
			p("\n%s\n", lookupDoc)
			table(c, lookupOptions)
		}
	}
	var ignored []string
	for o := range ignoredOptions {
		ignored = append(ignored, "`"+o+"`")
	}
	sort.Strings(ignored)
	p("\nAccepted on any table and ignored (tuning that means nothing here): %s. Any other option is refused, with a did-you-mean.\n", strings.Join(ignored, ", "))
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "–"
}

// settingBecomes says what a SET key becomes in the job file.
func settingBecomes(s setting) string {
	switch s.section {
	case "job":
		return "the job's name (`job:`; default the script's file name)"
	case "ttl":
		return "how long the state of a key of a `GROUP BY` aggregate, a deduplication or a Top-N is kept after its last update (default: for ever), and how long a join keeps each row (a join needs it or a `STATE_TTL` hint)"
	case "ignored":
		return "accepted and ignored (`onceflow validate` notes it)"
	case "plan":
		return "whether streams that read the same input and begin with the same steps share them (sub-plan reuse; default true): `false` writes each stream whole, as builds before it did"
	case "checkpointing", "restart", "state", "event-time":
		return "`" + s.section + "." + s.field + "`"
	}
	return ""
}

func settingsSection() string {
	var b strings.Builder
	keys := make([]string, 0, len(settingKeys))
	for k := range settingKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kinds := map[settingKind]string{setDuration: "duration (`10 s`, `1 min`, `500ms`)", setInt: "whole number", setFloat: "number", setString: "text"}
	fmt.Fprintf(&b, "| key | value | becomes |\n|---|---|---|\n")
	for _, k := range keys {
		s := settingKeys[k]
		v := kinds[s.kind]
		if s.section == "ignored" {
			v = "any"
		}
		if s.values != nil {
			var vals []string
			for x, to := range s.values {
				if x == to {
					vals = append(vals, "`"+x+"`")
				} else {
					vals = append(vals, fmt.Sprintf("`%s` (%s)", x, to))
				}
			}
			sort.Strings(vals)
			v = strings.Join(vals, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k, cell(v), cell(settingBecomes(s)))
	}
	fmt.Fprintf(&b, "\nAny other key is refused, with a did-you-mean. Without `SET 'execution.checkpointing.interval'` a script checkpoints every %s.\n", goDuration(DefaultCheckpointInterval))
	return b.String()
}

func functionsSection() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| function | |\n|---|---|\n")
	for _, f := range eval.Functions() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", cell(f.Signature), cell(f.Doc))
	}
	fmt.Fprintf(&b, "\nRefused, because a replay after a crash would compute other values than the first run wrote:\n\n")
	for _, f := range eval.Refused() {
		fmt.Fprintf(&b, "- `%s`: %s\n", f.Name, f.Doc)
	}
	return b.String()
}

func aggregatesSection() string {
	var names []string
	for n := range aggregateFuncs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "| aggregate | |\n|---|---|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, cell(aggregateDocs[n]))
	}
	return b.String()
}
