package engine

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The file map of doc.go names every source file of the package and no
// file that is gone, so it cannot go stale unnoticed.
func TestDocMapsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	mapped := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//\t(\w+\.go) `).FindAllStringSubmatch(string(doc), -1) {
		mapped[m[1]] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		if !mapped[f] {
			t.Errorf("%s is not in the file map of doc.go: add a line saying what it holds", f)
		}
		delete(mapped, f)
	}
	for _, f := range slices.Sorted(maps.Keys(mapped)) {
		t.Errorf("doc.go maps %s, which does not exist", f)
	}
}
