package flow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// declaredTypes returns the exported type names the non-test files of dir
// declare, without the aliases: declarations, not re-exports.
func declaredTypes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Name.IsExported() && !ts.Assign.IsValid() {
					out[ts.Name.Name] = filepath.Base(path)
				}
			}
		}
	}
	return out
}

// A contract, hook event or figure is declared once, in the engine, and
// flow re-exports it by alias (docs/design.md, "Packages and
// dependencies"): two declarations of one name drift apart and need
// conversions field by field. A name in both packages must be an alias
// in one of them, or two different things must have two names.
func TestContractsDeclaredOnce(t *testing.T) {
	flow := declaredTypes(t, ".")
	engine := declaredTypes(t, filepath.Join("..", "internal", "engine"))
	if len(flow) == 0 || len(engine) == 0 {
		t.Fatalf("found %d exported types in flow and %d in the engine: the test reads the wrong directories", len(flow), len(engine))
	}
	var both []string
	for name := range flow {
		if _, ok := engine[name]; ok {
			both = append(both, name)
		}
	}
	slices.Sort(both)
	for _, name := range both {
		t.Errorf("type %s is declared in flow (%s) and in internal/engine (%s): declare it once (flow aliases the engine's) or name them apart", name, flow[name], engine[name])
	}
}
