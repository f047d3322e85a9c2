package planner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Lookup joins (docs/design.md, "SQL"): `FROM a [LEFT] JOIN t FOR
// SYSTEM_TIME AS OF a.proc_time AS b ON a.k = b.id [AND …]`, t a
// database table (jdbc, postgres, mysql) or a redis table and proc_time
// a PROCTIME() column of a, compile to a's select (its columns and the
// key expressions, cast to t's key columns' types) and the lookup step,
// whose records {"left": {…}, "right": {…} | null} the next select reads
// as two typed ROW columns, as a regular join's. The table is read as it
// is when the record passes: no state is kept, no ttl needed.

// lookupOptions are the options of a table read by a lookup join,
// Flink's names.
var lookupOptions = []string{
	"lookup.cache", "lookup.partial-cache.max-rows", "lookup.partial-cache.expire-after-write",
	"lookup.partial-cache.expire-after-access", "lookup.partial-cache.cache-missing-key", "lookup.max-retries",
}

// redisOptions are a redis table's: it is only read by lookup joins.
var redisOptions = append([]string{"connector", "url", "key-prefix"}, lookupOptions...)

// lookupSpec is what the lookup step of a join writes.
type lookupSpec struct {
	at        ast.Pos
	kind      string // inner or left
	connector string
	dsn       string
	table     string
	keys      []string // the table's key columns
	keyCols   []string // the probe select's columns holding the keys
	match     string   // the probe select's column saying the row may match ("": all)
	columns   []string
	opts      []string // the step's cache and retry fields, "name: value"
	tableAt   ast.Pos
}

// lookupJoin plans `l [LEFT] JOIN t FOR SYSTEM_TIME AS OF … ON …` with
// the select's WHERE (nil: none).
func (p *planner) lookupJoin(j *ast.Join, rt *ast.TableRef, where ast.Expr) *rel {
	at := rt.At
	kind := "inner"
	switch {
	case j.Kind == "LEFT":
		kind = "left"
	case j.Kind == "RIGHT" || j.Kind == "FULL":
		p.errorf(j.At, "a %s lookup join of %s is not supported: a lookup table is read by key when a row of the other side comes, so none of its own rows can be preserved; write the stream on the left, with JOIN or LEFT JOIN", j.Kind, tableText(rt))
		return nil
	case j.Kind == "CROSS" || j.Comma:
		p.errorf(at, "the lookup join of %s needs ON with an equality of its columns to the other side's (JOIN %s FOR SYSTEM_TIME AS OF … ON a.k = %s.id)", tableText(rt), rt.Name.Last(), tableText(rt))
		return nil
	case len(j.Using) > 0:
		p.errorf(at, "a lookup join with USING is not supported: write ON a.k = %s.k", tableText(rt))
		return nil
	}
	if _, isView := p.views[strings.ToLower(rt.Name.Last())]; isView {
		p.errorf(rt.Name.At, "FOR SYSTEM_TIME AS OF reads a table in a lookup join, and %s is a view: join the database table itself", rt.Name.Last())
		return nil
	}
	t := p.tableNamed(rt.Name)
	if t == nil {
		return nil
	}
	l := p.from(j.Left)
	if l == nil {
		return nil
	}
	if !p.checkJoinInput(l, j.Left.Position()) {
		return nil
	}
	// AS OF the probe side's processing time.
	st, isCol := unparen(rt.SystemTime).(*ast.ColumnRef)
	var stCol relCol
	if isCol {
		var msg string
		stCol, _, msg = l.lookup(st.Name.Parts)
		if msg != "" {
			p.errorf(st.Name.At, "FOR SYSTEM_TIME AS OF: %s", msg)
			return nil
		}
	}
	if !isCol || !isProctimeExpr(stCol.expr) {
		p.errorf(rt.SystemTime.Position(), "FOR SYSTEM_TIME AS OF %s: a lookup join reads the table as of the processing time, a column of %s declared AS PROCTIME() (proc_time AS PROCTIME() in its CREATE TABLE): %s is a database table, which keeps no versions to read as of an event time; an event-time temporal join reads a versioned Kafka table (upsert-kafka, or debezium-json, with a PRIMARY KEY and a WATERMARK)", rt.SystemTime, tableText(j.Left), t.name)
		return nil
	}
	if !connectors[t.connector].lookup {
		p.errorf(rt.Name.At, "table %s uses the %s connector, which a lookup join cannot read: it reads database tables ('connector' = 'jdbc', 'postgres', 'mysql') and 'redis'; a temporal join against a versioned Kafka table is not supported yet", t.name, t.connector)
		return nil
	}
	spec := p.lookupTable(t, at)
	if spec == nil {
		return nil
	}
	spec.at, spec.kind = at, kind
	// The looked-up table's columns, as a relation of its own.
	alias := t.name
	if rt.Alias != nil {
		alias = rt.Alias.Name
	}
	dim := &rel{quals: []string{t.name}}
	if alias != t.name {
		dim.quals = append(dim.quals, alias)
	}
	for _, c := range t.physical(true) {
		dim.in = append(dim.in, schemaCol{name: c.Name.Name, typ: c.Type})
		dim.cols = append(dim.cols, relCol{name: c.Name.Name, expr: ref(c.Name.Name)})
		spec.columns = append(spec.columns, c.Name.Name)
	}
	jp := &joinPlan{p: p, all: &rel{}, leaves: []*joinLeaf{{te: j.Left, r: l}, {te: rt, r: dim}}}
	for i, side := range []*rel{l, dim} {
		for _, c := range side.cols {
			q := c.qual
			if q == nil {
				q = side.quals
			}
			jp.all.cols = append(jp.all.cols, relCol{name: c.name, expr: c.expr, qual: q, leaf: i})
		}
	}
	// The conditions: ON's decide what matches, WHERE's what stays.
	var lkeys []ast.Expr
	var kcols []string
	var guard, post ast.Expr
	var conjuncts func(e ast.Expr, on bool) bool
	conjuncts = func(e ast.Expr, on bool) bool {
		switch x := e.(type) {
		case *ast.Binary:
			if strings.EqualFold(x.Op, "AND") {
				return conjuncts(x.X, on) && conjuncts(x.Y, on)
			}
		case *ast.Paren:
			return conjuncts(x.X, on)
		}
		set, ok := jp.leafSet(e)
		if !ok {
			return false
		}
		if on {
			if b, isEq := e.(*ast.Binary); isEq && b.Op == "=" {
				for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
					xs, _ := jp.leafSet(pair[0])
					ys, _ := jp.leafSet(pair[1])
					dc, isDimCol := unparen(pair[1]).(*ast.ColumnRef)
					if xs == 1 && ys == 2 && isDimCol {
						c, _, _ := dim.lookup(dc.Name.Parts)
						lkeys, kcols = append(lkeys, pair[0]), append(kcols, c.name)
						return true
					}
				}
			}
		}
		switch {
		case set == 1 && (!on || kind == "inner"):
			l.where = and(l.where, p.resolve(l, e)) // before the lookup
		case set == 1:
			guard = and(guard, e) // a LEFT JOIN's ON of the probe side: no match, padded
		case on && kind == "left":
			p.errorf(e.Position(), "%s: a condition of the looked-up table in the ON of a LEFT lookup join decides which rows match (a row meeting none is padded with NULLs), which the lookup step cannot test yet; move it to the WHERE if it may drop the padded rows, or write an inner JOIN", e)
			return false
		default:
			post = and(post, e) // of the joined rows
		}
		return true
	}
	if j.On != nil && !conjuncts(j.On, true) {
		return nil
	}
	if where != nil {
		if hasAggregate(where) {
			p.errorf(where.Position(), "an aggregate function in WHERE: move the condition to HAVING")
			return nil
		}
		if !conjuncts(where, false) {
			return nil
		}
	}
	if len(lkeys) == 0 {
		p.errorf(at, "the lookup join of %s has no equality of its columns to the other side's (ON %s.k = %s.id): a lookup reads the rows of a key; add one", tableText(rt), tableText(j.Left), alias)
		return nil
	}
	if t.connector == "redis" {
		if len(t.pk) != 1 || len(kcols) != 1 || !strings.EqualFold(kcols[0], t.pk[0]) {
			p.errorf(at, "a redis table is read by its key, the one column of its PRIMARY KEY: join ON an equality of %s's primary key column alone (declare PRIMARY KEY (id) NOT ENFORCED)", t.name)
			return nil
		}
	}
	// Each key of the type of the table's column: the server casts the
	// key's text to it.
	src := append([]ast.Expr(nil), lkeys...)
	for i := range lkeys {
		lkeys[i] = p.resolve(l, lkeys[i])
	}
	if len(p.errs) > 0 {
		return nil
	}
	lt := p.exprTypes(l, lkeys, at)
	if lt == nil {
		return nil
	}
	for i, k := range kcols {
		dt := t.col(k).Type
		to, ok := joinKeyType(lt[i], dt)
		if !ok {
			p.errorf(src[i].Position(), "the lookup join compares %s (%s) with %s.%s (%s): the key must be of the column's type; CAST it to %s", src[i], lt[i], alias, k, dt, dt)
			return nil
		}
		if to != nil || lt[i].String() != dt.String() {
			lkeys[i] = &ast.Cast{At: lkeys[i].Position(), X: lkeys[i], To: &ast.Type{Name: dt.Name, Params: dt.Params}}
		}
		spec.keys = append(spec.keys, t.col(k).Name.Name)
	}
	var rguard ast.Expr
	if guard != nil {
		rguard = p.resolve(l, guard)
	}
	out := p.lookupSide(l, lkeys, rguard, spec, at)
	if out == nil {
		return nil
	}
	// The step, and the relation of its output.
	l.steps = append(l.steps, step{at: at, write: spec.write})
	left := &ast.Type{Name: "ROW"}
	for _, c := range l.in {
		left.Fields = append(left.Fields, &ast.RowField{Name: ast.Ident{Name: c.name, Quoted: true}, Type: c.typ})
	}
	right := &ast.Type{Name: "ROW"}
	for _, c := range dim.in {
		right.Fields = append(right.Fields, &ast.RowField{Name: ast.Ident{Name: c.name, Quoted: true}, Type: c.typ})
	}
	r := l
	r.in = []schemaCol{{name: "left", typ: left}, {name: "right", typ: right}}
	r.cols = nil
	for _, c := range out {
		c.expr = ref("left", c.expr.(*ast.ColumnRef).Name.Parts[0].Name)
		r.cols = append(r.cols, c)
	}
	for _, c := range dim.cols {
		r.cols = append(r.cols, relCol{name: c.name, expr: ref("right", c.name), qual: dim.quals})
	}
	for _, q := range dim.quals {
		if !hasFold(r.quals, q) {
			r.quals = append(r.quals, q)
		}
	}
	r.rowtime, r.win, r.join = "", nil, true
	if kind == "left" {
		r.padded = [2]bool{false, true}
	}
	if post != nil {
		r.where = p.resolve(r, post)
	}
	return r
}

// isLookupTable tells whether rt names a table a lookup join reads (a
// database or redis table, not a view): FOR SYSTEM_TIME AS OF it is a
// lookup join, of any other table a temporal join (temporal.go).
func (p *planner) isLookupTable(rt *ast.TableRef) bool {
	name := strings.ToLower(rt.Name.Last())
	if p.views[name] != nil {
		return false
	}
	t := p.tables[name]
	return t != nil && connectors[t.connector].lookup
}

// lookupLast refuses a lookup table read FOR SYSTEM_TIME AS OF inside
// te, a join's left side (a lookup join is the last join of a chain);
// false after the error.
func (p *planner) lookupLast(te ast.TableExpr) bool {
	j, ok := te.(*ast.Join)
	if !ok {
		return true
	}
	for _, side := range []ast.TableExpr{j.Left, j.Right} {
		if rt, isRef := side.(*ast.TableRef); isRef && rt.SystemTime != nil && p.isLookupTable(rt) {
			p.errorf(rt.At, "%s FOR SYSTEM_TIME AS OF %s: a lookup join is the last join of a chain: join the lookup table last, or join the others in a subquery, such as FROM (SELECT … FROM a JOIN b ON …) ab JOIN %s FOR SYSTEM_TIME AS OF ab.proc_time AS d ON …", tableText(rt), rt.SystemTime, rt.Name.Last())
			return false
		}
		if !p.lookupLast(side) {
			return false
		}
	}
	return true
}

// isProctimeExpr tells whether e is PROCTIME().
func isProctimeExpr(e ast.Expr) bool {
	c, ok := unparen(e).(*ast.Call)
	return ok && strings.EqualFold(c.Name.Last(), "PROCTIME") && len(c.Args) == 0
}

// lookupSide writes the probe side's select: its columns, and the keys
// (with a LEFT JOIN's guard, the column saying whether the row may
// match); it returns the columns as the join's reader sees them.
func (p *planner) lookupSide(l *rel, keys []ast.Expr, guard ast.Expr, spec *lookupSpec, at ast.Pos) []relCol {
	var out []relCol
	taken := map[string]bool{}
	unique := func(n string) string {
		u := n
		for i := 2; taken[strings.ToLower(u)]; i++ {
			u = fmt.Sprintf("%s_%d", n, i)
		}
		taken[strings.ToLower(u)] = true
		return u
	}
	var cols []relCol
	for _, c := range l.cols {
		if m, ok := c.expr.(*ast.ColumnRef); ok && strings.HasPrefix(m.Name.Parts[0].Name, "\x00") {
			continue // a window column: refused by checkJoinInput
		}
		n := unique(c.name)
		cols = append(cols, relCol{name: n, expr: c.expr})
		q := c.qual
		if q == nil {
			q = append([]string{}, l.quals...)
		}
		out = append(out, relCol{name: c.name, expr: ref(n), qual: q})
	}
	for i, k := range keys {
		n := unique(fmt.Sprintf("__lk%d", i))
		cols = append(cols, relCol{name: n, expr: k})
		spec.keyCols = append(spec.keyCols, n)
	}
	if guard != nil {
		n := unique("__lm")
		cols = append(cols, relCol{name: n, expr: matchColumn(guard)})
		spec.match = n
	}
	l.cols = cols
	if p.materialize(l, nil, at) == nil {
		return nil
	}
	return out
}

// lookupTable reads t's connection and lookup options.
func (p *planner) lookupTable(t *table, at ast.Pos) *lookupSpec {
	s := &lookupSpec{connector: t.connector, tableAt: t.at}
	switch t.connector {
	case "jdbc":
		u, _ := t.opt("url")
		user, _ := t.opt("username")
		pass, _ := t.opt("password")
		if u == "" {
			p.errorf(t.at, "table %s has no 'url': add 'url' = 'jdbc:postgresql://localhost:5432/DATABASE'", t.name)
			return nil
		}
		var err error
		if s.connector, s.dsn, err = jdbcDSN(u, user, pass); err != nil {
			p.errorf(t.optAt("url"), "table %s: %v", t.name, err)
			return nil
		}
	case "postgres", "mysql":
		var ok bool
		if s.dsn, ok = t.opt("dsn"); !ok {
			p.errorf(t.at, "table %s has no 'dsn': add 'dsn' = '${DATABASE_URL}' (read from the environment)", t.name)
			return nil
		}
	case "redis":
		var ok bool
		if s.dsn, ok = t.opt("url"); !ok {
			p.errorf(t.at, "table %s has no 'url': add 'url' = 'redis://localhost:6379/0'", t.name)
			return nil
		}
	}
	if t.connector == "redis" {
		s.table = t.name + ":"
		if v, ok := t.opt("key-prefix"); ok {
			s.table = v
		}
	} else {
		s.table = t.name
		for _, k := range []string{"table-name", "table"} {
			if v, ok := t.opt(k); ok {
				s.table = v
				break
			}
		}
	}
	partial := false
	if v, ok := t.opt("lookup.cache"); ok {
		switch strings.ToUpper(v) {
		case "PARTIAL":
			partial = true
			s.opts = append(s.opts, "cache: partial")
		case "NONE":
		case "FULL":
			p.errorf(t.optAt("lookup.cache"), "'lookup.cache' = 'FULL' (the whole table loaded and reloaded) is not supported yet: use 'PARTIAL' (rows cached as they are looked up) or 'NONE'")
			return nil
		default:
			p.errorf(t.optAt("lookup.cache"), "'lookup.cache' is 'PARTIAL' or 'NONE', not %q", v)
			return nil
		}
	}
	for _, o := range []struct{ key, field, kind string }{
		{"lookup.partial-cache.max-rows", "cache-max-rows", "int"},
		{"lookup.partial-cache.expire-after-write", "cache-expire-after-write", "duration"},
		{"lookup.partial-cache.expire-after-access", "cache-expire-after-access", "duration"},
		{"lookup.partial-cache.cache-missing-key", "cache-missing-key", "bool"},
		{"lookup.max-retries", "max-retries", "int"},
	} {
		v, ok := t.opt(o.key)
		if !ok {
			continue
		}
		if strings.HasPrefix(o.key, "lookup.partial-cache.") && !partial {
			p.errorf(t.optAt(o.key), "'%s' sets the partial cache, which is on with 'lookup.cache' = 'PARTIAL' only: add it, or drop this option", o.key)
			return nil
		}
		switch o.kind {
		case "int":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 || n == 0 && o.field == "cache-max-rows" {
				p.errorf(t.optAt(o.key), "'%s' is a whole number%s, not %q", o.key, map[bool]string{true: " above 0", false: ""}[o.field == "cache-max-rows"], v)
				return nil
			}
			s.opts = append(s.opts, fmt.Sprintf("%s: %d", o.field, n))
		case "duration":
			d, err := flinkDuration(v)
			if err != nil || d <= 0 {
				p.errorf(t.optAt(o.key), "'%s': %s", o.key, map[bool]string{true: "must be longer than zero", false: fmt.Sprint(err)}[err == nil])
				return nil
			}
			s.opts = append(s.opts, fmt.Sprintf("%s: %s", o.field, goDuration(d)))
		case "bool":
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				p.errorf(t.optAt(o.key), "'%s' is 'true' or 'false', not %q", o.key, v)
				return nil
			}
			s.opts = append(s.opts, fmt.Sprintf("%s: %t", o.field, b))
		}
	}
	p.lookups = append(p.lookups, t)
	return s
}

// write writes the lookup step.
func (s *lookupSpec) write(w *yamlWriter, d int) {
	w.linef(s.at, d, "- lookup:")
	w.linef(s.tableAt, d+2, "connector: %s", s.connector)
	w.linef(s.tableAt, d+2, "dsn: %s", q(s.dsn))
	w.linef(s.tableAt, d+2, "table: %s", q(s.table))
	w.linef(s.at, d+2, "keys:")
	for i, k := range s.keys {
		w.linef(s.at, d+3, "%s: %s", q(k), q(valuePath(s.keyCols[i])))
	}
	w.linef(s.tableAt, d+2, "columns: %s", qlist(s.columns))
	if s.kind != "inner" {
		w.linef(s.at, d+2, "kind: %s", s.kind)
	}
	if s.match != "" {
		w.linef(s.at, d+2, "match: %s", q(valuePath(s.match)))
	}
	for _, o := range s.opts {
		w.linef(s.tableAt, d+2, "%s", o)
	}
}

// checkLookupOptions reports the options of the tables lookup joins read
// that no part of the plan read.
func (p *planner) checkLookupOptions() {
	seen := map[*table]bool{}
	for _, t := range p.lookups {
		if seen[t] {
			continue
		}
		seen[t] = true
		known := redisOptions
		if t.connector != "redis" {
			known = append(append([]string(nil), sinkOptions[t.connector]...), lookupOptions...)
			for _, k := range sinkOptions[t.connector] {
				t.used[k] = true // a sink's, checked when it is one
			}
		}
		p.checkOptions(t, known)
	}
}
