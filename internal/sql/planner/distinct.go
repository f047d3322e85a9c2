package planner

import (
	"github.com/onceflow/onceflow/internal/sql/ast"
)

// SELECT DISTINCT (docs/design.md, "### SQL"): over an append-only
// relation, the first row of each distinct value of the selected columns
// passes and the others are dropped, so the result is append-only too.
// It is a deduplication keyed by every selected column: a select keyed
// by them and a dedupe step, whose keys are forgotten after SET
// 'table.exec.state.ttl' (else kept for ever, with a note, as the
// ROW_NUMBER() deduplication does).

// distinctKeyCol is the column that makes the key of a single selected
// column a JSON array, so that NULL (no key) and ” stay apart.
const distinctKeyCol = "__distinct"

// distinct plans the DISTINCT of s over r, its select list projected.
func (p *planner) distinct(r *rel, s *ast.Select) *rel {
	if r.updating {
		p.errorf(s.At, "SELECT DISTINCT over an updating result (a GROUP BY without a window, a keep-last deduplication, a Top-N) needs update-before rows (issue 24): apply DISTINCT to the rows before, or GROUP BY the columns into an upsert table")
		return nil
	}
	var key []string
	for _, c := range r.cols {
		key = append(key, c.name)
	}
	hidden := 0
	if len(key) == 1 {
		r.cols = append(r.cols, relCol{name: distinctKeyCol, expr: &ast.Literal{Kind: ast.LitBool, Value: "TRUE"}})
		key = append(key, distinctKeyCol)
		hidden = 1
	}
	if p.materialize(r, key, s.At) == nil {
		return nil
	}
	ttl := p.stateTTL()
	if ttl == 0 {
		ttl = defaultDedupTTL
		p.notes = append(p.notes, "SELECT DISTINCT remembers every distinct row for ever (Flink's default): SET 'table.exec.state.ttl' bounds its state")
	}
	at := s.At
	p.stateful(r, at, "dedupe", func(w *yamlWriter, d int) {
		w.linef(at, d, "ttl: %s", goDuration(ttl))
	})
	r.cols = r.cols[:len(r.cols)-hidden]
	return r
}
