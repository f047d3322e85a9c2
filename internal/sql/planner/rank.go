package planner

import (
	"fmt"
	"strconv"
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
//
// Top-N, WHERE rn <= N ordered by any columns (and rn = 1 ordered by
// other than a PROCTIME() column), is a select keyed by the partition
// columns and a top-n step: an updating result keyed by the partition
// columns and rn, which an upsert table of that primary key holds
// without retractions (docs/design.md, "SQL").

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
	// The outer WHERE: rn = 1 (or <= N, < N+1, BETWEEN 1 AND N), and
	// anything else.
	var rest []ast.Expr
	n := -1
	var bound ast.Expr
	for _, c := range conjuncts(s.Where) {
		k, isRN, err := rankBound(c, rn)
		if err != "" {
			p.errorf(c.Position(), "%s", err)
			return nil, true
		}
		if isRN {
			n, bound = k, c
			continue
		}
		rest = append(rest, c)
	}
	switch {
	case n < 0:
		p.errorf(s.At, "ROW_NUMBER() without WHERE %s = 1 or %s <= N keeps every row: deduplicate with WHERE %s = 1, or keep each partition's top N with WHERE %s <= N", rn, rn, rn, rn)
		return nil, true
	case n < 1:
		p.errorf(bound.Position(), "%s keeps no row: ranks start at 1; write %s <= N with N of 1 or more", bound.String(), rn)
		return nil, true
	}
	over := call.Over
	if len(over.OrderBy) == 0 {
		p.errorf(call.At, "ROW_NUMBER() OVER (…) needs ORDER BY: a time column for deduplication (proc_time ASC keeps the first row, DESC the last), or the columns that rank the rows of a Top-N")
		return nil, true
	}
	if inner.Where != nil && hasAggregate(inner.Where) || len(inner.GroupBy) > 0 || inner.Having != nil || inner.Distinct {
		p.errorf(inner.At, "deduplication and Top-N read rows as they come: the subquery with ROW_NUMBER() may select and filter, not aggregate")
		return nil, true
	}
	if j, ok := inner.From.(*ast.Join); ok {
		// A join places the WHERE's conjuncts itself (its keys are
		// there in a comma join): they are not applied again.
		r = p.joinFrom(j, inner.Where, inner.Hints)
		noWhere := *inner
		noWhere.Where = nil
		inner = &noWhere
	} else {
		r = p.from(inner.From)
	}
	if r == nil {
		return nil, true
	}
	if r.updating {
		p.errorf(inner.At, "deduplicating or ranking an updating result needs the changelog rows of issue 24")
		return nil, true
	}
	// rn = 1 in arrival order (ORDER BY a PROCTIME() column) is a
	// deduplication; anything else ranks rows by their values.
	ob := over.OrderBy[0]
	if n > 1 || len(over.OrderBy) > 1 || !p.isProctime(r, ob.Expr) {
		return p.topN(s, sub, inner, r, rnAt, n, bound, rest), true
	}
	if len(over.PartitionBy) == 0 {
		p.errorf(call.At, "deduplication with ROW_NUMBER() OVER (…) needs PARTITION BY: the columns that make two rows duplicates")
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
		r.updating, r.lastRows = true, true
	} else {
		if p.materializeKeyed(r, key, s.At) == nil {
			return nil, true
		}
		ttl := p.stateTTL()
		if ttl == 0 {
			ttl = defaultDedupTTL
			p.notes = append(p.notes, "the deduplication remembers every key for ever (Flink's default): SET 'table.exec.state.ttl' bounds its state")
		}
		at := call.At
		keyOf := exprTexts(over.PartitionBy)
		p.stateful(r, at, "dedupe", func(w *yamlWriter, d int) {
			writeKeyOf(w, at, d, keyOf)
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
				if c, ok := e.(*ast.ColumnRef); ok && it.Star && it.Qualifier == nil && name == "" {
					name = c.Name.Last() // SELECT *: the column as it is
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

// isProctime tells whether e is a column of r declared AS PROCTIME().
func (p *planner) isProctime(r *rel, e ast.Expr) bool {
	oc, isCol := e.(*ast.ColumnRef)
	if !isCol {
		return false
	}
	col, found := r.find(oc.Name.Last())
	if !found {
		return false
	}
	pc, isCall := unparen(col.expr).(*ast.Call)
	return isCall && strings.EqualFold(pc.Name.Last(), "PROCTIME")
}

// rankBound reads rn = N, rn <= N, rn < N+1 (either way round) and rn
// BETWEEN 1 AND N: the number of rows kept per partition. msg, when
// set, says why a condition on rn is not one onceflow compiles.
func rankBound(e ast.Expr, rn string) (n int, ok bool, msg string) {
	if bt, isBetween := unparen(e).(*ast.Between); isBetween {
		c, isCol := unparen(bt.X).(*ast.ColumnRef)
		if !isCol || !strings.EqualFold(c.Name.Last(), rn) {
			return 0, false, ""
		}
		lo, okLo := intLiteral(bt.Lo)
		hi, okHi := intLiteral(bt.Hi)
		if bt.Not || bt.Symmetric || !okLo || !okHi {
			return 0, false, fmt.Sprintf("%s: write the ranks kept as %s BETWEEN 1 AND N, or %s <= N", e.String(), rn, rn)
		}
		if lo != 1 {
			return 0, false, fmt.Sprintf("%s: ranks from %d on need a Top-N with an offset, not supported yet; keep the ranks from 1 (%s BETWEEN 1 AND %d) and filter the others where the rows are read", e.String(), lo, rn, hi)
		}
		return hi, true, ""
	}
	n, op, ok := rankCompare(e, rn)
	if ok && op == "=" && n != 1 {
		return 0, false, fmt.Sprintf("%s keeps rank %d alone, which needs a Top-N with an offset, not supported yet; keep the ranks from 1 with %s <= %d", e.String(), n, rn, n)
	}
	return n, ok, ""
}

// intLiteral reads a whole number literal.
func intLiteral(e ast.Expr) (int, bool) {
	l, ok := unparen(e).(*ast.Literal)
	if !ok || l.Kind != ast.LitNumber {
		return 0, false
	}
	n, err := strconv.Atoi(l.Value)
	return n, err == nil
}

// rankCompare reads rn = N, rn <= N, rn < N+1, either way round: the
// last rank kept, and the comparison as rn OP N.
func rankCompare(e ast.Expr, rn string) (int, string, bool) {
	b, ok := unparen(e).(*ast.Binary)
	if !ok {
		return 0, "", false
	}
	x, y, op := unparen(b.X), unparen(b.Y), b.Op
	if _, isLit := x.(*ast.Literal); isLit {
		x, y = y, x
		op = map[string]string{"=": "=", "<=": ">=", ">=": "<=", "<": ">", ">": "<"}[op]
	}
	c, ok := x.(*ast.ColumnRef)
	if !ok || !strings.EqualFold(c.Name.Last(), rn) {
		return 0, "", false
	}
	n, ok := intLiteral(y)
	if !ok {
		return 0, "", false
	}
	switch op {
	case "=", "<=":
		return n, op, true
	case "<":
		return n - 1, op, true
	}
	return 0, "", false
}

// rankInfo is what a Top-N relation needs of the select that reads it
// and of the sink it goes to: its upsert key is the partition columns
// and rn, which the outer select must pass through as they are.
type rankInfo struct {
	at    ast.Pos // the ROW_NUMBER() call
	n     int
	rn    string
	bound string // the condition on rn, as written
	// part are the subquery's names of the partition columns, as the
	// records after the top-n step hold them.
	part []string
}

// noSortTypes are the types Top-N cannot order by: their JSON form does
// not sort as their values do.
var noSortTypes = map[string]bool{"ROW": true, "ARRAY": true, "MAP": true, "MULTISET": true, "BYTES": true, "BINARY": true, "VARBINARY": true}

// topN plans the subquery inner (ROW_NUMBER() at rnAt, over r, its FROM)
// as a select keyed by the partition columns and a top-n step keeping n
// rows per partition; the outer select s reads its columns and rn.
func (p *planner) topN(s *ast.Select, sub *ast.SubqueryRef, inner *ast.Select, r *rel, rnAt, n int, bound ast.Expr, rest []ast.Expr) *rel {
	call := inner.Items[rnAt].Expr.(*ast.Call)
	rn := inner.Items[rnAt].Alias.Name
	over := call.Over
	var keyCols []relCol
	var key []string
	for i, e := range over.PartitionBy {
		name := fmt.Sprintf("__k%d", i)
		keyCols = append(keyCols, relCol{name: name, expr: p.resolve(r, e)})
		key = append(key, name)
	}
	global := len(over.PartitionBy) == 0
	if global {
		// No PARTITION BY: one ranking of every row, under one key (one
		// subtask keeps it, as in Flink); the result is keyed by rn alone.
		keyCols = append(keyCols, relCol{name: "__k0", expr: &ast.Literal{Kind: ast.LitString, Value: "all"}})
		key = append(key, "__k0")
	}
	orderExprs := make([]ast.Expr, len(over.OrderBy))
	for i, ob := range over.OrderBy {
		orderExprs[i] = p.resolve(r, ob.Expr)
	}
	if inner.Where != nil {
		r.where = p.resolve(r, inner.Where)
	}
	items := append(append([]*ast.SelectItem(nil), inner.Items[:rnAt]...), inner.Items[rnAt+1:]...)
	quals := r.quals
	r = p.project(r, items)
	for _, c := range r.cols {
		if strings.EqualFold(c.name, rn) {
			p.errorf(call.At, "the subquery has a column %s besides ROW_NUMBER() AS %s: name one of them otherwise", c.name, rn)
			return nil
		}
	}
	visible := len(r.cols)
	// The partition columns as the subquery selects them: the sink's key.
	info := &rankInfo{at: call.At, n: n, rn: rn, bound: bound.String()}
	for i, kc := range keyCols {
		if global {
			break
		}
		name := ""
		for _, c := range r.cols {
			if c.expr.String() == kc.expr.String() {
				name = c.name
				break
			}
		}
		if name == "" {
			e := over.PartitionBy[i]
			p.errorf(e.Position(), "Top-N: select the PARTITION BY column %s in the subquery: with %s it is the key the result is upserted by", e.String(), rn)
			return nil
		}
		info.part = append(info.part, name)
	}
	// The sort values: a column of the subquery when one is the ORDER BY
	// expression, else a hidden column __o<i>.
	var orderCols []relCol
	orderNames := make([]string, len(orderExprs))
	for i, e := range orderExprs {
		for _, c := range r.cols {
			if c.expr.String() == e.String() {
				orderNames[i] = c.name
				break
			}
		}
		if orderNames[i] == "" {
			orderNames[i] = fmt.Sprintf("__o%d", i)
			orderCols = append(orderCols, relCol{name: orderNames[i], expr: e})
		}
	}
	r.cols = append(append(keyCols, r.cols...), orderCols...)
	types := p.materializeKeyed(r, key, s.At)
	if types == nil {
		return nil
	}
	var order []string
	for i, ob := range over.OrderBy {
		if t := types[orderNames[i]]; t != nil && noSortTypes[t.Name] {
			p.errorf(ob.At, "Top-N orders by %s, of type %s, whose values have no order here: order by numbers, text, booleans, dates or times", ob.Expr.String(), t.String())
			return nil
		}
		o := valuePath(orderNames[i])
		if ob.Desc {
			o += " desc"
		}
		if ob.NullsFirst != nil {
			if *ob.NullsFirst {
				o += " nulls first"
			} else {
				o += " nulls last"
			}
		}
		order = append(order, o)
	}
	ttl := p.stateTTL()
	at := call.At
	keyOf := exprTexts(over.PartitionBy)
	p.stateful(r, at, "top-n", func(w *yamlWriter, d int) {
		writeKeyOf(w, at, d, keyOf)
		w.linef(at, d, "n: %d", n)
		w.linef(at, d, "order: %s", qlist(order))
		w.linef(at, d, "rank-field: %s", q(rn))
		if ttl > 0 {
			w.linef(at, d, "ttl: %s", goDuration(ttl))
		}
	})
	// What the outer select reads: the subquery's columns and rn.
	r.in = append(r.in, schemaCol{name: rn, typ: &ast.Type{Name: "BIGINT"}})
	r.cols = append(append([]relCol(nil), r.cols[len(key):len(key)+visible]...), relCol{name: rn, expr: ref(rn)})
	r.quals = quals
	if sub.Alias != nil {
		r.quals = []string{sub.Alias.Name}
	}
	r.updating = true
	r.rank = info
	if len(rest) > 0 {
		w := p.resolve(r, andAll(rest))
		p.errorf(w.Position(), "a filter after Top-N needs delete rows (retractions), not supported yet: filter inside the subquery, before the rows are ranked")
		return nil
	}
	return r
}

// rankKey sets the upsert key of a Top-N result r that the select s
// projected: the output columns that are the partition columns and rn.
func (p *planner) rankKey(r *rel, s *ast.Select) bool {
	info := r.rank
	var key []string
	for _, want := range append(append([]string(nil), info.part...), info.rn) {
		name := ""
		for _, c := range r.cols {
			if isRef(c.expr, want) {
				name = c.name
				break
			}
		}
		if name == "" && want == info.rn && info.n == 1 {
			continue // one row per partition: the partition columns are the key
		}
		if name == "" {
			what := "the PARTITION BY column " + want
			if want == info.rn {
				what = info.rn
			}
			p.errorf(s.At, "Top-N (%s) must select %s as it is, into a table with PRIMARY KEY (%s): its rows are upserted by the partition columns and %s; without %s a partition's rows would replace each other, which needs update-before rows (retractions), not supported yet", info.bound, what, strings.Join(append(append([]string(nil), info.part...), info.rn), ", "), info.rn, what)
			return false
		}
		key = append(key, name)
	}
	r.key = key
	return true
}

// rankSink checks the table a Top-N result r is written to: an upsert
// table whose primary key is the result's key (keyInSink, in the
// table's column names), the partition columns and rn. Without
// update-before rows, no other table can hold the result: a rank's row
// is replaced in place, never deleted.
func (p *planner) rankSink(r *rel, sink *table, upsert bool, keyInSink []string, ins *ast.Insert) bool {
	info := r.rank
	want := strings.Join(keyInSink, ", ")
	if !upsert && sink.connector == "blackhole" {
		return true // a blackhole takes any changelog, as Flink's does; keyed by the ranking (sinkSteps)
	}
	if !upsert {
		p.errorf(ins.At, "table %s is append-only, and the Top-N at %d:%d (%s) replaces a partition's rows as records arrive: writing that to an append-only table needs update-before rows (retractions), not supported yet; write to a table with PRIMARY KEY (%s) NOT ENFORCED (a jdbc, postgres, mysql, 'upsert-kafka' or blackhole table)", sink.name, info.at.Line, info.at.Col, info.bound, want)
		return false
	}
	if strings.Join(lower(sink.pk), ",") != strings.Join(lower(keyInSink), ",") {
		p.errorf(ins.At, "table %s's primary key (%s) is not the key of the Top-N at %d:%d (%s), the partition columns and %s: other keys need update-before rows (retractions), not supported yet; declare PRIMARY KEY (%s) NOT ENFORCED", sink.name, strings.Join(sink.pk, ", "), info.at.Line, info.at.Col, info.bound, info.rn, want)
		return false
	}
	return true
}
