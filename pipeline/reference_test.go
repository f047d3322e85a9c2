package pipeline

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/operators.md from the operator specs")

// referencePath is the generated reference of the operators.
var referencePath = filepath.Join("..", "docs", "operators.md")

// docs/operators.md is generated from the specs: the test fails when it is
// out of date, and go test ./pipeline -update rewrites it.
func TestReferenceDocs(t *testing.T) {
	got := reference(Specs())
	if *update {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (go test ./pipeline -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with the operator specs: go test ./pipeline -update rewrites it", referencePath)
	}
}

// reference writes the Markdown reference of the operators in specs.
func reference(specs []Spec) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Pipeline operators\n\n")
	p("<!-- Generated from the operator specs in pipeline/ by `go test ./pipeline -update`: edit the specs, not this file. -->\n\n")
	p("A job file's `pipeline:` is a list of steps, applied to every record in order. ")
	p("Each step names one operator and gives its fields, as in the examples below.\n\n")
	p("Every step also takes `uid:`, the id its keyed state is found by in checkpoints and savepoints. ")
	p("Without it the id is the operator's name and the value of the field that says what the state is about ")
	p("(`dedupe:record.key`, `extract-key:user`), and the second, third… identical step gets `#2`, `#3`. ")
	p("So inserting, removing or reordering other steps keeps a step's state, and so does changing a field that is not part of the id; ")
	p("changing the one that is starts the state empty. `onceflow validate` prints every step's id.\n\n")
	p("A record a stateless step cannot process (a poison record) is handled by the job's `errors.policy`: ")
	p("`fail` (the default) stops the job, `skip` drops and counts it, `dead-letter` writes it to `errors.dead-letter-topic`.\n\n")
	p("From Go, each operator is a function of package [`pipeline`](https://pkg.go.dev/github.com/onceflow/onceflow/pipeline) ")
	p("over any record type, given a `pipeline.RecordAccess` that tells it how to read and change the records.\n\n")
	p("| operator | what it does | keyed state |\n|---|---|---|\n")
	for _, s := range specs {
		p("| [`%s`](#%s) | %s | %s |\n", s.Name, anchor(s.Name), cell(s.Summary), yesNo(s.Stateful))
	}
	p("\n## Expressions\n\n%s", ExpressionsDoc)
	p("\n### Functions\n\n%s", FunctionsDoc)
	for _, s := range specs {
		p("\n## %s\n\n%s\n", s.Name, s.Summary)
		if s.Doc != "" {
			p("\n%s\n", s.Doc)
		}
		if len(s.Fields) > 0 {
			p("\n| field | type | default | required | description | example |\n|---|---|---|---|---|---|\n")
			for _, f := range s.Fields {
				def := ""
				if f.Default != nil {
					def = "`" + formatValue(f.Default) + "`"
				}
				p("| `%s` | %s | %s | %s | %s | `%s` |\n", f.Name, f.Type, def, yesNo(f.Required), cell(f.Description), f.Example)
			}
		}
		p("\n")
		if s.IDField != "" {
			f, _ := s.Field(s.IDField)
			p("Default id: `%s:` and the %s, such as `%s:%s`. ", s.Name, f.Name, s.Name, f.Example)
		} else {
			p("Default id: `%s`. ", s.Name)
		}
		if s.Stateful {
			p("Keeps keyed state.")
		} else {
			p("Keeps no state.")
		}
		if s.GoFunc != "" {
			p(" From Go: [`pipeline.%s`](https://pkg.go.dev/github.com/onceflow/onceflow/pipeline#%s).", s.GoFunc, s.GoFunc)
		}
		p("\n\n```yaml\npipeline:\n  %s\n```\n", s.Example)
	}
	return b.Bytes()
}

func anchor(name string) string { return strings.ToLower(name) }

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
