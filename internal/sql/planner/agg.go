package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Window table functions and GROUP BY.
//
// A windowed GROUP BY becomes three steps: a select computing the group
// columns g0… and the aggregates' inputs a0… (keyed by the groups), a
// window step aggregating them (first() of each group column, the
// aggregate of each input), and the open select of the result, over the
// window's output {key, window_start, window_end, g0…, a0…}. A GROUP BY
// without a window does the same with an aggregate step, whose output is
// an updating result: a row per input, the group's new figures, keyed by
// the group.

// Names of the columns a window table function adds.
const (
	colWindowStart = "window_start"
	colWindowEnd   = "window_end"
	colWindowTime  = "window_time"
)

// windowMarker stands for a window column until the window step exists.
func windowMarker(name string) ast.Expr { return ref("\x00" + name) }

func (p *planner) windowTVF(f *ast.TableFunc) *rel {
	kind := strings.ToUpper(f.Name.Name)
	var params []string
	switch kind {
	case "TUMBLE":
		params = []string{"DATA", "TIMECOL", "SIZE", "OFFSET"}
	case "HOP":
		params = []string{"DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"}
	case "SESSION":
		params = []string{"DATA", "TIMECOL", "GAP"}
	case "CUMULATE":
		params = []string{"DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"}
	default:
		p.errorf(f.At, "unknown table function %s: onceflow has the window functions TUMBLE, HOP, CUMULATE and SESSION%s", f.Name.Name, didYouMean(f.Name.Name, []string{"TUMBLE", "HOP", "SESSION", "CUMULATE"}))
		return nil
	}
	args := map[string]*ast.FuncArg{}
	for i, a := range f.Args {
		name := ""
		if a.Named != nil {
			name = strings.ToUpper(a.Named.Name)
		} else if i < len(params) {
			name = params[i]
		}
		if a.Named != nil && !contains(params, name) {
			p.errorf(a.At, "%s has no argument %s: it takes %s%s", kind, a.Named.Name, strings.Join(params, ", "), didYouMean(name, params))
			return nil
		}
		if name == "" || !contains(params, name) {
			p.errorf(a.At, "%s takes %s", kind, strings.Join(params, ", "))
			return nil
		}
		args[name] = a
	}
	data, tc := args["DATA"], args["TIMECOL"]
	if data == nil || data.Table == nil {
		p.errorf(f.At, "%s needs the table first: %s(TABLE t, DESCRIPTOR(time_column), …)", kind, kind)
		return nil
	}
	if tc == nil || len(tc.Descriptor) != 1 {
		p.errorf(f.At, "%s needs the time column as DESCRIPTOR(column)", kind)
		return nil
	}
	r := p.from(&ast.TableRef{At: data.At, Name: *data.Table})
	if r == nil {
		return nil
	}
	ws := &windowSpec{at: f.At, kind: kind, timeCol: tc.Descriptor[0].Name}
	ok := true
	switch kind {
	case "TUMBLE":
		ws.size, ok = p.windowArg(args, "SIZE", kind, f.At)
	case "HOP":
		var ok2 bool
		ws.slide, ok = p.windowArg(args, "SLIDE", kind, f.At)
		ws.size, ok2 = p.windowArg(args, "SIZE", kind, f.At)
		ok = ok && ok2
		if ok && (ws.slide >= ws.size || ws.size%ws.slide != 0) {
			p.errorf(f.At, "HOP's size (%s) must be a multiple of its slide (%s), larger than it", ws.size, ws.slide)
			ok = false
		}
	case "CUMULATE":
		// docs/design.md, "### SQL": the window step's cumulate windows,
		// size and step.
		var ok2 bool
		ws.step, ok = p.windowArg(args, "STEP", kind, f.At)
		ws.size, ok2 = p.windowArg(args, "SIZE", kind, f.At)
		ok = ok && ok2
		switch {
		case !ok:
		case ws.step > ws.size:
			p.errorf(args["STEP"].At, "CUMULATE's step (%s) is longer than its size (%s): the windows grow by step up to size; write the step first, then the size, as CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '10' MINUTE)", goDuration(ws.step), goDuration(ws.size))
			ok = false
		case ws.size%ws.step != 0 || ws.step%time.Millisecond != 0:
			p.errorf(args["SIZE"].At, "CUMULATE's size (%s) must be a multiple of its step (%s), in whole milliseconds: the windows grow by step up to size; choose a step that divides it, such as %s", goDuration(ws.size), goDuration(ws.step), goDuration(gcdDuration(ws.size, ws.step)))
			ok = false
		}
	case "SESSION":
		ws.gap, ok = p.windowArg(args, "GAP", kind, f.At)
	}
	if a := args["OFFSET"]; a != nil && ok {
		ok = p.windowOffset(ws, a)
	}
	if !ok || !p.checkTimeCol(r, ws, tc.Descriptor[0].At) {
		return nil
	}
	r.win = ws
	for _, n := range []string{colWindowStart, colWindowEnd, colWindowTime} {
		r.cols = append(r.cols, relCol{name: n, expr: windowMarker(n)})
	}
	return r
}

// windowOffset reads a TUMBLE's or HOP's OFFSET: the windows start that
// much after the multiples of the size (HOP: the slide). A negative
// offset, or one of a whole size or more, is the same windows as the
// offset less whole sizes, which the window step takes (from 0 up to the
// size).
func (p *planner) windowOffset(ws *windowSpec, a *ast.FuncArg) bool {
	if ws.kind == "CUMULATE" {
		p.errorf(a.At, "CUMULATE's OFFSET is not supported yet: cumulate windows start at multiples of their size from the Unix epoch; leave it out")
		return false
	}
	iv, isIv := a.Expr.(*ast.Interval)
	if !isIv {
		p.errorf(a.At, "%s's OFFSET must be an INTERVAL such as INTERVAL '15' MINUTE", ws.kind)
		return false
	}
	d, err := intervalDuration(iv)
	if err != nil {
		p.errorf(iv.At, "%s's OFFSET: %v", ws.kind, err)
		return false
	}
	unit := ws.size
	if ws.kind == "HOP" {
		unit = ws.slide
	}
	if d%time.Millisecond != 0 {
		p.errorf(iv.At, "%s's OFFSET must be whole milliseconds", ws.kind)
		return false
	}
	ws.offset = (d%unit + unit) % unit
	return true
}

func (p *planner) windowArg(args map[string]*ast.FuncArg, name, kind string, at ast.Pos) (time.Duration, bool) {
	a := args[name]
	if a == nil || a.Expr == nil {
		p.errorf(at, "%s needs its %s, an INTERVAL", kind, name)
		return 0, false
	}
	return p.interval(a.Expr, kind+"'s "+name)
}

// checkTimeCol checks that a window's time column is the relation's
// event time, or a PROCTIME() column (ws.proc: processing-time windows).
func (p *planner) checkTimeCol(r *rel, ws *windowSpec, at ast.Pos) bool {
	col := ws.timeCol
	c, ok := r.find(col)
	if !ok {
		p.errorf(at, "DESCRIPTOR(%s): no column %s%s", col, col, didYouMean(col, r.colNames()))
		return false
	}
	if call, ok := c.expr.(*ast.Call); ok && strings.EqualFold(call.Name.Last(), "PROCTIME") && len(call.Args) == 0 {
		// Processing time: a record is in the windows of the clock when
		// the window step handles it; no WATERMARK needed.
		ws.proc = true
		return true
	}
	if r.src == nil && len(r.branches) > 0 {
		p.errorf(at, "windows over the result of a join or UNION ALL are not supported yet: its rows carry no event time (a regular join's output is not ordered by time); window each table before, or in a job of its own")
		return false
	}
	if r.rowtime == "" || !strings.EqualFold(c.name, r.rowtime) || r.src == nil || r.src.watermark == nil {
		t := "the source table"
		if r.src != nil {
			t = r.src.name
		}
		p.errorf(at, "windows need event time: %s is not a time attribute; declare WATERMARK FOR %s AS %s - INTERVAL '5' SECOND in %s (or, for processing-time windows, window a column declared AS PROCTIME())", col, col, col, t)
		return false
	}
	p.timeTable = r.src
	p.useTime(r.src)
	return true
}

// An aggregate call of a GROUP BY and the column (a<i>) it becomes.
type aggCall struct {
	call *ast.Call
	fn   string // the window/aggregate step's function
	arg  ast.Expr
	col  string
	// seen is set for SUM and AVG: the column counting the inputs that
	// are not NULL, so a group of NULLs gives NULL (the step's sum of
	// nothing is 0).
	seen string
}

func (p *planner) aggregate(r *rel, s *ast.Select) *rel {
	orig := *r            // the relation the select list is written over
	var groups []ast.Expr // resolved group keys
	var groupSrc []string // their resolved text, for matching
	winCols := map[string]bool{}
	legacy := false
	for _, g := range s.GroupBy {
		if c, ok := g.(*ast.ColumnRef); ok && r.win != nil && len(c.Name.Parts) == 1 {
			if n := strings.ToLower(c.Name.Parts[0].Name); n == colWindowStart || n == colWindowEnd {
				winCols[n] = true
				continue
			}
		}
		if call, ok := g.(*ast.Call); ok {
			if kind := strings.ToUpper(call.Name.Last()); kind == "TUMBLE" || kind == "HOP" || kind == "SESSION" {
				if !p.legacyWindow(r, call, kind) {
					return nil
				}
				legacy = true
				continue
			}
		}
		if hasAggregate(g) {
			p.errorf(g.Position(), "an aggregate function in GROUP BY")
			return nil
		}
		e := p.resolve(r, g)
		groups = append(groups, e)
		groupSrc = append(groupSrc, e.String())
	}
	if r.win != nil && !legacy && !(winCols[colWindowStart] && winCols[colWindowEnd]) {
		p.errorf(s.At, "a %s window's GROUP BY must have window_start and window_end: GROUP BY window_start, window_end, …", r.win.kind)
		return nil
	}
	// An updating input: the aggregate takes each row's old version out
	// (retractions), which count, sum and avg can; a window cannot.
	retractIn := r.updating
	if retractIn && r.win != nil {
		p.errorf(s.At, "a window over an updating result (the rows of a GROUP BY without a window): window the input first, then aggregate")
		return nil
	}
	// The aggregate calls, each once.
	var aggs []*aggCall
	byText := map[string]*aggCall{}
	collect := func(e ast.Expr) {
		visit(e, func(x ast.Expr) bool {
			c, ok := x.(*ast.Call)
			if !ok || c.Over != nil || !aggregateFuncs[strings.ToUpper(c.Name.Last())] {
				return true
			}
			if byText[c.String()] == nil {
				a := p.aggInput(r, c, len(aggs))
				if a == nil {
					return false
				}
				byText[c.String()] = a
				aggs = append(aggs, a)
			}
			return false
		})
	}
	for _, it := range s.Items {
		if it.Star {
			p.errorf(it.At, "SELECT * with GROUP BY: name the grouped columns and the aggregates")
			return nil
		}
		collect(it.Expr)
	}
	if s.Having != nil {
		collect(s.Having)
	}
	if retractIn {
		for _, a := range aggs {
			switch a.fn {
			case "count", "sum", "avg", "min", "max", "distinct":
			default:
				p.errorf(a.call.At, "%s over an updating result (the rows of a GROUP BY without a window): when a row is retracted, the %s before it is not known; not supported (COUNT, SUM, AVG, MIN, MAX and COUNT(DISTINCT) are)", strings.ToUpper(a.call.Name.Last()), strings.ToUpper(a.call.Name.Last()))
			}
		}
		if len(p.errs) == 0 && !p.needRetractions(r, s.At, "aggregating") {
			return nil
		}
	}
	if len(p.errs) > 0 {
		return nil
	}
	// The select before the stateful step: group columns and inputs.
	pre := make([]relCol, 0, len(groups)+len(aggs))
	var key []string
	for i, g := range groups {
		n := fmt.Sprintf("g%d", i)
		pre = append(pre, relCol{name: n, expr: g})
		key = append(key, n)
	}
	for _, a := range aggs {
		if a.arg != nil {
			pre = append(pre, relCol{name: a.col, expr: a.arg})
		}
		if a.seen != "" {
			one, zero := &ast.Literal{Kind: ast.LitNumber, Value: "1"}, &ast.Literal{Kind: ast.LitNumber, Value: "0"}
			pre = append(pre, relCol{name: a.seen, expr: &ast.Case{Whens: []*ast.When{{Cond: &ast.IsNull{X: &ast.Paren{X: a.arg}, Not: true}, Result: one}}, Else: zero}})
		}
	}
	if r.win != nil && !r.win.proc {
		// The window reads each record's event time from the select's
		// output: the time column, as it is.
		tc, _ := orig.find(r.win.timeCol)
		pre = append(pre, relCol{name: "t", expr: tc.expr})
	}
	if len(pre) == 0 { // COUNT(*) alone: the step needs a column
		pre = append(pre, relCol{name: "g", expr: &ast.Literal{Kind: ast.LitNumber, Value: "0"}})
	}
	r.cols = pre
	types := p.materializeKeyed(r, key, s.At)
	if types == nil {
		return nil
	}
	// The stateful step.
	var fields [][2]string
	outSchema := []schemaCol{{name: "key", typ: &ast.Type{Name: "STRING"}}}
	if r.win != nil {
		outSchema = append(outSchema, schemaCol{name: colWindowStart, typ: &ast.Type{Name: "TIMESTAMP", Params: []int{3}}}, schemaCol{name: colWindowEnd, typ: &ast.Type{Name: "TIMESTAMP", Params: []int{3}}})
	}
	for i := range groups {
		n := fmt.Sprintf("g%d", i)
		fields = append(fields, [2]string{n, "first(value." + n + ")"})
		outSchema = append(outSchema, schemaCol{name: n, typ: types[n]})
	}
	for _, a := range aggs {
		if a.fn == "count" {
			fields = append(fields, [2]string{a.col, "count()"})
		} else {
			fields = append(fields, [2]string{a.col, a.fn + "(value." + a.col + ")"})
		}
		outSchema = append(outSchema, schemaCol{name: a.col, typ: aggType(a, types[a.col])})
		if a.seen != "" {
			fields = append(fields, [2]string{a.seen, "sum(value." + a.seen + ")"})
			outSchema = append(outSchema, schemaCol{name: a.seen, typ: &ast.Type{Name: "BIGINT"}})
		}
	}
	keyExpr := ""
	if len(key) == 0 {
		keyExpr = `"all"` // one group: every record under one key
	}
	if r.win != nil {
		ws := r.win
		p.stateful(r, s.At, "window", func(w *yamlWriter, d int) {
			if keyExpr != "" {
				w.linef(ws.at, d, "key: %s", q(keyExpr))
			}
			writeKeyOf(w, ws.at, d, groupSrc)
			if ws.proc {
				w.linef(ws.at, d, "time: processing")
			} else {
				w.linef(ws.at, d, "time: %s", q("to_timestamp(value.t)"))
			}
			switch ws.kind {
			case "TUMBLE":
				w.linef(ws.at, d, "size: %s", goDuration(ws.size))
			case "HOP":
				w.linef(ws.at, d, "size: %s", goDuration(ws.size))
				w.linef(ws.at, d, "slide: %s", goDuration(ws.slide))
			case "CUMULATE":
				w.linef(ws.at, d, "size: %s", goDuration(ws.size))
				w.linef(ws.at, d, "step: %s", goDuration(ws.step))
			case "SESSION":
				w.linef(ws.at, d, "gap: %s", goDuration(ws.gap))
			}
			if ws.offset > 0 {
				w.linef(ws.at, d, "offset: %s", goDuration(ws.offset))
			}
			writeFields(w, d, s.At, fields)
		})
	} else {
		ttl := p.stateTTL()
		ub := new(bool) // set by what reads the result (needRetractions)
		p.stateful(r, s.At, "aggregate", func(w *yamlWriter, d int) {
			if keyExpr != "" {
				w.linef(s.At, d, "key: %s", q(keyExpr))
			}
			writeKeyOf(w, s.At, d, groupSrc)
			writeFields(w, d, s.At, fields)
			if ttl > 0 {
				w.linef(p.settings["table.exec.state.ttl"].ValueAt, d, "ttl: %s", goDuration(ttl))
			}
			if retractIn {
				w.linef(s.At, d, "retractions: true")
			}
			if *ub {
				w.linef(s.At, d, "update-before: true")
			}
		})
		r.updating, r.ub = true, ub
		r.retracts = retractIn // a group that loses its last row is deleted
	}
	// The result: the select list over the step's output.
	r.in = outSchema
	win := r.win
	r.win, r.rowtime = nil, ""
	r.cols = nil
	quiet := func(e ast.Expr) string {
		saved := len(p.errs)
		x := p.resolve(&orig, e)
		failed := len(p.errs) > saved
		p.errs = p.errs[:saved]
		if failed {
			return ""
		}
		return x.String()
	}
	var outKey []string
	post := func(e ast.Expr) ast.Expr {
		return rewrite(e, func(x ast.Expr) (ast.Expr, bool) {
			if c, ok := x.(*ast.Call); ok {
				if a := byText[c.String()]; a != nil {
					return aggResult(a, types[a.col]), true
				}
				if n := legacyBound(c); n != "" && win != nil {
					return windowCol(n), true
				}
			}
			if t := quiet(x); t != "" {
				for i, g := range groupSrc {
					if g == t {
						return ref(fmt.Sprintf("g%d", i)), true
					}
				}
			}
			if c, ok := x.(*ast.ColumnRef); ok {
				n := strings.ToLower(c.Name.Last())
				if win != nil && len(c.Name.Parts) == 1 && (n == colWindowStart || n == colWindowEnd || n == colWindowTime) {
					return windowCol(n), true
				}
				p.errorf(c.Name.At, "column %s is neither in GROUP BY nor inside an aggregate function: add it to GROUP BY or aggregate it (MAX(%s), FIRST_VALUE(%s))", c.Name.Last(), c.Name.Last(), c.Name.Last())
				return x, true
			}
			return nil, false
		})
	}
	keyed := map[string]bool{} // the group columns selected as they are
	for i, it := range s.Items {
		e := post(it.Expr)
		name := itemName(it, i)
		r.cols = append(r.cols, relCol{name: name, expr: e})
		if cr, ok := e.(*ast.ColumnRef); ok && strings.HasPrefix(cr.Name.Last(), "g") && !keyed[cr.Name.Last()] {
			keyed[cr.Name.Last()] = true
			outKey = append(outKey, name)
		}
	}
	if s.Having != nil {
		if r.updating && !p.needRetractions(r, s.Having.Position(), "HAVING on") {
			return nil
		}
		r.where = post(s.Having)
	}
	if r.updating {
		r.key, r.keyless = outKey, nil
		if len(outKey) != len(groups) {
			// Another aggregate may read it (its records stay keyed by
			// the group); a sink could not upsert it (sinkSteps).
			at := s.At
			r.key, r.keyless = nil, &at
		}
	}
	if win != nil {
		r.rowtime = "" // window_time as a time attribute comes with window joins
	}
	return r
}

// windowCol is a window column of the window step's output (window_time
// is the window's last millisecond, as Flink's).
func windowCol(n string) ast.Expr {
	if n == colWindowTime {
		return &ast.Binary{Op: "-", X: ref(colWindowEnd), Y: &ast.Interval{Value: "0.001", Unit: "SECOND"}}
	}
	return ref(n)
}

// legacyBound names the window column TUMBLE_START(…) and its kin stand
// for; "" for another call.
func legacyBound(c *ast.Call) string {
	n := strings.ToUpper(c.Name.Last())
	for _, k := range []string{"TUMBLE", "HOP", "SESSION"} {
		switch n {
		case k + "_START":
			return colWindowStart
		case k + "_END":
			return colWindowEnd
		case k + "_ROWTIME":
			return colWindowTime
		}
	}
	return ""
}

// legacyWindow reads GROUP BY TUMBLE(ts, size), HOP(ts, slide, size),
// SESSION(ts, gap).
func (p *planner) legacyWindow(r *rel, call *ast.Call, kind string) bool {
	want := map[string]int{"TUMBLE": 2, "HOP": 3, "SESSION": 2}[kind]
	if len(call.Args) != want {
		p.errorf(call.At, "GROUP BY %s takes %d arguments: the time column and the interval(s)", kind, want)
		return false
	}
	tc, ok := call.Args[0].(*ast.ColumnRef)
	if !ok {
		p.errorf(call.Args[0].Position(), "GROUP BY %s: the first argument is the time column", kind)
		return false
	}
	ws := &windowSpec{at: call.At, kind: kind, timeCol: tc.Name.Last()}
	switch kind {
	case "TUMBLE":
		ws.size, ok = p.interval(call.Args[1], kind+"'s size")
	case "HOP":
		var ok2 bool
		ws.slide, ok = p.interval(call.Args[1], kind+"'s slide")
		ws.size, ok2 = p.interval(call.Args[2], kind+"'s size")
		ok = ok && ok2
	case "SESSION":
		ws.gap, ok = p.interval(call.Args[1], kind+"'s gap")
	}
	if !ok || !p.checkTimeCol(r, ws, tc.Name.At) {
		return false
	}
	if r.win != nil {
		p.errorf(call.At, "two windows in one GROUP BY")
		return false
	}
	r.win = ws
	return true
}

// aggInput plans one aggregate call's input column.
func (p *planner) aggInput(r *rel, c *ast.Call, i int) *aggCall {
	name := strings.ToUpper(c.Name.Last())
	a := &aggCall{call: c, col: fmt.Sprintf("a%d", i)}
	var arg ast.Expr
	switch {
	case c.Star || (name == "COUNT" && len(c.Args) == 0):
		if name != "COUNT" {
			p.errorf(c.At, "%s(*): only COUNT takes *", name)
			return nil
		}
	case len(c.Args) != 1:
		p.errorf(c.At, "%s takes one argument", name)
		return nil
	default:
		if hasAggregate(c.Args[0]) {
			p.errorf(c.At, "an aggregate inside an aggregate")
			return nil
		}
		arg = p.resolve(r, c.Args[0])
	}
	var filter ast.Expr
	if c.Filter != nil {
		filter = p.resolve(r, c.Filter)
	}
	if c.Distinct && name != "COUNT" {
		p.errorf(c.At, "%s(DISTINCT …) is not supported; COUNT(DISTINCT …) is", name)
		return nil
	}
	one := &ast.Literal{Kind: ast.LitNumber, Value: "1"}
	zero := &ast.Literal{Kind: ast.LitNumber, Value: "0"}
	switch name {
	case "COUNT":
		switch {
		case c.Distinct:
			a.fn = "distinct"
			a.arg = arg
			if filter != nil {
				a.arg = &ast.Case{Whens: []*ast.When{{Cond: &ast.IsBool{X: &ast.Paren{X: filter}, Value: "TRUE"}, Result: arg}}}
			}
		case arg == nil && filter == nil:
			a.fn = "count"
		default: // sum of 1 for each row counted
			a.fn = "sum"
			var cond ast.Expr
			if arg != nil {
				cond = &ast.IsNull{X: &ast.Paren{X: arg}, Not: true}
			}
			if filter != nil {
				f := &ast.IsBool{X: &ast.Paren{X: filter}, Value: "TRUE"}
				if cond == nil {
					cond = f
				} else {
					cond = &ast.Binary{Op: "AND", X: cond, Y: f}
				}
			}
			a.arg = &ast.Case{Whens: []*ast.When{{Cond: cond, Result: one}}, Else: zero}
		}
	default:
		a.fn = map[string]string{"SUM": "sum", "MIN": "min", "MAX": "max", "AVG": "avg", "FIRST_VALUE": "first", "LAST_VALUE": "last"}[name]
		if a.fn == "sum" || a.fn == "avg" {
			a.seen = a.col + "n"
		}
		a.arg = arg
		if filter != nil {
			a.arg = &ast.Case{Whens: []*ast.When{{Cond: &ast.IsBool{X: &ast.Paren{X: filter}, Value: "TRUE"}, Result: arg}}}
		}
	}
	return a
}

// aggType is the SQL type of an aggregate's result, given its input's.
func aggType(a *aggCall, in *ast.Type) *ast.Type {
	switch a.fn {
	case "count", "distinct":
		return &ast.Type{Name: "BIGINT"}
	case "sum":
		if strings.ToUpper(a.call.Name.Last()) == "COUNT" {
			return &ast.Type{Name: "BIGINT"}
		}
		if in != nil && isInteger(in) {
			return &ast.Type{Name: "BIGINT"}
		}
		if in != nil && strings.ToUpper(in.Name) == "DECIMAL" && len(in.Params) == 2 {
			return &ast.Type{Name: "DECIMAL", Params: []int{38, in.Params[1]}}
		}
		return &ast.Type{Name: "DOUBLE"}
	case "avg":
		return &ast.Type{Name: "DOUBLE"}
	}
	if in == nil {
		return &ast.Type{Name: "STRING"}
	}
	return in
}

// aggResult is the expression of an aggregate's value in the result:
// NULL for a SUM or AVG that saw no value but NULLs, as SQL says; and
// Flink's AVG of integers is an integer (truncated), and so is it here.
func aggResult(a *aggCall, in *ast.Type) ast.Expr {
	var e ast.Expr = ref(a.col)
	if a.fn == "avg" && in != nil && isInteger(in) {
		e = &ast.Cast{X: e, To: &ast.Type{Name: "BIGINT"}}
	}
	if a.seen != "" {
		e = &ast.Case{Whens: []*ast.When{{Cond: &ast.Binary{Op: ">", X: ref(a.seen), Y: &ast.Literal{Kind: ast.LitNumber, Value: "0"}}, Result: e}}}
	}
	return e
}

func isInteger(t *ast.Type) bool {
	switch strings.ToUpper(t.Name) {
	case "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT":
		return true
	}
	return false
}

func writeFields(w *yamlWriter, d int, at ast.Pos, fields [][2]string) {
	w.linef(at, d, "fields:")
	for _, f := range fields {
		w.linef(at, d+1, "%s: %s", f[0], q(f[1]))
	}
}

// gcdDuration is the longest whole number of milliseconds dividing a and
// b (at least 1ms).
func gcdDuration(a, b time.Duration) time.Duration {
	x, y := a.Milliseconds(), b.Milliseconds()
	for y != 0 {
		x, y = y, x%y
	}
	return time.Duration(max(x, 1)) * time.Millisecond
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
