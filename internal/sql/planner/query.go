package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/suggest"
)

// A relation being planned: the records after the steps so far, seen as
// rows of named columns. The last select is kept open (cols and where
// are expressions over the schema of the records at that point, in) so
// that consecutive projections and filters become one step: a record is
// decoded once, whatever number of views and subqueries it goes through.
type rel struct {
	src   *table
	steps []step
	// in is the schema of the records' JSON values after steps.
	in    []schemaCol
	cols  []relCol
	where ast.Expr
	// quals are the names that qualify this relation's columns (the table
	// or view name, its alias).
	quals []string
	// updating: the relation is a changelog of upserts keyed by key (a
	// GROUP BY without a window), not append-only.
	updating bool
	key      []string
	// retracts is set on an updating result whose rows can be taken out
	// again, by a retraction or a delete (docs/design.md, "Changelogs"):
	// its sink must apply deletes.
	retracts bool
	// ub, on an updating result of an aggregate step, is that step's
	// update-before switch: what reads the result and needs the old rows
	// (a filter, an aggregate) turns it on. nil: the step that made the
	// result cannot emit them (Top-N, a keep-last deduplication).
	ub *bool
	// lastRows: the updating result is a keep-last deduplication's, upserts
	// keyed by key, which needRetractions can normalize.
	lastRows bool
	// keyless is where an updating result leaves some of its group
	// columns out of its select list: an aggregate can read it, a sink
	// cannot upsert it.
	keyless *ast.Pos
	// rowtime is the column holding the event time (the source's
	// WATERMARK column, passed through); "" when none.
	rowtime string
	// win is set on the relation a window table function returns.
	win *windowSpec
	// branches are the inputs of a UNION ALL (src is then nil): each a
	// stream of its own, their records merged by the union step that
	// starts steps.
	branches []*rel
	// unionOnly: r is a union and nothing after it yet.
	unionOnly bool
	// rank is set on a Top-N result: its key must reach the sink as it
	// is (rank.go).
	rank *rankInfo
	// join: r is a join of its two branches (the left and right sides);
	// pair is its join step's condition of both sides (join.go).
	join bool
	pair *pairCond
	// outer, on an outer join's result, says why it is updating (for a
	// sink that cannot take it).
	outer string
	// padded, on an outer join's result, tells which of its sides (the
	// join step's left and right members) are padded with NULLs.
	padded [2]bool
	// nullable, on a join's result, names the members of its join step's
	// output ("left.id", "right.*" for a whole side) that a padded row of
	// this join or of an outer join before it in a chain makes NULL;
	// nullOut, on a join's side, the columns of its select that come
	// straight from such a member (outerKeyNotNull).
	nullable map[string]bool
	nullOut  map[string]bool
	// prune, on a regular join's result, collects what the select reading
	// it uses of its sides; sidePrune, on a side, is consulted by the
	// side's select (prune.go).
	prune     *joinPrune
	sidePrune *sidePrune
	// csv is set while the records are a csv table's values, before the
	// first select step reads them into JSON rows.
	csv *csvFormat
	// cdc is set while the records are a debezium-json table's change
	// events, before the first select step reads them into rows.
	cdc bool
	// out, when set, is how the next select step writes its output (a
	// csv or raw sink table).
	out *outFormat
}

// sources lists the tables r reads.
func (r *rel) sources() []*table {
	if r.src != nil {
		return []*table{r.src}
	}
	var out []*table
	for _, b := range r.branches {
		out = append(out, b.sources()...)
	}
	return out
}

type schemaCol struct {
	name string
	typ  *ast.Type
	meta string // METADATA FROM key, "" for a JSON field
}

type relCol struct {
	name string
	expr ast.Expr // over rel.in
	// qual are the names that qualify this column when they differ from
	// the relation's (nil): a join's columns keep their tables' names.
	qual []string
	// leaf is the table of a join's FROM the column comes from (see
	// joinFrom); 0 elsewhere.
	leaf int
	// merged: a JOIN … USING column of the right side, which the left
	// side's stands for: SELECT * and an unqualified name skip it.
	merged bool
}

// A step of the job file, written by write.
type step struct {
	at    ast.Pos
	write func(w *yamlWriter, depth int)
}

type windowSpec struct {
	at                     ast.Pos
	kind                   string // TUMBLE, HOP, CUMULATE, SESSION
	size, slide, step, gap time.Duration
	timeCol                string
	// offset shifts TUMBLE and HOP windows (0 up to the size, or the
	// slide).
	offset time.Duration
	// proc: the time column is a PROCTIME() column, so the windows are
	// the window step's processing-time windows (docs/design.md, "### SQL").
	proc bool
}

func (r *rel) colNames() []string {
	var out []string
	for _, c := range r.cols {
		out = append(out, c.name)
	}
	return out
}

func (r *rel) find(name string) (relCol, bool) {
	for _, c := range r.cols {
		if c.name == name {
			return c, true
		}
	}
	for _, c := range r.cols {
		if strings.EqualFold(c.name, name) {
			return c, true
		}
	}
	return relCol{}, false
}

// ref is a reference to a column; a name that is a reserved word (a
// column `order` declared in a CREATE TABLE, where it needs no quotes)
// is quoted, so the printed expression parses again.
func ref(parts ...string) *ast.ColumnRef {
	n := ast.Name{}
	for _, s := range parts {
		n.Parts = append(n.Parts, ast.Ident{Name: s, Quoted: ast.Reserved[strings.ToUpper(s)]})
	}
	return &ast.ColumnRef{Name: n}
}

func isRef(e ast.Expr, name string) bool {
	c, ok := e.(*ast.ColumnRef)
	return ok && len(c.Name.Parts) == 1 && c.Name.Parts[0].Name == name
}

// scan is the relation of a source table: its columns, computed ones as
// their expressions.
func (p *planner) scan(t *table, alias string, at ast.Pos) *rel {
	if !connectors[t.connector].source {
		if connectors[t.connector].lookup {
			p.errorf(at, "table %s uses the %s connector, which a query reads only in a lookup join: JOIN %s FOR SYSTEM_TIME AS OF a.proc_time AS b ON a.k = b.id, proc_time a PROCTIME() column of the stream a", t.name, t.connector, t.name)
			return nil
		}
		p.errorf(at, "table %s uses the %s connector, which cannot be read: onceflow reads Kafka tables ('connector' = 'kafka')", t.name, t.connector)
		return nil
	}
	r := &rel{src: t, quals: []string{t.name}}
	if alias != "" {
		r.quals = append(r.quals, alias)
	}
	raw := t.format() == "raw"
	if t.format() == "csv" {
		r.csv = p.csvFormat(t)
	}
	if t.connector == "upsert-kafka" && !p.upsertSource(t, r) {
		return nil
	}
	if t.format() == "debezium-json" {
		// A changelog: each change is its row's retraction and add
		// (docs/design.md, "Changelogs"), keyed by the primary key.
		r.cdc = true
		r.updating, r.retracts, r.key = true, true, t.pk
		r.ub = new(bool) // always on: the source emits the old rows anyway
	}
	fields := 0
	for _, c := range t.cols {
		if c.Expr == nil && !c.Metadata {
			fields++
		}
	}
	if raw && fields != 1 {
		p.errorf(t.at, "table %s is 'format' = 'raw': it has one column (STRING or BYTES), the whole value; metadata and computed columns may come beside it", t.name)
		return nil
	}
	for _, c := range t.cols {
		if c.Expr != nil {
			continue
		}
		sc := schemaCol{name: c.Name.Name, typ: c.Type}
		if c.Metadata {
			sc.meta = c.MetadataKey
			if sc.meta == "" {
				sc.meta = c.Name.Name
			}
		} else if raw {
			sc.meta = "value"
		}
		r.in = append(r.in, sc)
	}
	for _, c := range t.cols {
		var e ast.Expr = ref(c.Name.Name)
		if c.Expr != nil {
			e = c.Expr
		}
		r.cols = append(r.cols, relCol{name: c.Name.Name, expr: e})
	}
	// Computed columns may name each other: substitute until none is left
	// (a cycle is refused).
	for i := range r.cols {
		for depth := 0; ; depth++ {
			if depth > len(r.cols) {
				p.errorf(at, "the computed columns of %s refer to each other in a cycle", t.name)
				return nil
			}
			changed := false
			r.cols[i].expr = rewrite(r.cols[i].expr, func(e ast.Expr) (ast.Expr, bool) {
				cr, ok := e.(*ast.ColumnRef)
				if !ok {
					return nil, false
				}
				if d := t.col(cr.Name.Parts[0].Name); d != nil && d.Expr != nil {
					changed = true
					return nest(&ast.Paren{X: d.Expr}, cr.Name.Parts[1:]), true
				}
				return e, true
			})
			if !changed {
				break
			}
		}
	}
	if t.watermark != nil {
		r.rowtime = t.watermark.Column.Name
	}
	return r
}

// nest applies the field accesses rest to e.
func nest(e ast.Expr, rest []ast.Ident) ast.Expr {
	if len(rest) == 0 {
		return e
	}
	if c, ok := e.(*ast.ColumnRef); ok {
		n := c.Name
		n.Parts = append(append([]ast.Ident(nil), n.Parts...), rest...)
		return &ast.ColumnRef{Name: n}
	}
	for _, id := range rest {
		e = &ast.Field{At: id.At, X: e, Name: id}
	}
	return e
}

// resolve rewrites e, written over r's columns, into an expression over
// r.in.
func (p *planner) resolve(r *rel, e ast.Expr) ast.Expr {
	return rewrite(e, func(x ast.Expr) (ast.Expr, bool) {
		switch n := x.(type) {
		case *ast.ColumnRef:
			c, rest, msg := r.lookup(n.Name.Parts)
			if msg != "" {
				p.errorf(n.Name.At, "%s", msg)
				return x, true
			}
			switch c.expr.(type) {
			case *ast.ColumnRef, *ast.Paren, *ast.Literal, *ast.Call, *ast.Cast:
				return nest(c.expr, rest), true
			}
			return nest(&ast.Paren{X: c.expr}, rest), true
		case *ast.Subquery:
			p.errorf(n.At, "subqueries in expressions are not supported yet: join the table instead")
			return x, true
		case *ast.Call:
			if n.Over != nil {
				p.errorf(n.At, "%s(…) OVER (…) is supported only as ROW_NUMBER() in a subquery for deduplication and Top-N (… WHERE rn = 1, or rn <= N); other OVER aggregates come with the changelog work (issue 24)", n.Name.Last())
				return x, true
			}
		}
		return nil, false
	})
}

// query plans a query.
func (p *planner) query(qy *ast.Query) *rel {
	if len(qy.With) > 0 {
		for _, cte := range qy.With {
			name := strings.ToLower(cte.Name.Name)
			if p.views[name] != nil || p.tables[name] != nil {
				p.errorf(cte.At, "WITH %s: a table or view of that name exists already", cte.Name.Name)
				return nil
			}
			p.views[name] = &view{name: cte.Name.Name, def: &ast.CreateView{At: cte.At, Name: ast.Name{At: cte.Name.At, Parts: []ast.Ident{cte.Name}}, Columns: cte.Columns, Query: cte.Query}}
		}
	}
	if len(qy.OrderBy) > 0 || qy.Limit != nil {
		p.errorf(qy.At, "ORDER BY and LIMIT on a stream: a continuous query has no end to sort or limit; for the top rows per group write ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) and WHERE rownum <= N")
		return nil
	}
	return p.body(qy.Body)
}

func (p *planner) body(b ast.SetExpr) *rel {
	switch s := b.(type) {
	case *ast.Select:
		return p.selectBlock(s)
	case *ast.Query:
		return p.query(s)
	case *ast.SetOp:
		if !strings.EqualFold(s.Op, "UNION") || !s.All {
			p.errorf(s.At, "%s: a stream keeps no set of the rows it saw; UNION ALL merges streams, and ROW_NUMBER() deduplicates", setOpText(s))
			return nil
		}
		left, right := p.body(s.Left), p.body(s.Right)
		if left == nil || right == nil {
			return nil
		}
		return p.union(s, left, right)
	}
	return nil
}

func setOpText(s *ast.SetOp) string {
	if s.All {
		return s.Op + " ALL"
	}
	return s.Op
}

// union plans left UNION ALL right: each side's last select is written
// with the left side's column names, and a union step merges them.
func (p *planner) union(s *ast.SetOp, left, right *rel) *rel {
	var branches []*rel
	for _, r := range []*rel{left, right} {
		if r.src == nil && len(r.steps) == 1 && r.unionOnly {
			branches = append(branches, r.branches...) // a UNION ALL b UNION ALL c: one union of three
		} else {
			branches = append(branches, r)
		}
	}
	first := branches[0]
	names := first.colNames()
	var schema []schemaCol
	for i, b := range branches {
		if b.updating {
			p.errorf(s.At, "UNION ALL of an updating result (a GROUP BY without a window) needs the changelog rows of issue 24")
			return nil
		}
		if len(b.cols) != len(names) {
			p.errorf(s.At, "UNION ALL: part %d has %d columns and the first has %d (%s)", i+1, len(b.cols), len(names), strings.Join(names, ", "))
			return nil
		}
		for j := range b.cols {
			b.cols[j].name = names[j]
		}
		types := p.materializeForce(b, nil, s.At)
		if types == nil {
			return nil
		}
		if i == 0 {
			schema = append([]schemaCol(nil), b.in...)
			continue
		}
		for j, c := range b.in {
			if c.typ.String() != schema[j].typ.String() {
				p.errorf(s.At, "UNION ALL: column %s is %s in part %d and %s in the first: CAST it to one type", names[j], c.typ, i+1, schema[j].typ)
				return nil
			}
		}
	}
	r := &rel{branches: branches, in: schema, unionOnly: true}
	for _, c := range schema {
		r.cols = append(r.cols, relCol{name: c.name, expr: ref(c.name)})
	}
	at := s.At
	r.steps = []step{{at: at, write: func(w *yamlWriter, d int) {
		w.linef(at, d, "- union: {}")
	}}}
	return r
}

// from plans a FROM item.
func (p *planner) from(te ast.TableExpr) *rel {
	switch f := te.(type) {
	case *ast.TableRef:
		if f.SystemTime != nil {
			p.errorf(f.At, "FOR SYSTEM_TIME AS OF reads a table in a join, as the right side of its JOIN … ON (a lookup join of a database table, a temporal join of a versioned table), last in a chain of joins: join the others in a subquery before it")
			return nil
		}
		alias := ""
		if f.Alias != nil {
			alias = f.Alias.Name
		}
		name := strings.ToLower(f.Name.Last())
		if v := p.views[name]; v != nil {
			r := p.viewRel(v)
			if r != nil {
				r.quals = []string{v.name}
				if alias != "" {
					r.quals = append(r.quals, alias)
				}
			}
			return r
		}
		t := p.tableNamed(f.Name)
		if t == nil {
			return nil
		}
		return p.scan(t, alias, f.At)
	case *ast.SubqueryRef:
		r := p.query(f.Query)
		if r != nil && f.Alias != nil {
			r.quals = []string{f.Alias.Name}
		}
		return r
	case *ast.TableFunc:
		r := p.windowTVF(f)
		if r != nil && f.Alias != nil {
			r.quals = append(r.quals, f.Alias.Name) // a window join's side
		}
		return r
	case *ast.Join:
		return p.joinFrom(f, nil, nil)
	}
	return nil
}

func (p *planner) viewRel(v *view) *rel {
	r := p.query(v.def.Query)
	if r == nil {
		return nil
	}
	if len(v.def.Columns) > 0 {
		if len(v.def.Columns) != len(r.cols) {
			p.errorf(v.def.At, "view %s names %d columns and its query has %d", v.name, len(v.def.Columns), len(r.cols))
			return nil
		}
		for i, c := range v.def.Columns {
			if r.cols[i].name == r.rowtime {
				r.rowtime = c.Name
			}
			r.cols[i].name = c.Name
		}
	}
	return r
}

// selectBlock plans one SELECT.
func (p *planner) selectBlock(s *ast.Select) *rel {
	if s.From == nil {
		p.errorf(s.At, "SELECT without FROM has no stream to read")
		return nil
	}
	r, deduped := p.dedup(s)
	whereDone := deduped
	if j, ok := s.From.(*ast.Join); ok && !deduped {
		r, whereDone = p.joinFrom(j, s.Where, s.Hints), true // the join places the WHERE's conjuncts
	} else if !deduped {
		r = p.from(s.From)
	}
	if _, isJoin := s.From.(*ast.Join); !isJoin {
		for _, h := range s.Hints {
			p.notes = append(p.notes, fmt.Sprintf("the hint %s at line %d is read on a join's SELECT only, and ignored here (SET 'table.exec.state.ttl' bounds the state of every step)", h.Name, h.At.Line))
		}
	}
	if r == nil {
		return nil
	}
	if r.updating && !deduped && s.Where != nil && !p.needRetractions(r, s.Where.Position(), "filtering") {
		return nil
	}
	if s.Where != nil && !whereDone {
		if hasAggregate(s.Where) {
			p.errorf(s.Where.Position(), "an aggregate function in WHERE: move the condition to HAVING")
			return nil
		}
		w := p.resolve(r, s.Where)
		if r.where == nil {
			r.where = w
		} else {
			r.where = &ast.Binary{At: w.Position(), Op: "AND", X: &ast.Paren{X: r.where}, Y: &ast.Paren{X: w}}
		}
	}
	aggs := len(s.GroupBy) > 0 || s.Having != nil
	for _, it := range s.Items {
		if it.Expr != nil && hasAggregate(it.Expr) {
			aggs = true
		}
	}
	if aggs {
		if s.Distinct {
			p.errorf(s.At, "SELECT DISTINCT with GROUP BY or an aggregate is not supported: a GROUP BY's rows are one per group already; leave DISTINCT out, or select the distinct rows in a subquery first")
			return nil
		}
		return p.aggregate(r, s)
	}
	if r.win != nil {
		p.errorf(s.At, "a window table function without GROUP BY window_start, window_end: onceflow computes windowed aggregates and window joins; add the GROUP BY, or join it in FROM as it is (FROM TABLE(TUMBLE(…)) x JOIN TABLE(TUMBLE(…)) y ON x.window_start = y.window_start AND x.window_end = y.window_end AND …)")
		return nil
	}
	r = p.project(r, s.Items)
	if r.rank != nil && !p.rankKey(r, s) {
		return nil
	}
	if s.Distinct {
		return p.distinct(r, s)
	}
	return r
}

// upsertSource makes r, the relation of an upsert-kafka table, the
// changelog its records describe: each record is its key's row now (the
// key, the PRIMARY KEY; the value, the whole row) and a tombstone deletes
// it. A changelog-normalize step keyed by the record key keeps each key's
// last row, so the rows after it retract the old ones (docs/design.md,
// "Changelogs"); it comes first, before any select reads a value (a
// tombstone has none).
func (p *planner) upsertSource(t *table, r *rel) bool {
	if len(t.pk) == 0 {
		p.errorf(t.at, "an upsert-kafka table needs a PRIMARY KEY (…) NOT ENFORCED: it is the records' key, by which a record replaces the one before")
		return false
	}
	if f, ok := t.opt("key.format"); ok && f != "json" && !(f == "raw" && len(t.pk) == 1) {
		p.errorf(t.optAt("key.format"), "'key.format' = '%s': the key is read as text (one column, 'raw') or a JSON array ('json')", f)
	}
	if v, ok := t.opt("value.fields-include"); ok && !strings.EqualFold(v, "ALL") {
		p.errorf(t.optAt("value.fields-include"), "'value.fields-include' = '%s': onceflow reads every column from the value ('ALL', as its upsert-kafka sink writes it)", v)
	}
	if t.watermark != nil && !p.versionedScan {
		p.errorf(t.watermark.At, "table %s: event time (WATERMARK) on an upsert-kafka table is supported only for a versioned table read by a temporal join (FOR SYSTEM_TIME AS OF), on its record timestamp (a tombstone has no value to read the time from)", t.name)
		return false
	}
	ttl := p.stateTTL()
	r.steps = append(r.steps, step{at: t.at, write: func(w *yamlWriter, d int) {
		w.linef(t.at, d, "- changelog-normalize:  # table %s: upserts keyed by its primary key", t.name)
		if ttl > 0 {
			w.linef(p.settings["table.exec.state.ttl"].ValueAt, d+2, "ttl: %s", goDuration(ttl))
		}
	}})
	r.updating, r.retracts, r.key = true, true, t.pk
	r.ub = new(bool) // the normalize step retracts anyway
	return true
}

// needRetractions makes the updating result r emit the old version of
// each changed row (update-before), for what reads r to take it out: a
// filter must retract a row that stops passing, an aggregate the old
// row's contribution. Results that cannot (Top-N, a keep-last
// deduplication) are refused at at.
func (p *planner) needRetractions(r *rel, at ast.Pos, what string) bool {
	if r.ub == nil && r.rank != nil && len(r.key) > 0 {
		// A Top-N's rows are upserts keyed by the partition columns and
		// rn: normalized the same way, each rank's old row is retracted.
		r.lastRows, r.rank = true, nil
	}
	if r.ub == nil && r.lastRows {
		// A keep-last deduplication's rows are upserts of its key: a
		// changelog-normalize keyed by it keeps each key's last row and
		// retracts it when the next comes.
		if p.materializeKeyed(r, r.key, at) == nil {
			return false
		}
		ttl := p.stateTTL()
		keyOf := append([]string(nil), r.key...)
		p.stateful(r, at, "changelog-normalize", func(w *yamlWriter, d int) {
			writeKeyOf(w, at, d, keyOf)
			if ttl > 0 {
				w.linef(p.settings["table.exec.state.ttl"].ValueAt, d, "ttl: %s", goDuration(ttl))
			}
		})
		r.ub = new(bool)
	}
	if r.ub == nil {
		p.errorf(at, "%s an updating result of a Top-N needs its rows keyed by the partition columns and the rank: select them as they are in the subquery's outer select", what)
		return false
	}
	*r.ub = true
	r.retracts = true
	return true
}

// project replaces r's columns by the select list.
func (p *planner) project(r *rel, items []*ast.SelectItem) *rel {
	var cols []relCol
	rowtime := ""
	seen := map[string]bool{}
	for i, it := range items {
		if it.Star {
			if it.Qualifier != nil && !r.qualifiedBy(it.Qualifier.Last()) {
				p.errorf(it.At, "%s.*: %s is not a table of this FROM", it.Qualifier.Last(), it.Qualifier.Last())
				continue
			}
			for _, c := range r.cols {
				if it.Qualifier != nil && !r.colQualifiedBy(c, it.Qualifier.Last()) || it.Qualifier == nil && c.merged {
					continue
				}
				c.qual, c.leaf = nil, 0 // the select list's columns are the result's
				cols = append(cols, c)
				if c.name == r.rowtime {
					rowtime = c.name
				}
			}
			continue
		}
		name := itemName(it, i)
		e := p.resolve(r, it.Expr)
		if cr, ok := it.Expr.(*ast.ColumnRef); ok && r.rowtime != "" && len(cr.Name.Parts) >= 1 && cr.Name.Parts[len(cr.Name.Parts)-1].Name == r.rowtime {
			rowtime = name
		}
		cols = append(cols, relCol{name: name, expr: e})
	}
	// Two columns of one name (a.id, b.id of a join) are renamed as
	// Flink does: id, id0, id1, …
	for _, c := range cols {
		seen[strings.ToLower(c.name)] = true
	}
	named := map[string]bool{}
	for i, c := range cols {
		if named[strings.ToLower(c.name)] {
			for n := 0; ; n++ {
				if alt := fmt.Sprintf("%s%d", c.name, n); !seen[strings.ToLower(alt)] {
					seen[strings.ToLower(alt)] = true
					if c.name == rowtime {
						rowtime = "" // the first of the name stays the time attribute
					}
					cols[i].name = alt
					break
				}
			}
		}
		named[strings.ToLower(cols[i].name)] = true
	}
	r.cols, r.rowtime = cols, rowtime
	return r
}

func (r *rel) qualifiedBy(q string) bool {
	for _, c := range r.cols {
		if r.colQualifiedBy(c, q) {
			return true
		}
	}
	return hasFold(r.quals, q)
}

// colQualifiedBy tells whether q qualifies the column c of r.
func (r *rel) colQualifiedBy(c relCol, q string) bool {
	if c.qual != nil {
		return hasFold(c.qual, q)
	}
	return hasFold(r.quals, q)
}

func hasFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// lookup finds the column a reference names: parts[0] qualifies it when
// it names a table of r (then parts[1] is the column), else parts[0] is
// the column; the parts after the column are field accesses (rest). msg
// says why nothing is found, or that an unqualified name is a column of
// several tables of a join (naming them).
func (r *rel) lookup(parts []ast.Ident) (c relCol, rest []ast.Ident, msg string) {
	cols, qualified := r.cols, false
	if len(parts) > 1 {
		var of []relCol
		for _, c := range r.cols {
			if r.colQualifiedBy(c, parts[0].Name) {
				of = append(of, c)
			}
		}
		if len(of) > 0 || hasFold(r.quals, parts[0].Name) {
			cols, parts = of, parts[1:]
			qualified = true
		}
	}
	var match []relCol
	for _, c := range cols {
		if c.name == parts[0].Name && (qualified || !c.merged) {
			match = append(match, c)
		}
	}
	if len(match) == 0 {
		for _, c := range cols {
			if strings.EqualFold(c.name, parts[0].Name) && (qualified || !c.merged) {
				match = append(match, c)
			}
		}
	}
	switch {
	case len(match) == 0:
		names := r.colNames()
		return relCol{}, nil, fmt.Sprintf("column %s is not a column of %s%s; it has %s", parts[0].Name, strings.Join(r.qualNames(), " / "), didYouMean(parts[0].Name, names), strings.Join(r.qualifiedColNames(), ", "))
	case len(match) > 1:
		var cands []string
		for _, c := range match {
			if n := r.qualifiedName(c); !contains(cands, n) {
				cands = append(cands, n)
			}
		}
		if len(cands) == 1 { // one table twice in FROM
			return relCol{}, nil, fmt.Sprintf("column %s is ambiguous: %s names two tables of this FROM; give each an alias (FROM t AS t1 JOIN t AS t2 …) and qualify the column with one", cands[0], cands[0][:strings.LastIndex(cands[0], ".")])
		}
		return relCol{}, nil, fmt.Sprintf("column %s is ambiguous: it is %s; qualify it with its table's name or alias", parts[0].Name, strings.Join(cands, " and "))
	}
	return match[0], parts[1:], ""
}

// qualNames are the names qualifying r's columns, each once.
func (r *rel) qualNames() []string {
	out := append([]string(nil), r.quals...)
	for _, c := range r.cols {
		for _, q := range c.qual {
			if !hasFold(out, q) {
				out = append(out, q)
			}
		}
	}
	return out
}

// qualifiedName is c's name, qualified by its table's when r is a join
// (its columns have qualifiers of their own).
func (r *rel) qualifiedName(c relCol) string {
	if len(c.qual) == 0 {
		return c.name
	}
	return c.qual[len(c.qual)-1] + "." + c.name
}

func (r *rel) qualifiedColNames() []string {
	var out []string
	for _, c := range r.cols {
		out = append(out, r.qualifiedName(c))
	}
	return out
}

// itemName is a select item's column name: its alias, the name of the
// column it is, or Flink's EXPR$i.
func itemName(it *ast.SelectItem, i int) string {
	if it.Alias != nil {
		return it.Alias.Name
	}
	if c, ok := it.Expr.(*ast.ColumnRef); ok {
		return c.Name.Last()
	}
	return fmt.Sprintf("EXPR$%d", i)
}

var aggregateFuncs = map[string]bool{"COUNT": true, "SUM": true, "MIN": true, "MAX": true, "AVG": true, "FIRST_VALUE": true, "LAST_VALUE": true}

func hasAggregate(e ast.Expr) bool {
	found := false
	visit(e, func(x ast.Expr) bool {
		if c, ok := x.(*ast.Call); ok && c.Over == nil && aggregateFuncs[strings.ToUpper(c.Name.Last())] {
			found = true
			return false
		}
		return !found
	})
	return found
}

// interval reads INTERVAL 'n' UNIT as a duration.
func (p *planner) interval(e ast.Expr, what string) (time.Duration, bool) {
	iv, ok := e.(*ast.Interval)
	if !ok {
		p.errorf(e.Position(), "%s must be an INTERVAL such as INTERVAL '10' SECOND, not %s", what, e.String())
		return 0, false
	}
	d, err := intervalDuration(iv)
	if err != nil {
		p.errorf(iv.At, "%s: %v", what, err)
		return 0, false
	}
	if d <= 0 {
		p.errorf(iv.At, "%s must be longer than zero", what)
		return 0, false
	}
	return d, true
}

func intervalDuration(iv *ast.Interval) (time.Duration, error) {
	if iv.ToUnit != "" {
		return 0, fmt.Errorf("INTERVAL '%s' %s TO %s: write the interval in one unit, such as INTERVAL '90' SECOND", iv.Value, iv.Unit, iv.ToUnit)
	}
	units := map[string]time.Duration{"MILLISECOND": time.Millisecond, "SECOND": time.Second, "MINUTE": time.Minute, "HOUR": time.Hour, "DAY": 24 * time.Hour}
	u, ok := units[iv.Unit]
	if !ok {
		return 0, fmt.Errorf("INTERVAL in %s: a window or watermark takes MILLISECOND, SECOND, MINUTE, HOUR or DAY", iv.Unit)
	}
	var n float64
	if _, err := fmt.Sscanf(strings.TrimSpace(iv.Value), "%g", &n); err != nil {
		return 0, fmt.Errorf("INTERVAL '%s' %s: '%s' is not a number", iv.Value, iv.Unit, iv.Value)
	}
	return time.Duration(n * float64(u)), nil
}

func didYouMean(name string, names []string) string { return suggest.Suggest(name, names) }
