package eval

import (
	"strings"
	"testing"
)

// Every built-in function says how it is called and what it does
// (docs/sql.md is generated from the registry), and the signature names
// the function.
func TestFunctionDocs(t *testing.T) {
	fs := Functions()
	if len(fs) != len(funcs) {
		t.Fatalf("Functions lists %d functions, the registry has %d", len(fs), len(funcs))
	}
	for _, f := range fs {
		if !strings.HasPrefix(f.Signature, f.Name) {
			t.Errorf("%s: signature %q does not start with the name", f.Name, f.Signature)
		}
		if !strings.Contains(f.Signature, "→") {
			t.Errorf("%s: signature %q has no result type (→ T)", f.Name, f.Signature)
		}
		if f.Doc == "" || !strings.HasSuffix(f.Doc, ".") {
			t.Errorf("%s: description %q is missing or not a sentence", f.Name, f.Doc)
		}
	}
	if len(Refused()) != len(refused) {
		t.Errorf("Refused lists %d functions, want %d", len(Refused()), len(refused))
	}
}
