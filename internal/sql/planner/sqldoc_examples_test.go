package planner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/sql/planner"
)

// sqlBlock is a ```sql block of a Markdown page and the line it starts on.
type sqlBlock struct {
	line int
	text string
}

// sqlBlocks returns the ```sql blocks of page.
func sqlBlocks(page string) []sqlBlock {
	var out []sqlBlock
	var cur *sqlBlock
	for i, l := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```sql":
			cur = &sqlBlock{line: i + 2}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}

// Every ```sql block of docs/sql.md is a whole script that compiles (the
// planner) into a job file the job-file reader accepts, so the page's
// examples cannot rot.
func TestSQLDocExamples(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "sql.md")
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := sqlBlocks(string(page))
	if len(blocks) < 4 {
		t.Fatalf("%s has %d sql blocks; the tutorial, the statement set and the two window examples make at least 4", path, len(blocks))
	}
	if !strings.Contains(blocks[0].text, "md5(concat(cast(user_id AS STRING), cast(event_time AS STRING)))") {
		t.Errorf("%s: the first sql block is not the tutorial's job", path)
	}
	env := func(string) (string, bool) { return "secret", true }
	for _, b := range blocks {
		name := filepath.Join(t.TempDir(), fmt.Sprintf("sql-md-line-%d.sql", b.line))
		if _, err := planner.Compile(name, b.text); err != nil {
			t.Errorf("%s: the sql block at line %d does not compile (its own line:column follow):\n%v", path, b.line, err)
			continue
		}
		if _, err := jobfile.ParseJobFile(name, []byte(b.text), env); err != nil {
			t.Errorf("%s: the sql block at line %d compiles to a job file that is refused:\n%v", path, b.line, err)
		}
	}
}

// The block reader finds blocks and their first lines, and only sql ones.
func TestSQLBlocks(t *testing.T) {
	page := "# t\n```sql\nSELECT 1;\n```\ntext\n```go\nx\n```\n```sql\nA;\nB;\n```\n"
	got := sqlBlocks(page)
	if len(got) != 2 || got[0].line != 3 || got[0].text != "SELECT 1;\n" || got[1].line != 10 || got[1].text != "A;\nB;\n" {
		t.Errorf("sqlBlocks = %+v", got)
	}
}
