package planner

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Regular inner joins (docs/design.md, "SQL"): `FROM a JOIN b ON a.k =
// b.k [AND …]` and `FROM a, b WHERE a.k = b.k` compile to the named form:
// each side a stream whose select computes the side's columns, keyed by
// the join key (rows with a NULL key dropped: NULL equals nothing), and a
// stream starting with the `join` step over the two, whose records are
// {"left": {…}, "right": {…}}; the relation after it reads
// `left`.col and `right`.col as typed ROW fields.
//
// Every condition of an inner join's ON and of the WHERE is a conjunct
// of one filter, so they are pooled and each placed where it is cheapest:
// a conjunct of one table filters that table before the join (fewer rows
// kept), an equality of a column expression of each side is a key, and
// any other conjunct of both sides filters the joined rows.

// joinLeaf is a table (or view, subquery) of a join's FROM.
type joinLeaf struct {
	te ast.TableExpr
	r  *rel
}

// joinCond is a conjunct of the ON conditions and the WHERE, and the
// leaves (as a bit set) its columns come from.
type joinCond struct {
	e      ast.Expr
	leaves uint64
	used   bool
	// on: the conjunct is of an outer join's ON (not pooled with the
	// WHERE: see outerPlace).
	on bool
}

type joinPlan struct {
	p      *planner
	leaves []*joinLeaf
	all    *rel // every leaf's columns, each marked with its leaf
	conds  []*joinCond
	// ttl is each leaf's STATE_TTL hint (0: none) and hintAt where.
	ttl    []time.Duration
	hintAt []ast.Pos
	// using are the columns of the JOIN … USING, innermost join first
	// (using.go).
	using []usingCol
	// win is set on a window join: both leaves' window (joinWindows).
	win *windowSpec
	// outer is the outer join's kind (LEFT, RIGHT, FULL), "" for an
	// inner join; guards are, per leaf of a preserved side, the ON
	// conditions of that side alone (resolved over it): a row that fails
	// them matches nothing and is emitted padded (outerjoin.go).
	outer  string
	guards [2]ast.Expr
	// post are the WHERE conditions of a table an outer join pads with
	// NULLs: they filter the joined rows.
	post []ast.Expr
	// temporal is set on a temporal join: its versioned table (temporal.go).
	temporal *temporalJoin
}

// joinFrom plans a FROM that is a join, with the select's WHERE (nil:
// none) and hints; the WHERE is consumed.
func (p *planner) joinFrom(j *ast.Join, where ast.Expr, hints []*ast.Hint) *rel {
	if rt, ok := j.Right.(*ast.TableRef); ok && rt.SystemTime != nil && p.isLookupTable(rt) {
		return p.lookupJoin(j, rt, where) // lookup.go; a versioned table's: temporal.go
	}
	if !p.lookupLast(j.Left) {
		return nil
	}
	if !p.checkJoinKinds(j, true) {
		return nil
	}
	jp := &joinPlan{p: p, all: &rel{}}
	if isOuter(j.Kind) {
		jp.outer = j.Kind
	}
	// The leaves: the tables of a chain of inner joins; an outer join in
	// a chain is a leaf of its own, planned first (its result is a
	// changelog the next join takes), and so are the two sides of an
	// outer join (docs/design.md, "SQL").
	var collect func(te ast.TableExpr)
	collect = func(te ast.TableExpr) {
		if jn, ok := te.(*ast.Join); ok && (te == j || jp.outer == "" && !isOuter(jn.Kind)) {
			collect(jn.Left)
			collect(jn.Right)
			return
		}
		jp.leaves = append(jp.leaves, &joinLeaf{te: te})
	}
	collect(j)
	isLeaf := func(te ast.TableExpr) bool {
		return slices.ContainsFunc(jp.leaves, func(l *joinLeaf) bool { return l.te == te })
	}
	if len(jp.leaves) > 64 {
		p.errorf(j.At, "a join of %d tables: at most 64", len(jp.leaves))
		return nil
	}
	if !jp.findTemporal(j) {
		return nil
	}
	for i, l := range jp.leaves {
		versioned := jp.temporal != nil && i == jp.temporal.leaf
		if versioned {
			p.versionedScan = true
			l.r = p.from(jp.temporal.plain)
			p.versionedScan = false
		} else if jn, ok := l.te.(*ast.Join); ok {
			l.r = p.joinFrom(jn, nil, hintsOf(hints, jn))
		} else {
			l.r = p.from(l.te)
		}
		if l.r == nil {
			return nil
		}
		if versioned && !jp.checkVersioned(l.r) || !versioned && !p.checkJoinInput(l.r, l.te.Position()) {
			return nil
		}
		for _, c := range l.r.cols {
			q := c.qual
			if q == nil {
				q = l.r.quals
			}
			if q == nil {
				q = []string{}
			}
			jp.all.cols = append(jp.all.cols, relCol{name: c.name, expr: c.expr, qual: q, leaf: i})
		}
	}
	if !jp.readHints(hints) {
		return nil
	}
	if jp.temporal != nil && !jp.checkAsOf() {
		return nil
	}
	// The pool of conjuncts.
	inOn := false
	var split func(e ast.Expr)
	split = func(e ast.Expr) {
		e = jp.qualifyUsing(e)
		switch x := e.(type) {
		case *ast.Binary:
			if strings.EqualFold(x.Op, "AND") {
				split(x.X)
				split(x.Y)
				return
			}
		case *ast.Paren:
			split(x.X)
			return
		}
		set, ok := jp.leafSet(e)
		if !ok {
			return
		}
		jp.conds = append(jp.conds, &joinCond{e: e, leaves: set, on: inOn && jp.outer != ""})
	}
	var ons func(te ast.TableExpr)
	ons = func(te ast.TableExpr) {
		if jn, ok := te.(*ast.Join); ok && !isLeaf(te) {
			ons(jn.Left)
			ons(jn.Right)
			inOn = true
			if jn.On != nil {
				split(jn.On)
			} else if len(jn.Using) > 0 {
				if on := jp.usingOn(jn); on != nil {
					split(on)
				}
			}
			inOn = false
		}
	}
	ons(j)
	if where != nil {
		if hasAggregate(where) {
			p.errorf(where.Position(), "an aggregate function in WHERE: move the condition to HAVING")
			return nil
		}
		split(where)
	}
	if len(p.errs) > 0 {
		return nil
	}
	if !jp.joinWindows(j) {
		return nil
	}
	if jp.outer != "" && !jp.outerPlace(j) {
		return nil
	}
	// A conjunct of one table filters it before the join.
	for _, c := range jp.conds {
		if c.used {
			continue
		}
		for i, l := range jp.leaves {
			if c.leaves == 1<<i {
				c.used = true
				l.r.where = and(l.r.where, p.resolve(l.r, c.e))
			}
		}
	}
	r, _ := jp.build(j)
	if r == nil {
		return nil
	}
	if jp.outer != "" && jp.temporal != nil {
		// A temporal join only appends: a padded row is final.
		r.padded = [2]bool{false, true}
		for _, e := range jp.post {
			r.where = and(r.where, p.resolve(r, e))
		}
	} else if jp.outer != "" {
		// A changelog: a padded row is retracted when its partner comes
		// (docs/design.md, "Changelogs").
		r.updating, r.retracts, r.ub, r.key = true, true, new(bool), nil
		*r.ub = true
		r.rank, r.lastRows, r.keyless = nil, false, nil
		r.outer = fmt.Sprintf("the %s JOIN at %d:%d retracts a row padded with NULLs when its first partner comes", jp.outer, j.Right.Position().Line, j.Right.Position().Col)
		keep := preservedSides(jp.outer)
		r.padded = [2]bool{keep[1], keep[0]} // a side is padded when the other is preserved
		for i, side := range []string{"left", "right"} {
			if r.padded[i] {
				if r.nullable == nil {
					r.nullable = map[string]bool{}
				}
				r.nullable[side+".*"] = true
			}
		}
		for _, e := range jp.post {
			r.where = and(r.where, p.resolve(r, e))
		}
	}
	// What is left refers to no table (a constant condition).
	for _, c := range jp.conds {
		if !c.used {
			c.used = true
			r.where = and(r.where, p.resolve(r, c.e))
		}
	}
	jp.mergeUsing(r)
	return r
}

func and(x, y ast.Expr) ast.Expr {
	if x == nil {
		return y
	}
	return &ast.Binary{At: y.Position(), Op: "AND", X: &ast.Paren{X: x}, Y: &ast.Paren{X: y}}
}

// checkJoinKinds refuses what is not an inner join with ON (or a comma
// join, whose condition is in the WHERE), or an outer join of two
// tables (top: j is the FROM's whole join).
func (p *planner) checkJoinKinds(j *ast.Join, top bool) bool {
	ok := true
	for _, side := range []ast.TableExpr{j.Left, j.Right} {
		if jn, isJoin := side.(*ast.Join); isJoin && !p.checkJoinKinds(jn, false) {
			ok = false
		}
	}
	if !ok {
		return false
	}
	at := j.Right.Position()
	what := fmt.Sprintf("%s JOIN %s", j.Kind, tableText(j.Right))
	switch {
	case isOuter(j.Kind):
		return p.checkOuterJoin(j, what)
	case j.Kind == "CROSS" && !j.Comma:
		p.errorf(at, "%s pairs every row with every row of the other table, keeping both for ever: join ON an equality of their columns instead", what)
		return false
	}
	return true
}

// tableText names a FROM item in a message: its alias, else its name.
func tableText(te ast.TableExpr) string {
	switch t := te.(type) {
	case *ast.TableRef:
		if t.Alias != nil {
			return t.Alias.Name
		}
		return t.Name.Last()
	case *ast.SubqueryRef:
		if t.Alias != nil {
			return t.Alias.Name
		}
		return "(subquery)"
	case *ast.TableFunc:
		if t.Alias != nil {
			return t.Alias.Name
		}
		return t.Name.Name + "(…)"
	case *ast.Join:
		return "(" + tableText(t.Left) + " JOIN " + tableText(t.Right) + ")"
	}
	return "?"
}

// checkJoinInput refuses an input the join step cannot take.
func (p *planner) checkJoinInput(r *rel, at ast.Pos) bool {
	switch {
	case r.updating:
		// The join takes a changelog (its step's retractions): a changed
		// row must retract the pairs its old version made, so the input
		// must emit its old rows (docs/design.md, "Changelogs").
		return p.needRetractions(r, at, "joining")
	case r.win != nil && r.win.kind == "SESSION":
		p.errorf(r.win.at, "a window join of SESSION windows is not supported: each side's sessions are cut from its own rows, so the two sides' windows need not share a start and an end, and a session's bounds are known only once its gap has passed; join the tables with an interval join (a.ts BETWEEN b.ts - INTERVAL … AND b.ts + INTERVAL …), or join TUMBLE, HOP or CUMULATE windows")
		return false
	case r.win != nil && r.win.offset != 0:
		p.errorf(r.win.at, "a window join of %s windows with an OFFSET is not supported yet: the window-join step's windows start at multiples of the size (HOP: the slide); leave the OFFSET out", r.win.kind)
		return false
	case r.win != nil && r.win.proc:
		p.errorf(r.win.at, "a window join over a PROCTIME() column is not supported: window joins pair rows by event time; window by the table's WATERMARK column")
		return false
	}
	return true
}

// readHints reads STATE_TTL('t' = '1h', …): the ttl of each table named.
func (jp *joinPlan) readHints(hints []*ast.Hint) bool {
	p := jp.p
	jp.ttl = make([]time.Duration, len(jp.leaves))
	jp.hintAt = make([]ast.Pos, len(jp.leaves))
	ok := true
	for _, h := range hints {
		if !strings.EqualFold(h.Name, "STATE_TTL") {
			p.notes = append(p.notes, fmt.Sprintf("the hint %s means nothing to onceflow's planner and is ignored", h.Name))
			continue
		}
		if len(h.Args) > 0 || len(h.Options) == 0 {
			p.errorf(h.At, "STATE_TTL takes each table's ttl: STATE_TTL('a' = '1h', 'b' = '1h')")
			ok = false
			continue
		}
		for _, o := range h.Options {
			var names []string
			found := false
			for i, l := range jp.leaves {
				names = append(names, l.r.quals...)
				if hasFold(l.r.quals, o.Key) {
					found = true
					d, err := flinkDuration(o.Value)
					switch {
					case err != nil:
						p.errorf(o.ValueAt, "STATE_TTL of %s: %v", o.Key, err)
						ok = false
					case d <= 0:
						p.errorf(o.ValueAt, "STATE_TTL of %s must be longer than zero", o.Key)
						ok = false
					default:
						jp.ttl[i], jp.hintAt[i] = d, o.ValueAt
					}
				}
			}
			if !found {
				p.errorf(o.At, "STATE_TTL names %s, which is not a table of this FROM%s", o.Key, didYouMean(o.Key, names))
				ok = false
			}
		}
	}
	return ok
}

// leafSet is the set of leaves e's columns come from; false after an
// unknown or ambiguous column (reported).
func (jp *joinPlan) leafSet(e ast.Expr) (uint64, bool) {
	var set uint64
	ok := true
	visit(e, func(x ast.Expr) bool {
		cr, isRef := x.(*ast.ColumnRef)
		if !isRef {
			return true
		}
		c, _, msg := jp.all.lookup(cr.Name.Parts)
		if msg != "" {
			jp.p.errorf(cr.Name.At, "%s", msg)
			ok = false
			return false
		}
		set |= 1 << c.leaf
		return false
	})
	return set, ok
}

// build plans the join tree te bottom-up: the relation and its leaves.
func (jp *joinPlan) build(te ast.TableExpr) (*rel, uint64) {
	for i, l := range jp.leaves {
		if l.te == te {
			return l.r, 1 << i // a table, or an outer join planned alone
		}
	}
	j, ok := te.(*ast.Join)
	if !ok {
		return nil, 0
	}
	p := jp.p
	l, lset := jp.build(j.Left)
	if l == nil {
		return nil, 0
	}
	r, rset := jp.build(j.Right)
	if r == nil {
		return nil, 0
	}
	both := lset | rset
	var lkeys, rkeys, post, pair []ast.Expr
	for _, c := range jp.conds {
		if c.used || c.leaves&^both != 0 || c.leaves&lset == 0 || c.leaves&rset == 0 {
			continue
		}
		c.used = true
		if jp.outer != "" && !c.on {
			post = append(post, c.e) // an outer join's WHERE filters its result
			continue
		}
		if b, isEq := c.e.(*ast.Binary); isEq && b.Op == "=" {
			xs, _ := jp.leafSet(b.X)
			ys, _ := jp.leafSet(b.Y)
			switch {
			case xs != 0 && ys != 0 && xs&^lset == 0 && ys&^rset == 0:
				lkeys, rkeys = append(lkeys, b.X), append(rkeys, b.Y)
				continue
			case xs != 0 && ys != 0 && xs&^rset == 0 && ys&^lset == 0:
				lkeys, rkeys = append(lkeys, b.Y), append(rkeys, b.X)
				continue
			}
		}
		if c.on {
			// Part of the match: a preserved row is padded while no
			// partner meets it (the join step's condition).
			pair = append(pair, c.e)
			continue
		}
		post = append(post, c.e)
	}
	at := j.Right.Position()
	if len(lkeys) == 0 {
		p.errorf(at, "the join of %s and %s has no equality of a column of each (ON %s.k = %s.k): without one every row meets every row of the other table; add one (in a comma join, list the tables so that each has an equality with one before it)", tableText(j.Left), tableText(j.Right), tableText(j.Left), tableText(j.Right))
		return nil, 0
	}
	if jp.temporal != nil && !jp.temporalKeys(j, rkeys) {
		return nil, 0
	}
	if jp.temporal != nil && l.updating {
		// The temporal-join step writes each probe row once, joined with
		// the version valid at its time; it takes no retraction of one.
		p.errorf(at, "the temporal join's left side %s is an updating result (a GROUP BY, a deduplication keeping the last row, an outer join, a changelog): a temporal join of its updates is not supported yet; join the rows before they are updated (the table itself), or use a regular join", tableText(j.Left))
		return nil, 0
	}
	var iv *intervalBounds
	if jp.win == nil && jp.outer == "" && jp.temporal == nil && !l.updating && !r.updating {
		if iv, post, ok = jp.interval(j, l, r, lset, rset, post); !ok {
			return nil, 0
		}
	}
	if jp.temporal != nil && len(pair) > 0 {
		if jp.outer != "" {
			p.errorf(at, "a condition of both tables in the ON of a LEFT temporal join (%s) is not supported yet: it would decide per version whether a row is padded; write it in WHERE (which drops the rows failing it, padded ones too) or use an inner join", pair[0].String())
			return nil, 0
		}
		// An inner temporal join writes each probe row once, joined with
		// one version: a condition of both tables in its ON filters the
		// joined rows, as in WHERE.
		post, pair = append(post, pair...), nil
	}
	if jp.outer == "" && jp.win == nil && jp.temporal == nil && (l.updating || r.updating) {
		// A join of a changelog tests its conditions of both sides per
		// pair: a row that would be filtered after the join is never
		// emitted, nor retracted (docs/design.md, "SQL").
		pair, post = append(pair, post...), nil
	}
	var ttl joinTTLs
	if iv == nil && jp.win == nil && jp.temporal == nil {
		if ttl, ok = jp.joinTTL(j, lset, rset); !ok {
			return nil, 0
		}
	}
	out := p.joinRels(at, l, r, lkeys, rkeys, ttl, iv, jp.win, jp.temporal, jp.outerSides())
	if out == nil {
		return nil, 0
	}
	if len(pair) > 0 {
		var cond ast.Expr
		for _, e := range pair {
			cond = and(cond, p.resolve(out, e))
		}
		out.pair.cond, out.pair.schema = cond, slices.Clone(out.in)
	}
	for _, e := range post {
		out.where = and(out.where, p.resolve(out, e))
	}
	return out, both
}

// pairCond is a join step's condition of both sides (its condition and
// schema fields), set once the join's relation is known.
type pairCond struct {
	cond   ast.Expr
	schema []schemaCol
}

// joinTTLs is how long a join keeps each side's rows, and where the
// script says so.
type joinTTLs struct {
	left, right     time.Duration
	leftAt, rightAt ast.Pos
}

// joinTTL is how long the join of the leaves lset and rset keeps each
// side's rows: a side's tables' STATE_TTL hints, else
// table.exec.state.ttl; the longest of a side made of several tables.
func (jp *joinPlan) joinTTL(j *ast.Join, lset, rset uint64) (joinTTLs, bool) {
	p := jp.p
	set, setAt := p.stateTTL(), ast.Pos{}
	if o := p.settings["table.exec.state.ttl"]; o != nil {
		setAt = o.ValueAt
	}
	side := func(s uint64) (time.Duration, ast.Pos, bool) {
		var d time.Duration
		var at ast.Pos
		for i := range jp.leaves {
			if s&(1<<i) == 0 {
				continue
			}
			t, tAt := jp.ttl[i], jp.hintAt[i]
			if t == 0 {
				t, tAt = set, setAt
			}
			if t == 0 {
				return 0, ast.Pos{}, false
			}
			if t > d {
				d, at = t, tAt
			}
		}
		return d, at, true
	}
	var ttl joinTTLs
	var lok, rok bool
	ttl.left, ttl.leftAt, lok = side(lset)
	ttl.right, ttl.rightAt, rok = side(rset)
	if !lok || !rok {
		var names []string
		for i, l := range jp.leaves {
			if (lset|rset)&(1<<i) != 0 {
				names = append(names, fmt.Sprintf("'%s' = '1h'", l.r.quals[len(l.r.quals)-1]))
			}
		}
		p.errorf(j.Right.Position(), "the join of %s and %s keeps every row of both sides to meet the other side's later rows: its state grows without bound (Flink keeps the rows for ever; onceflow refuses, to be safe). Bound it with SET 'table.exec.state.ttl' = '1 h'; or with SELECT /*+ STATE_TTL(%s) */ …: a row older than the ttl meets no later row", tableText(j.Left), tableText(j.Right), strings.Join(names, ", "))
		return ttl, false
	}
	return ttl, true
}

// joinRels ends each side with a select keyed by its key expressions
// and returns the relation of the join step over the two.
func (p *planner) joinRels(at ast.Pos, l, r *rel, lkeys, rkeys []ast.Expr, ttl joinTTLs, iv *intervalBounds, win *windowSpec, tj *temporalJoin, oj outerSides) *rel {
	// The keys, resolved, of one type on both sides: equal values must
	// write equal key text.
	lsrc, rsrc := append([]ast.Expr(nil), lkeys...), append([]ast.Expr(nil), rkeys...)
	for i := range lkeys {
		lkeys[i] = p.resolve(l, lkeys[i])
		rkeys[i] = p.resolve(r, rkeys[i])
	}
	if len(p.errs) > 0 {
		return nil
	}
	lt, rt := p.exprTypes(l, lkeys, at), p.exprTypes(r, rkeys, at)
	if lt == nil || rt == nil {
		return nil
	}
	for i := range lkeys {
		to, ok := joinKeyType(lt[i], rt[i])
		if !ok {
			p.errorf(lsrc[i].Position(), "the join compares %s (%s) with %s (%s): the keys of both sides must be of one type, so that equal values are equal keys; CAST one side to the other's type", lsrc[i], lt[i], rsrc[i], rt[i])
			return nil
		}
		if to != nil {
			if lt[i].String() != to.String() {
				lkeys[i] = &ast.Cast{At: lkeys[i].Position(), X: lkeys[i], To: to}
			}
			if rt[i].String() != to.String() {
				rkeys[i] = &ast.Cast{At: rkeys[i].Position(), X: rkeys[i], To: to}
			}
		}
	}
	if win != nil {
		iv = &intervalBounds{cols: [2]string{l.win.timeCol, r.win.timeCol}}
	}
	if tj != nil {
		// A probe row without a time has no place in event time: dropped
		// as a NULL key is (the versioned side's is the record's).
		if c, ok := l.find(tj.cols[0]); ok {
			var x ast.Expr = c.expr
			if _, isRef := x.(*ast.ColumnRef); !isRef {
				x = &ast.Paren{X: x}
			}
			l.where = and(l.where, &ast.IsNull{X: x, Not: true})
		}
	}
	if iv != nil {
		// A row without a time has no partner (NULL is within no bound)
		// and no place in event time: dropped as a NULL key is.
		for i, side := range []*rel{l, r} {
			if c, ok := side.find(iv.cols[i]); ok {
				var x ast.Expr = c.expr
				if _, isRef := x.(*ast.ColumnRef); !isRef {
					x = &ast.Paren{X: x}
				}
				side.where = and(side.where, &ast.IsNull{X: x, Not: true})
			}
		}
	}
	var prune *joinPrune
	if tj == nil && iv == nil && oj.kind == "" && !l.updating && !r.updating {
		// An inner regular join of appends: its sides write only what the
		// select after it reads (prune.go).
		prune = &joinPrune{}
		l.sidePrune, r.sidePrune = &sidePrune{jp: prune, side: 0}, &sidePrune{jp: prune, side: 1}
	}
	lcols := p.joinSide(l, lkeys, at, oj.preserved[0], oj.guards[0])
	if lcols == nil {
		return nil
	}
	rcols := p.joinSide(r, rkeys, at, oj.preserved[1], oj.guards[1])
	if rcols == nil {
		return nil
	}
	j := &rel{branches: []*rel{l, r}, join: true, prune: prune}
	sides := [2][]schemaCol{l.in, r.in} // each side's select's output
	for i, side := range []*rel{l, r} {
		for n := range side.nullOut {
			if j.nullable == nil {
				j.nullable = map[string]bool{}
			}
			j.nullable[[]string{"left", "right"}[i]+"."+n] = true
		}
	}
	for i, side := range []*rel{l, r} {
		name := []string{"left", "right"}[i]
		row := &ast.Type{Name: "ROW"}
		for _, c := range side.in {
			row.Fields = append(row.Fields, &ast.RowField{Name: ast.Ident{Name: c.name, Quoted: true}, Type: c.typ})
		}
		j.in = append(j.in, schemaCol{name: name, typ: row})
		for _, c := range []([]relCol){lcols, rcols}[i] {
			c.expr = ref(name, c.expr.(*ast.ColumnRef).Name.Parts[0].Name)
			j.cols = append(j.cols, c)
			for _, q := range c.qual {
				if !hasFold(j.quals, q) {
					j.quals = append(j.quals, q)
				}
			}
		}
	}
	if tj != nil {
		var times [2]string
		for i, cols := range [][]relCol{lcols, rcols} {
			for _, c := range cols {
				if strings.EqualFold(c.name, tj.cols[i]) {
					times[i] = "to_timestamp(" + valuePath(c.expr.(*ast.ColumnRef).Name.Parts[0].Name) + ")"
				}
			}
		}
		asOf := tj.ref.SystemTime.Position()
		j.steps = []step{{at: at, write: func(w *yamlWriter, d int) {
			w.linef(asOf, d, "- temporal-join:")
			if oj.kind != "" {
				w.linef(at, d+2, "kind: %s", strings.ToLower(oj.kind))
				w.linef(at, d+2, "left-match: %s", q(outerMatch))
			}
			w.linef(asOf, d+2, "left-time: %s", q(times[0]))
			w.linef(tj.ref.At, d+2, "right-time: %s", q(times[1]))
		}}}
		return j
	}
	if iv != nil {
		// Each side's time, as its select writes it.
		var times [2]string
		for i, cols := range [][]relCol{lcols, rcols} {
			for _, c := range cols {
				if strings.EqualFold(c.name, iv.cols[i]) {
					times[i] = "to_timestamp(" + valuePath(c.expr.(*ast.ColumnRef).Name.Parts[0].Name) + ")"
				}
			}
		}
		if win != nil {
			// The window's columns are the step's output's members.
			for _, n := range []string{colWindowStart, colWindowEnd, colWindowTime} {
				j.in = append(j.in, schemaCol{name: n, typ: &ast.Type{Name: "TIMESTAMP", Params: []int{3}}})
				for _, side := range []*rel{l, r} {
					q := append([]string{}, side.quals...)
					j.cols = append(j.cols, relCol{name: n, expr: ref(n), qual: q})
				}
			}
			j.steps = []step{{at: at, write: func(w *yamlWriter, d int) {
				w.linef(at, d, "- window-join:")
				w.linef(win.at, d+2, "size: %s", goDuration(win.size))
				switch win.kind {
				case "HOP":
					w.linef(win.at, d+2, "slide: %s", goDuration(win.slide))
				case "CUMULATE":
					w.linef(win.at, d+2, "step: %s", goDuration(win.step))
				}
				w.linef(at, d+2, "left-time: %s", q(times[0]))
				w.linef(at, d+2, "right-time: %s", q(times[1]))
			}}}
			return j
		}
		j.steps = []step{{at: at, write: func(w *yamlWriter, d int) {
			w.linef(at, d, "- interval-join:")
			w.linef(iv.at[0], d+2, "lower: %s", signedMillis(iv.lower))
			w.linef(iv.at[1], d+2, "upper: %s", signedMillis(iv.upper))
			w.linef(at, d+2, "left-time: %s", q(times[0]))
			w.linef(at, d+2, "right-time: %s", q(times[1]))
		}}}
		return j
	}
	// A join of a changelog takes its retractions and makes one: a
	// changed row retracts the joined rows its old version made.
	retracts := l.updating || r.updating
	pc := &pairCond{}
	j.pair = pc
	if retracts {
		j.updating, j.retracts, j.ub = true, true, new(bool)
		*j.ub = true
		j.outer = fmt.Sprintf("the JOIN at %d:%d joins an updating result: a changed row retracts the joined rows of its old version", at.Line, at.Col)
	}
	j.steps = []step{{at: at, write: func(w *yamlWriter, d int) {
		w.linef(at, d, "- join:")
		if retracts || pc.cond != nil {
			w.linef(at, d+2, "retractions: true")
		}
		if pc.cond != nil {
			w.linef(pc.cond.Position(), d+2, "condition: %s", q(pc.cond.String()))
			w.linef(pc.cond.Position(), d+2, "schema:")
			for _, c := range pc.schema {
				w.linef(at, d+3, "%s: %s", q(c.name), q(c.typ.String()))
			}
		}
		if oj.kind != "" {
			w.linef(at, d+2, "kind: %s", strings.ToLower(oj.kind))
			for i, name := range []string{"left-match", "right-match"} {
				if oj.preserved[i] {
					w.linef(at, d+2, "%s: %s", name, q(outerMatch))
				}
			}
		}
		if prune != nil {
			// What each pruned side's kept rows hold (prune.go): known
			// only now, once the select after the join was written.
			for i, name := range []string{"left-columns", "right-columns"} {
				sp := &sidePrune{jp: prune, side: i}
				if kept := sp.kept(sides[i]); kept != nil {
					w.linef(at, d+2, "%s: %s", name, qlist(kept))
				}
			}
		}
		w.linef(ttl.leftAt, d+2, "ttl: %s", goDuration(ttl.left))
		if ttl.right != ttl.left {
			w.linef(ttl.rightAt, d+2, "right-ttl: %s", goDuration(ttl.right))
		}
	}}}
	return j
}

// joinKeyType is the type both sides' keys are cast to (nil: they are of
// one type already); false when they cannot be compared as keys.
func joinKeyType(l, r *ast.Type) (*ast.Type, bool) {
	if l.String() == r.String() {
		return nil, true
	}
	ln, rn := strings.ToUpper(l.Name), strings.ToUpper(r.Name)
	switch {
	case isInteger(l) && isInteger(r):
		return &ast.Type{Name: "BIGINT"}, true
	case isChar(ln) && isChar(rn):
		return &ast.Type{Name: "STRING"}, true
	case ln == rn && len(l.Params) == len(r.Params) && l.WithLocalTimeZone == r.WithLocalTimeZone && ln != "ROW" && ln != "ARRAY" && ln != "MAP" && ln != "MULTISET" && ln != "DECIMAL":
		// the same type but for its nullability or precision
		t := *l
		t.NotNull = false
		if len(t.Params) > 0 && r.Params[0] > t.Params[0] {
			t.Params = append([]int(nil), r.Params...)
		}
		return &t, true
	}
	return nil, false
}

func isChar(name string) bool { return name == "STRING" || name == "VARCHAR" || name == "CHAR" }

// exprTypes types exprs, written over r.in.
func (p *planner) exprTypes(r *rel, exprs []ast.Expr, at ast.Pos) []*ast.Type {
	tmp := &rel{in: r.in}
	for i, e := range exprs {
		tmp.cols = append(tmp.cols, relCol{name: fmt.Sprintf("k%d", i), expr: e})
	}
	types, _ := p.typeColumns(tmp, nil, at)
	if types == nil {
		return nil
	}
	out := make([]*ast.Type, len(exprs))
	for i := range exprs {
		out[i] = types[fmt.Sprintf("k%d", i)]
	}
	return out
}

// joinSide writes the side r's open select, keyed by keys (columns
// added for keys that are not a column as it is) and dropping the rows
// of a NULL key, and returns r's columns as they were (names and
// qualifiers) over the select's output: each a reference to its output
// column, whose name is made unique.
func (p *planner) joinSide(r *rel, keys []ast.Expr, at ast.Pos, preserved bool, guard ast.Expr) []relCol {
	var out []relCol // the columns as seen by the join's reader
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
	for _, c := range r.cols {
		if m, ok := c.expr.(*ast.ColumnRef); ok && strings.HasPrefix(m.Name.Parts[0].Name, "\x00") {
			continue // a window column: refused by checkJoinInput
		}
		n := unique(c.name)
		cols = append(cols, relCol{name: n, expr: c.expr})
		if r.nullableRef(c.expr) {
			if r.nullOut == nil {
				r.nullOut = map[string]bool{}
			}
			r.nullOut[n] = true
		}
		q := c.qual
		if q == nil {
			q = append([]string{}, r.quals...)
		}
		out = append(out, relCol{name: c.name, expr: ref(n), qual: q})
	}
	var key []string
	var match ast.Expr // a preserved side's: the row has a key and passes guard
	for i, k := range keys {
		name := ""
		for _, c := range cols {
			if c.expr.String() == k.String() {
				name = c.name
				break
			}
		}
		if name == "" {
			name = unique(fmt.Sprintf("jk%d", i))
			cols = append(cols, relCol{name: name, expr: k})
		}
		key = append(key, name)
		var x ast.Expr = k
		if _, isRef := k.(*ast.ColumnRef); !isRef {
			x = &ast.Paren{X: k}
		}
		if preserved {
			match = and(match, &ast.IsNull{X: x, Not: true})
		} else {
			r.where = and(r.where, &ast.IsNull{X: x, Not: true})
		}
	}
	if sp := r.sidePrune; sp != nil {
		sp.jp.keys[sp.side] = map[string]bool{}
		for _, k := range key {
			sp.jp.keys[sp.side][strings.ToLower(k)] = true
		}
	}
	if preserved {
		if guard != nil {
			match = and(match, guard)
		}
		cols = append(cols, relCol{name: unique(outerMatchCol), expr: matchColumn(match)})
		if cols[len(cols)-1].name != outerMatchCol {
			p.errorf(at, "a column of the outer join's side is named %s, which the planner uses for itself: rename it", outerMatchCol)
			return nil
		}
	}
	r.cols = cols
	if p.materialize(r, key, at) == nil {
		return nil
	}
	return out
}

// Interval joins (docs/design.md, "SQL"): an inner join whose conditions
// bound one table's time attribute (its WATERMARK column) by the
// other's, `a.ts BETWEEN b.ts - INTERVAL '…' AND b.ts + INTERVAL '…'` or
// a pair of `>=`, `>`, `<=`, `<` comparisons, compiles to the
// interval-join step: its state is freed by the watermark, no ttl.

// intervalBounds are the bounds of left time - right time, in ms, both
// inclusive (a strict comparison moves its bound by 1 ms, the unit of
// event time), the time columns of the two sides and where each bound
// is written.
type intervalBounds struct {
	lower, upper int64
	cols         [2]string
	at           [2]ast.Pos
}

// timeBound is one comparison of the two sides' columns, written as
// left column - right column op c.
type timeBound struct {
	e          ast.Expr
	lcol, rcol relCol
	op         string // >=, >, <=, <
	c          int64
	interval   bool // an INTERVAL is added to a column
}

// timeTerm reads e as a column plus or minus an interval.
func timeTerm(e ast.Expr) (*ast.ColumnRef, int64, bool, bool) {
	switch x := unparen(e).(type) {
	case *ast.ColumnRef:
		return x, 0, false, true
	case *ast.Binary:
		c, ok := unparen(x.X).(*ast.ColumnRef)
		iv, isIv := unparen(x.Y).(*ast.Interval)
		if !ok || !isIv || (x.Op != "+" && x.Op != "-") {
			return nil, 0, false, false
		}
		d, err := intervalDuration(iv)
		if err != nil {
			return nil, 0, false, false
		}
		ms := d.Milliseconds()
		if x.Op == "-" {
			ms = -ms
		}
		return c, ms, true, true
	}
	return nil, 0, false, false
}

var mirrored = map[string]string{">=": "<=", ">": "<", "<=": ">=", "<": ">"}

// timeBounds reads the conjunct e as comparisons of a column of each
// side (lset, rset); false when it is not one.
func (jp *joinPlan) timeBounds(e ast.Expr, lset, rset uint64) ([]timeBound, bool) {
	var cmps [][3]ast.Expr // x, op (as a literal), y
	switch x := unparen(e).(type) {
	case *ast.Between:
		if x.Not || x.Symmetric {
			return nil, false
		}
		cmps = [][3]ast.Expr{{x.X, &ast.Literal{Value: ">="}, x.Lo}, {x.X, &ast.Literal{Value: "<="}, x.Hi}}
	case *ast.Binary:
		if mirrored[x.Op] == "" {
			return nil, false
		}
		cmps = [][3]ast.Expr{{x.X, &ast.Literal{Value: x.Op}, x.Y}}
	default:
		return nil, false
	}
	var out []timeBound
	for _, c := range cmps {
		cx, ox, ivx, ok1 := timeTerm(c[0])
		cy, oy, ivy, ok2 := timeTerm(c[2])
		if !ok1 || !ok2 {
			return nil, false
		}
		xc, _, msgx := jp.all.lookup(cx.Name.Parts)
		yc, _, msgy := jp.all.lookup(cy.Name.Parts)
		if msgx != "" || msgy != "" {
			return nil, false
		}
		op := c[1].(*ast.Literal).Value
		xs, ys := uint64(1)<<xc.leaf, uint64(1)<<yc.leaf
		b := timeBound{e: e, op: op, interval: ivx || ivy}
		switch {
		case xs&lset != 0 && ys&rset != 0: // L + ox op R + oy: L - R op oy - ox
			b.lcol, b.rcol, b.c = xc, yc, oy-ox
		case xs&rset != 0 && ys&lset != 0: // R + ox op L + oy: L - R op' ox - oy
			b.lcol, b.rcol, b.c, b.op = yc, xc, ox-oy, mirrored[op]
		default:
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// rowtimeOf is the leaf rel whose time attribute c is, nil when c is none.
func (jp *joinPlan) rowtimeOf(c relCol, set uint64) *rel {
	if set&(set-1) != 0 {
		return nil // a join's result has no time attribute
	}
	r := jp.leaves[c.leaf].r
	if r.src == nil || r.src.watermark == nil || r.rowtime == "" || !strings.EqualFold(c.name, r.rowtime) {
		return nil
	}
	return r
}

// hasTTL tells whether every leaf of set has a ttl (hint or setting).
func (jp *joinPlan) hasTTL(set uint64) bool {
	for i := range jp.leaves {
		if set&(1<<i) != 0 && jp.ttl[i] == 0 && jp.p.stateTTL() == 0 {
			return false
		}
	}
	return true
}

// interval finds the time bounds among the join's conditions of both
// sides (post): the bounds of an interval join (nil: a regular join)
// and the conditions left to filter the joined rows. Bounds of columns
// that are not the tables' time attributes, or in one direction only,
// leave a regular join, which a ttl must bound: without one they are
// refused, saying why.
func (jp *joinPlan) interval(j *ast.Join, l, r *rel, lset, rset uint64, post []ast.Expr) (*intervalBounds, []ast.Expr, bool) {
	p := jp.p
	var bounds []timeBound
	var rest []ast.Expr
	for _, e := range post {
		bs, ok := jp.timeBounds(e, lset, rset)
		if !ok {
			rest = append(rest, e)
			continue
		}
		bounds = append(bounds, bs...)
	}
	if len(bounds) == 0 {
		return nil, post, true
	}
	iv := &intervalBounds{lower: math.MinInt64, upper: math.MaxInt64}
	var lt, rt *rel
	var notTime *timeBound
	for i := range bounds {
		b := &bounds[i]
		lr, rr := jp.rowtimeOf(b.lcol, lset), jp.rowtimeOf(b.rcol, rset)
		if lr == nil || rr == nil {
			if notTime == nil && (b.interval || lr != nil || rr != nil) {
				notTime = b
			}
			continue
		}
		lt, rt = lr, rr
		iv.cols = [2]string{b.lcol.name, b.rcol.name}
		switch b.op {
		case ">=", ">":
			c := b.c
			if b.op == ">" {
				c++
			}
			if c > iv.lower {
				iv.lower, iv.at[0] = c, b.e.Position()
			}
		case "<=", "<":
			c := b.c
			if b.op == "<" {
				c--
			}
			if c < iv.upper {
				iv.upper, iv.at[1] = c, b.e.Position()
			}
		}
	}
	both := lset | rset
	what := fmt.Sprintf("the join of %s and %s", tableText(j.Left), tableText(j.Right))
	switch {
	case notTime != nil && lt == nil:
		if jp.hasTTL(both) {
			return nil, post, true // a regular join, its condition a filter
		}
		var attrs []string
		for i, set := range []uint64{lset, rset} {
			name := tableText([]ast.TableExpr{j.Left, j.Right}[i])
			switch r := jp.leaves[bits.TrailingZeros64(set)].r; {
			case set&(set-1) != 0:
				attrs = append(attrs, name+" is a join's result, which has none")
			case r.src == nil || r.src.watermark == nil || r.rowtime == "":
				attrs = append(attrs, name+" has none: declare WATERMARK FOR col AS col - INTERVAL '5' SECOND")
			default:
				attrs = append(attrs, name+"."+r.rowtime)
			}
		}
		p.errorf(notTime.e.Position(), "%s bounds %s.%s by %s.%s, which are not both the tables' time attributes (%s): an interval join bounds one table's WATERMARK column by the other's; as written it is a regular join, which keeps every row: join on the time attributes, or bound its state with SET 'table.exec.state.ttl' = '1 h'", what, tableText(j.Left), notTime.lcol.name, tableText(j.Right), notTime.rcol.name, strings.Join(attrs, "; "))
		return nil, nil, false
	case lt == nil:
		return nil, post, true // no time bound at all: a regular join
	case iv.lower == math.MinInt64 || iv.upper == math.MaxInt64:
		if jp.hasTTL(both) {
			return nil, post, true
		}
		missing, example := "a lower", fmt.Sprintf("%s.%s >= %s.%s - INTERVAL '10' MINUTE", tableText(j.Left), iv.cols[0], tableText(j.Right), iv.cols[1])
		if iv.upper == math.MaxInt64 {
			missing, example = "an upper", fmt.Sprintf("%s.%s <= %s.%s + INTERVAL '10' MINUTE", tableText(j.Left), iv.cols[0], tableText(j.Right), iv.cols[1])
		}
		p.errorf(bounds[0].e.Position(), "%s bounds %s.%s by %s.%s in one direction only: an interval join needs %s bound too (such as %s), else a row waits for partners for ever; or bound a regular join with SET 'table.exec.state.ttl' = '1 h'", what, tableText(j.Left), iv.cols[0], tableText(j.Right), iv.cols[1], missing, example)
		return nil, nil, false
	case iv.lower > iv.upper:
		p.errorf(iv.at[1], "%s: the time bounds leave no pair (%s.%s - %s.%s must be at least %s and at most %s): widen them", what, tableText(j.Left), iv.cols[0], tableText(j.Right), iv.cols[1], signedMillis(iv.lower), signedMillis(iv.upper))
		return nil, nil, false
	}
	// The bounds of other columns than the time attributes stay filters.
	for _, e := range post {
		keep := true
		for _, b := range bounds {
			if b.e == e && jp.rowtimeOf(b.lcol, lset) != nil && jp.rowtimeOf(b.rcol, rset) != nil {
				keep = false
			}
		}
		if keep && !slices.Contains(rest, e) {
			rest = append(rest, e)
		}
	}
	p.useTime(lt.src)
	p.useTime(rt.src)
	return iv, rest, true
}

// signedMillis writes ms as a signed duration of the job file.
func signedMillis(ms int64) string {
	if ms < 0 {
		return "-" + goDuration(time.Duration(-ms)*time.Millisecond)
	}
	return goDuration(time.Duration(ms) * time.Millisecond)
}

// Window joins (docs/design.md, "SQL"): a join of two window table
// functions, `FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), size)) x JOIN
// TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), size)) y ON x.window_start =
// y.window_start AND x.window_end = y.window_end AND x.k = y.k`,
// compiles to the window-join step: the pairs of a window are emitted
// once when it closes, and its rows freed then.

// isWindowCol tells whether c is a window table function's column.
func isWindowCol(c relCol) bool {
	m, ok := c.expr.(*ast.ColumnRef)
	return ok && strings.HasPrefix(m.Name.Parts[0].Name, "\x00")
}

// joinWindows checks a join of window table functions and takes the
// equalities of their window_start and window_end from the conditions;
// false after an error (reported). jp.win is set on a window join.
func (jp *joinPlan) joinWindows(j *ast.Join) bool {
	p := jp.p
	var wins []*windowSpec
	for _, l := range jp.leaves {
		if l.r.win != nil {
			wins = append(wins, l.r.win)
		}
	}
	if len(wins) == 0 {
		return true
	}
	if len(jp.leaves) != 2 || len(wins) != 2 {
		p.errorf(wins[0].at, "a window table function joins only another one (a window join of two tables, each windowed alike): join the tables first, or window each side")
		return false
	}
	if w0, w1 := wins[0], wins[1]; w0.kind != w1.kind || w0.size != w1.size || w0.slide != w1.slide || w0.step != w1.step {
		p.errorf(wins[1].at, "a window join needs the same windows on both sides: %s and %s", windowText(w0), windowText(w1))
		return false
	}
	// The window columns: equalities of both sides' window_start and
	// window_end; nothing else may read them before the join.
	eq := map[string]bool{}
	for _, c := range jp.conds {
		var names []string
		var leaves []int
		visit(c.e, func(x ast.Expr) bool {
			if cr, ok := x.(*ast.ColumnRef); ok {
				if col, _, msg := jp.all.lookup(cr.Name.Parts); msg == "" && isWindowCol(col) {
					names = append(names, col.name)
					leaves = append(leaves, col.leaf)
				}
				return false
			}
			return true
		})
		if len(names) == 0 {
			continue
		}
		b, isEq := unparen(c.e).(*ast.Binary)
		_, xRef := unparenRef(b, true)
		_, yRef := unparenRef(b, false)
		if isEq && b.Op == "=" && xRef && yRef && len(names) == 2 && names[0] == names[1] && leaves[0] != leaves[1] && names[0] != colWindowTime {
			eq[names[0]] = true
			c.used = true
			continue
		}
		p.errorf(c.e.Position(), "%s: a window join reads the window columns only in x.window_start = y.window_start AND x.window_end = y.window_end; select them after the join", c.e)
		return false
	}
	if !eq[colWindowStart] || !eq[colWindowEnd] {
		x, y := tableText(j.Left), tableText(j.Right)
		p.errorf(j.Right.Position(), "a window join joins on both windows: add %[1]s.window_start = %[2]s.window_start AND %[1]s.window_end = %[2]s.window_end to its ON", x, y)
		return false
	}
	jp.win = wins[0]
	return true
}

// windowText writes a window table function's windows for a message.
func windowText(w *windowSpec) string {
	switch w.kind {
	case "HOP":
		return fmt.Sprintf("HOP of %s every %s", goDuration(w.size), goDuration(w.slide))
	case "CUMULATE":
		return fmt.Sprintf("CUMULATE of %s by %s", goDuration(w.size), goDuration(w.step))
	}
	return fmt.Sprintf("%s of %s", w.kind, goDuration(w.size))
}

// unparenRef tells whether b's operand (x, else y) is a column reference.
func unparenRef(b *ast.Binary, x bool) (ast.Expr, bool) {
	if b == nil {
		return nil, false
	}
	e := b.Y
	if x {
		e = b.X
	}
	e = unparen(e)
	_, ok := e.(*ast.ColumnRef)
	return e, ok
}

// hintsOf are the STATE_TTL hints' options that name a table of the
// join te (an outer join planned as a leaf of its own, with them).
func hintsOf(hints []*ast.Hint, te ast.TableExpr) []*ast.Hint {
	var names []string
	var walk func(te ast.TableExpr)
	walk = func(te ast.TableExpr) {
		switch t := te.(type) {
		case *ast.Join:
			walk(t.Left)
			walk(t.Right)
		case *ast.TableRef:
			names = append(names, t.Name.Last())
			if t.Alias != nil {
				names = append(names, t.Alias.Name)
			}
		default:
			names = append(names, tableText(te))
		}
	}
	walk(te)
	var out []*ast.Hint
	for _, h := range hints {
		if !strings.EqualFold(h.Name, "STATE_TTL") {
			continue
		}
		c := *h
		c.Options = nil
		for _, o := range h.Options {
			if hasFold(names, o.Key) {
				c.Options = append(c.Options, o)
			}
		}
		if len(c.Options) > 0 {
			out = append(out, &c)
		}
	}
	return out
}

// nullableRef tells whether e is a member of r's join step's output that
// a padded row makes NULL (rel.nullable).
func (r *rel) nullableRef(e ast.Expr) bool {
	ref, ok := unparen(e).(*ast.ColumnRef)
	if !ok || len(ref.Name.Parts) != 2 || r.nullable == nil {
		return false
	}
	side, member := ref.Name.Parts[0].Name, ref.Name.Parts[1].Name
	return r.nullable[side+".*"] || r.nullable[side+"."+member]
}
