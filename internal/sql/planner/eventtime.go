package planner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// A table's WATERMARK becomes the job's event-time section (in the named
// form, its source's: each table has its own): the time
// column's expression, written in the pipeline's expression language
// over the record as the source reads it (the source stamps every record
// with it and computes the watermarks: docs/design.md, "Event time"), and
// the watermark's delay as max-out-of-orderness.

func (p *planner) eventTimeSection(w *yamlWriter, set *settings) {
	t := p.timeTable
	if t == nil && len(p.timeTables) > 0 {
		t = p.timeTables[0]
	}
	if t == nil {
		if lines := set.lines["event-time"]; len(lines) > 0 {
			p.notes = append(p.notes, "SET 'table.exec.source.idle-timeout' applies to event time, which this job does not use")
		}
		return
	}
	p.writeEventTime(w, t, set, 0)
}

// useTime marks t as a table whose event time the job needs.
func (p *planner) useTime(t *table) {
	if !p.usesTime(t) {
		p.timeTables = append(p.timeTables, t)
	}
}

func (p *planner) usesTime(t *table) bool {
	for _, x := range p.timeTables {
		if x == t {
			return true
		}
	}
	return false
}

// writeEventTime writes the event-time section of t at depth d: the
// job's (d 0), or in the named form its source's.
func (p *planner) writeEventTime(w *yamlWriter, t *table, set *settings, d int) {
	wm := t.watermark
	if c := t.col(wm.Column.Name); t.format() != "json" && (c == nil || !c.Metadata) {
		// The source stamps each record with its time before any step
		// runs, reading the value as JSON (docs/design.md, "Event time").
		p.errorf(wm.At, "table %s: event time (WATERMARK) is read from JSON values; a '%s' table cannot have one yet", t.name, t.format())
		return
	}
	col := t.col(wm.Column.Name)
	if col == nil {
		return // reported by createTable
	}
	var e ast.Expr = ref(col.Name.Name)
	ts, err := p.exprLang(t, e, 0)
	if err != nil {
		p.errorf(col.At, "the event time of %s: %v", t.name, err)
		return
	}
	delay := "0s"
	switch x := unparen(wm.Expr).(type) {
	case *ast.ColumnRef:
		if !strings.EqualFold(x.Name.Last(), wm.Column.Name) || len(x.Name.Parts) != 1 {
			p.errorf(wm.At, "WATERMARK FOR %s AS …: write %s - INTERVAL 'n' SECOND, the time column less the delay records may come late by", wm.Column.Name, wm.Column.Name)
			return
		}
	case *ast.Binary:
		c, ok := unparen(x.X).(*ast.ColumnRef)
		iv, ok2 := unparen(x.Y).(*ast.Interval)
		if x.Op != "-" || !ok || !ok2 || !strings.EqualFold(c.Name.Last(), wm.Column.Name) {
			p.errorf(wm.At, "WATERMARK FOR %s AS …: write %s - INTERVAL 'n' SECOND, the time column less the delay records may come late by", wm.Column.Name, wm.Column.Name)
			return
		}
		d, err := intervalDuration(iv)
		if err != nil {
			p.errorf(iv.At, "WATERMARK: %v", err)
			return
		}
		delay = goDuration(d)
	default:
		p.errorf(wm.At, "WATERMARK FOR %s AS …: write %s - INTERVAL 'n' SECOND, the time column less the delay records may come late by", wm.Column.Name, wm.Column.Name)
		return
	}
	w.linef(wm.At, d, "event-time:")
	w.linef(col.At, d+1, "timestamp: %s", q(ts))
	w.linef(wm.At, d+1, "max-out-of-orderness: %s", delay)
	for _, l := range set.lines["event-time"] {
		w.linef(set.at["event-time."+l[0]], d+1, "%s: %s", l[0], l[1])
	}
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.Paren)
		if !ok {
			return e
		}
		e = p.X
	}
}

// exprLang writes e, an expression over t's columns, in the pipeline's
// expression language over the record read from t's topic; times come
// out in ms since the epoch.
func (p *planner) exprLang(t *table, e ast.Expr, depth int) (string, error) {
	if depth > 32 {
		return "", fmt.Errorf("the computed columns refer to each other in a cycle")
	}
	sub := func(x ast.Expr) (string, error) { return p.exprLang(t, x, depth+1) }
	switch n := e.(type) {
	case *ast.Paren:
		s, err := sub(n.X)
		return "(" + s + ")", err
	case *ast.Literal:
		switch n.Kind {
		case ast.LitNumber:
			return n.Value, nil
		case ast.LitString:
			return strconv.Quote(n.Value), nil
		case ast.LitBool:
			return strings.ToLower(n.Value), nil
		case ast.LitNull:
			return "nil", nil
		}
	case *ast.ColumnRef:
		parts := n.Name.Parts
		if len(parts) > 1 && strings.EqualFold(parts[0].Name, t.name) {
			parts = parts[1:]
		}
		c := t.col(parts[0].Name)
		if c == nil {
			return "", fmt.Errorf("%s is not a column of %s", parts[0].Name, t.name)
		}
		if c.Expr != nil {
			if len(parts) > 1 {
				return "", fmt.Errorf("a field of the computed column %s", c.Name.Name)
			}
			return sub(c.Expr)
		}
		if c.Metadata {
			key := c.MetadataKey
			if key == "" {
				key = c.Name.Name
			}
			switch key {
			case "timestamp", "partition", "offset", "topic", "key":
				return key, nil
			}
			return "", fmt.Errorf("metadata %s cannot be a time", key)
		}
		path := valuePath(c.Name.Name)
		typ := c.Type
		for _, f := range parts[1:] {
			var next *ast.Type
			if typ != nil {
				for _, rf := range typ.Fields {
					if strings.EqualFold(rf.Name.Name, f.Name) {
						next = rf.Type
					}
				}
			}
			if next == nil {
				return "", fmt.Errorf("%s has no field %s", c.Name.Name, f.Name)
			}
			typ = next
			path += fieldPath(f.Name)
		}
		if typ != nil && strings.HasPrefix(strings.ToUpper(typ.Name), "TIMESTAMP") {
			return "to_timestamp(" + path + ")", nil
		}
		return path, nil
	case *ast.Case:
		var b strings.Builder
		closing := 0
		for _, wh := range n.Whens {
			cond := wh.Cond
			if n.Operand != nil {
				cond = &ast.Binary{Op: "=", X: n.Operand, Y: wh.Cond}
			}
			c, err := sub(cond)
			if err != nil {
				return "", err
			}
			r, err := sub(wh.Result)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "(%s) ? (%s) : (", c, r)
			closing++
		}
		els := "nil"
		if n.Else != nil {
			var err error
			if els, err = sub(n.Else); err != nil {
				return "", err
			}
		}
		b.WriteString(els)
		b.WriteString(strings.Repeat(")", closing))
		return b.String(), nil
	case *ast.Binary:
		ops := map[string]string{"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "AND": "&&", "OR": "||", "+": "+", "-": "-", "*": "*", "/": "/"}
		op, ok := ops[strings.ToUpper(n.Op)]
		if !ok {
			break
		}
		x, err := sub(n.X)
		if err != nil {
			return "", err
		}
		var y string
		if iv, isIv := unparen(n.Y).(*ast.Interval); isIv && (op == "+" || op == "-") {
			d, err := intervalDuration(iv)
			if err != nil {
				return "", err
			}
			y = strconv.FormatInt(d.Milliseconds(), 10)
		} else if y, err = sub(n.Y); err != nil {
			return "", err
		}
		return "(" + x + " " + op + " " + y + ")", nil
	case *ast.Cast:
		if strings.HasPrefix(strings.ToUpper(n.To.Name), "TIMESTAMP") {
			x, err := sub(n.X)
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(x, "to_timestamp(") {
				return x, nil
			}
			return "to_timestamp(" + x + ")", nil
		}
	case *ast.Call:
		switch strings.ToUpper(n.Name.Last()) {
		case "TO_TIMESTAMP":
			var args []string
			for _, a := range n.Args {
				s, err := sub(a)
				if err != nil {
					return "", err
				}
				args = append(args, s)
			}
			return "to_timestamp(" + strings.Join(args, ", ") + ")", nil
		case "TO_TIMESTAMP_LTZ":
			if len(n.Args) != 2 {
				break
			}
			x, err := sub(n.Args[0])
			if err != nil {
				return "", err
			}
			if l, ok := n.Args[1].(*ast.Literal); ok {
				switch l.Value {
				case "3":
					return x, nil
				case "0":
					return "(" + x + " * 1000)", nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s cannot be an event time yet: write a column, TO_TIMESTAMP(…), TO_TIMESTAMP_LTZ(…, 3), CAST(… AS TIMESTAMP(3)) or a CASE of them", e.String())
}
