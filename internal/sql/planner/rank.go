package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Deduplication, Flink's way:
//
//	SELECT … FROM (
//	  SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY proc_time ASC) AS rn FROM t
//	) WHERE rn = 1
//
// keeps the first row of every id: a select keyed by the partition
// columns, then a dedupe step (the keys seen are keyed state, forgotten
// after SET 'table.exec.state.ttl'). ORDER BY proc_time DESC keeps the
// last row instead: every row passes and the result is updating, keyed
// by the partition columns, so an upsert table holds each id's newest.

// defaultDedupTTL is how long a deduplication remembers a key when no
// table.exec.state.ttl is set: for ever, in practice, as Flink's default.
const defaultDedupTTL = 10 * 365 * 24 * time.Hour

// rowNumber finds the ROW_NUMBER() item of a select; -1 when none.
func rowNumber(s *ast.Select) int {
	for i, it := range s.Items {
		if c, ok := it.Expr.(*ast.Call); ok && c.Over != nil && strings.EqualFold(c.Name.Last(), "ROW_NUMBER") {
			return i
		}
	}
	return -1
}

// dedup plans the FROM and WHERE of s when s reads a ROW_NUMBER()
// subquery: the relation it returns is the deduplicated rows, filtered by
// the rest of the WHERE; the caller projects or aggregates them. ok is
// false when s is not of that shape.
func (p *planner) dedup(s *ast.Select) (r *rel, ok bool) {
	sub, isSub := s.From.(*ast.SubqueryRef)
	if !isSub || len(sub.Query.With) > 0 || len(sub.Query.OrderBy) > 0 {
		return nil, false
	}
	inner, isSel := sub.Query.Body.(*ast.Select)
	if !isSel {
		return nil, false
	}
	rnAt := rowNumber(inner)
	if rnAt < 0 {
		return nil, false
	}
	rnItem := inner.Items[rnAt]
	call := rnItem.Expr.(*ast.Call)
	if rnItem.Alias == nil {
		p.errorf(rnItem.At, "ROW_NUMBER() needs a name (AS rn) for the outer WHERE rn = 1")
		return nil, true
	}
	rn := rnItem.Alias.Name
	// The outer WHERE: rn = 1 (or <= 1, < 2), and anything else.
	var rest []ast.Expr
	n := -1
	for _, c := range conjuncts(s.Where) {
		if k, isRN := rankBound(c, rn); isRN {
			n = k
			continue
		}
		rest = append(rest, c)
	}
	switch {
	case n < 0:
		p.errorf(s.At, "ROW_NUMBER() without WHERE %s = 1 keeps every row: deduplicate with WHERE %s = 1", rn, rn)
		return nil, true
	case n != 1:
		p.errorf(s.Where.Position(), "Top-N (%s <= %d) needs update-before rows, which come with the changelog work of issue 24; %s = 1 (deduplication) works", rn, n, rn)
		return nil, true
	}
	over := call.Over
	if len(over.PartitionBy) == 0 {
		p.errorf(call.At, "ROW_NUMBER() OVER (…) needs PARTITION BY: the columns that make two rows duplicates")
		return nil, true
	}
	if len(over.OrderBy) != 1 {
		p.errorf(call.At, "ROW_NUMBER() OVER (…) needs ORDER BY a time column: proc_time ASC keeps the first row, DESC the last")
		return nil, true
	}
	if inner.Where != nil && hasAggregate(inner.Where) || len(inner.GroupBy) > 0 || inner.Having != nil || inner.Distinct {
		p.errorf(inner.At, "deduplication reads rows as they come: the subquery with ROW_NUMBER() may select and filter, not aggregate")
		return nil, true
	}
	r = p.from(inner.From)
	if r == nil {
		return nil, true
	}
	if r.updating {
		p.errorf(inner.At, "deduplicating an updating result needs the changelog rows of issue 24")
		return nil, true
	}
	ob := over.OrderBy[0]
	oc, isCol := ob.Expr.(*ast.ColumnRef)
	if !isCol {
		p.errorf(ob.At, "ROW_NUMBER() OVER (… ORDER BY …) orders by a time column: a PROCTIME() column of the table")
		return nil, true
	}
	col, found := r.find(oc.Name.Last())
	if !found {
		p.resolve(r, oc) // reports the unknown column
		return nil, true
	}
	if pc, isCall := unparen(col.expr).(*ast.Call); !isCall || !strings.EqualFold(pc.Name.Last(), "PROCTIME") {
		p.errorf(ob.At, "deduplication ordered by %s: onceflow deduplicates in arrival order, ORDER BY a column declared AS PROCTIME(); ordering by event time needs update rows (issue 24)", oc.Name.Last())
		return nil, true
	}
	if inner.Where != nil {
		r.where = p.resolve(r, inner.Where)
	}
	// The partition columns, then the subquery's own.
	var keyCols []relCol
	var key []string
	for i, e := range over.PartitionBy {
		name := fmt.Sprintf("__k%d", i)
		keyCols = append(keyCols, relCol{name: name, expr: p.resolve(r, e)})
		key = append(key, name)
	}
	items := append(append([]*ast.SelectItem(nil), inner.Items[:rnAt]...), inner.Items[rnAt+1:]...)
	quals := r.quals
	r = p.project(r, items)
	r.cols = append(keyCols, r.cols...)
	if ob.Desc {
		// Keep last: every row is the newest of its key so far.
		r.updating = true
	} else {
		if p.materialize(r, key, s.At) == nil {
			return nil, true
		}
		ttl := p.stateTTL()
		if ttl == 0 {
			ttl = defaultDedupTTL
			p.notes = append(p.notes, "the deduplication remembers every key for ever (Flink's default): SET 'table.exec.state.ttl' bounds its state")
		}
		at := call.At
		p.stateful(r, at, "dedupe", func(w *yamlWriter, d int) {
			w.linef(at, d, "ttl: %s", goDuration(ttl))
		})
	}
	// What the outer select reads: the subquery's columns.
	r.cols = r.cols[len(key):]
	r.quals = quals
	if sub.Alias != nil {
		r.quals = []string{sub.Alias.Name}
	}
	for _, it := range s.Items {
		if c, isRef := it.Expr.(*ast.ColumnRef); isRef && strings.EqualFold(c.Name.Last(), rn) {
			p.errorf(c.Name.At, "%s is always 1 here: leave it out of the select list", rn)
			return nil, true
		}
	}
	if len(rest) > 0 {
		w := p.resolve(r, andAll(rest))
		if r.where == nil {
			r.where = w
		} else {
			r.where = &ast.Binary{Op: "AND", X: &ast.Paren{X: r.where}, Y: &ast.Paren{X: w}}
		}
		if r.updating {
			p.errorf(w.Position(), "a filter after a keep-last deduplication needs delete rows (issue 24): filter inside the subquery")
			return nil, true
		}
	}
	if r.updating {
		// The upsert key: the output columns that are the partition
		// columns, as the subquery selected them.
		for _, e := range over.PartitionBy {
			name := ""
			for i, it := range items {
				if it.Expr != nil && it.Expr.String() == e.String() {
					name = itemName(it, i)
				}
			}
			if name == "" {
				p.errorf(e.Position(), "keep-last deduplication: select the PARTITION BY column %s so a sink can upsert by it", e.String())
				return nil, true
			}
			r.key = append(r.key, name)
		}
	}
	return r, true
}

// conjuncts splits a condition on AND.
func conjuncts(e ast.Expr) []ast.Expr {
	if e == nil {
		return nil
	}
	if b, ok := unparen(e).(*ast.Binary); ok && strings.EqualFold(b.Op, "AND") {
		return append(conjuncts(b.X), conjuncts(b.Y)...)
	}
	return []ast.Expr{e}
}

func andAll(es []ast.Expr) ast.Expr {
	out := es[0]
	for _, e := range es[1:] {
		out = &ast.Binary{At: e.Position(), Op: "AND", X: out, Y: e}
	}
	return out
}

// rankBound reads rn = N, rn <= N, rn < N+1 (either way round): the
// number of rows kept per partition.
func rankBound(e ast.Expr, rn string) (int, bool) {
	b, ok := unparen(e).(*ast.Binary)
	if !ok {
		return 0, false
	}
	x, y, op := unparen(b.X), unparen(b.Y), b.Op
	if _, isLit := x.(*ast.Literal); isLit {
		x, y = y, x
		op = map[string]string{"=": "=", "<=": ">=", ">=": "<=", "<": ">", ">": "<"}[op]
	}
	c, ok := x.(*ast.ColumnRef)
	l, ok2 := y.(*ast.Literal)
	if !ok || !ok2 || l.Kind != ast.LitNumber || !strings.EqualFold(c.Name.Last(), rn) {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(l.Value, "%d", &n); err != nil {
		return 0, false
	}
	switch op {
	case "=", "<=":
		return n, true
	case "<":
		return n - 1, true
	}
	return 0, false
}
