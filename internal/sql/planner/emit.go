package planner

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// yamlWriter writes the job file a script compiles to, one line at a
// time, and remembers for every line the place in the script it comes
// from, so a problem the job-file reader finds on a line is reported at
// the SQL that caused it (Job.Origin).
type yamlWriter struct {
	b      strings.Builder
	line   int
	origin map[int]ast.Pos
}

func newYAMLWriter() *yamlWriter { return &yamlWriter{origin: map[int]ast.Pos{}} }

// linef writes one line, indented by depth levels, coming from at (zero:
// from nowhere in particular).
func (w *yamlWriter) linef(at ast.Pos, depth int, format string, args ...any) {
	w.line++
	if at.Line > 0 {
		w.origin[w.line] = at
	}
	w.b.WriteString(strings.Repeat("  ", depth))
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

// q quotes s as a YAML scalar: JSON's double-quoted strings are YAML's.
func q(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// qlist writes a flow sequence of quoted strings.
func qlist(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = q(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
