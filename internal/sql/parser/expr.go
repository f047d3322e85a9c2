package parser

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Expressions, lowest precedence first:
//
//	OR
//	AND
//	NOT
//	comparison: = <> != < <= > >=, [NOT] BETWEEN, [NOT] IN, [NOT] LIKE,
//	            [NOT] SIMILAR TO, IS [NOT] …
//	||
//	+ -
//	* / %
//	unary - +
//	postfix x[i], x.field

// maxDepth bounds the nesting of expressions and queries, so that a
// hostile script fails with an error instead of exhausting the stack.
const maxDepth = 200

func (p *parser) expr() (ast.Expr, error) {
	if err := p.enter(p.peek()); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.orExpr()
}

func (p *parser) orExpr() (ast.Expr, error) {
	x, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.accept("OR") {
		y, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		x = &ast.Binary{At: x.Position(), Op: "OR", X: x, Y: y}
	}
	return x, nil
}

func (p *parser) andExpr() (ast.Expr, error) {
	x, err := p.notExpr()
	if err != nil {
		return nil, err
	}
	for p.accept("AND") {
		y, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		x = &ast.Binary{At: x.Position(), Op: "AND", X: x, Y: y}
	}
	return x, nil
}

func (p *parser) notExpr() (ast.Expr, error) {
	if t := p.peek(); t.is("NOT") {
		p.advance()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		return &ast.Unary{At: t.pos, Op: "NOT", X: x}, nil
	}
	return p.comparison()
}

// comparisonOps are the binary comparison operators.
var comparisonOps = map[string]string{"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *parser) comparison() (ast.Expr, error) {
	x, err := p.concat()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if op, ok := comparisonOps[t.text]; ok && t.kind == tOp {
			p.advance()
			y, err := p.concat()
			if err != nil {
				return nil, err
			}
			x = &ast.Binary{At: x.Position(), Op: op, X: x, Y: y}
			continue
		}
		if t.is("IS") {
			p.advance()
			not := p.accept("NOT")
			v := p.peek()
			switch {
			case v.is("NULL"):
				p.advance()
				x = &ast.IsNull{At: x.Position(), X: x, Not: not}
			case v.is("TRUE"), v.is("FALSE"), v.is("UNKNOWN"):
				p.advance()
				x = &ast.IsBool{At: x.Position(), X: x, Not: not, Value: v.up}
			case v.is("DISTINCT"):
				p.advance()
				if _, err := p.expect("FROM"); err != nil {
					return nil, err
				}
				y, err := p.concat()
				if err != nil {
					return nil, err
				}
				op := "IS DISTINCT FROM"
				if not {
					op = "IS NOT DISTINCT FROM"
				}
				x = &ast.Binary{At: x.Position(), Op: op, X: x, Y: y}
			default:
				return nil, p.expected("NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS")
			}
			continue
		}
		not := false
		if t.is("NOT") {
			switch n := p.peekAt(1); {
			case n.is("BETWEEN"), n.is("IN"), n.is("LIKE"), n.is("SIMILAR"):
				p.advance()
				not = true
			default:
				return x, nil
			}
		}
		switch t := p.peek(); {
		case t.is("BETWEEN"):
			p.advance()
			b := &ast.Between{At: x.Position(), X: x, Not: not}
			if p.accept("SYMMETRIC") {
				b.Symmetric = true
			} else {
				p.accept("ASYMMETRIC")
			}
			if b.Lo, err = p.concat(); err != nil {
				return nil, err
			}
			if _, err := p.expect("AND"); err != nil {
				return nil, err
			}
			if b.Hi, err = p.concat(); err != nil {
				return nil, err
			}
			x = b
		case t.is("IN"):
			p.advance()
			in := &ast.In{At: x.Position(), X: x, Not: not}
			open, err := p.expectOp("(")
			if err != nil {
				return nil, err
			}
			if p.startsQuery() {
				if in.Query, err = p.subquery(open); err != nil {
					return nil, err
				}
			} else if in.List, err = p.exprList(); err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			x = in
		case t.is("LIKE"), t.is("SIMILAR"):
			p.advance()
			op := "LIKE"
			if t.is("SIMILAR") {
				if _, err := p.expect("TO"); err != nil {
					return nil, err
				}
				op = "SIMILAR TO"
			}
			if not {
				op = "NOT " + op
			}
			y, err := p.concat()
			if err != nil {
				return nil, err
			}
			b := &ast.Binary{At: x.Position(), Op: op, X: x, Y: y}
			if p.accept("ESCAPE") {
				if b.Escape, err = p.concat(); err != nil {
					return nil, err
				}
			}
			x = b
		default:
			return x, nil
		}
	}
}

// binaryLevel parses operands of next joined by the operators ops, left
// associative.
func (p *parser) binaryLevel(next func() (ast.Expr, error), ops ...string) (ast.Expr, error) {
	x, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		matched := false
		for _, op := range ops {
			if t.isOp(op) {
				matched = true
				break
			}
		}
		if !matched {
			return x, nil
		}
		p.advance()
		y, err := next()
		if err != nil {
			return nil, err
		}
		x = &ast.Binary{At: x.Position(), Op: t.text, X: x, Y: y}
	}
}

func (p *parser) concat() (ast.Expr, error) { return p.binaryLevel(p.additive, "||") }

func (p *parser) additive() (ast.Expr, error) {
	return p.binaryLevel(p.multiplicative, "+", "-")
}

func (p *parser) multiplicative() (ast.Expr, error) {
	return p.binaryLevel(p.unary, "*", "/", "%")
}

func (p *parser) unary() (ast.Expr, error) {
	if t := p.peek(); t.isOp("-") || t.isOp("+") {
		p.advance()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &ast.Unary{At: t.pos, Op: t.text, X: x}, nil
	}
	return p.postfix()
}

func (p *parser) postfix() (ast.Expr, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.peek().isOp("["):
			p.advance()
			i, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp("]"); err != nil {
				return nil, err
			}
			x = &ast.Subscript{At: x.Position(), X: x, Index: i}
		case p.peek().isOp(".") && (p.peekAt(1).kind == tWord || p.peekAt(1).kind == tQIdent):
			p.advance()
			f, err := p.anyIdent("a field name")
			if err != nil {
				return nil, err
			}
			x = &ast.Field{At: x.Position(), X: x, Name: f}
		default:
			return x, nil
		}
	}
}

// enter counts one level of nesting, failing past maxDepth.
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > maxDepth {
		return p.errAt(t, fmt.Sprintf("nested too deeply (more than %d levels)", maxDepth))
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// niladic are the functions called without parentheses.
var niladic = map[string]bool{
	"CURRENT_TIMESTAMP": true, "CURRENT_DATE": true, "CURRENT_TIME": true,
	"LOCALTIMESTAMP": true, "LOCALTIME": true,
}

// keywordFuncs are reserved words that are also function names when a
// parenthesis follows.
var keywordFuncs = map[string]bool{
	"LEFT": true, "RIGHT": true, "INSERT": true,
	"CURRENT_TIMESTAMP": true, "CURRENT_DATE": true, "CURRENT_TIME": true,
	"LOCALTIMESTAMP": true, "LOCALTIME": true,
}

func (p *parser) primary() (ast.Expr, error) {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.advance()
		return &ast.Literal{At: t.pos, Kind: ast.LitNumber, Value: t.text}, nil
	case tString:
		p.advance()
		return &ast.Literal{At: t.pos, Kind: ast.LitString, Value: t.text}, nil
	case tQIdent:
		return p.nameOrCall()
	case tOp:
		if t.text != "(" {
			break
		}
		p.advance()
		if p.startsQuery() {
			q, err := p.subquery(t)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return &ast.Subquery{At: t.pos, Query: q}, nil
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return &ast.Paren{At: t.pos, X: x}, nil
	case tWord:
		switch t.up {
		case "TRUE", "FALSE":
			p.advance()
			return &ast.Literal{At: t.pos, Kind: ast.LitBool, Value: t.up}, nil
		case "NULL":
			p.advance()
			return &ast.Literal{At: t.pos, Kind: ast.LitNull, Value: "NULL"}, nil
		case "CASE":
			return p.caseExpr()
		case "CAST", "TRY_CAST":
			return p.cast()
		case "INTERVAL":
			return p.interval()
		case "EXISTS":
			p.advance()
			open, err := p.expectOp("(")
			if err != nil {
				return nil, err
			}
			if !p.startsQuery() {
				return nil, p.expected("a query after EXISTS (")
			}
			q, err := p.subquery(open)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return &ast.Subquery{At: t.pos, Query: q, Exists: true}, nil
		case "ARRAY", "MAP":
			if p.peekAt(1).isOp("[") {
				p.advance()
				p.advance()
				args, err := p.exprList()
				if err != nil {
					return nil, err
				}
				if _, err := p.expectOp("]"); err != nil {
					return nil, err
				}
				return &ast.Call{At: t.pos, Name: funcName(t), Args: args}, nil
			}
		case "TIMESTAMP", "DATE", "TIME":
			if n := p.peekAt(1); n.kind == tString {
				p.advance()
				p.advance()
				return &ast.Literal{At: t.pos, Kind: map[string]string{"TIMESTAMP": ast.LitTime, "DATE": ast.LitDate, "TIME": ast.LitTimeDay}[t.up], Value: n.text}, nil
			}
		}
		if niladic[t.up] && !p.peekAt(1).isOp("(") {
			p.advance()
			return &ast.Call{At: t.pos, Name: ast.Name{At: t.pos, Parts: []ast.Ident{{At: t.pos, Name: t.text}}}}, nil
		}
		if p.peekAt(1).isOp("(") {
			switch t.up {
			case "TRIM":
				return p.trim()
			case "SUBSTRING":
				return p.substring()
			case "EXTRACT":
				return p.extract()
			case "POSITION":
				return p.position()
			}
			if keywordFuncs[t.up] {
				p.advance()
				return p.call(ast.Name{At: t.pos, Parts: []ast.Ident{{At: t.pos, Name: t.text}}})
			}
		}
		if reserved[t.up] {
			return nil, p.errAt(t, fmt.Sprintf("expected an expression, found the reserved word %s", t.up))
		}
		return p.nameOrCall()
	}
	return nil, p.expected("an expression")
}

// nameOrCall parses a column reference a.b.c or a call f(…).
func (p *parser) nameOrCall() (ast.Expr, error) {
	n, err := p.name("a name")
	if err != nil {
		return nil, err
	}
	if p.peek().isOp("(") {
		return p.call(n)
	}
	return &ast.ColumnRef{Name: n}, nil
}

// call parses the arguments of a call to the function n, and its FILTER
// and OVER clauses.
func (p *parser) call(n ast.Name) (ast.Expr, error) {
	open, err := p.expectOp("(")
	if err != nil {
		return nil, err
	}
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	c := &ast.Call{At: n.At, Name: n}
	switch {
	case p.peek().isOp("*") && p.peekAt(1).isOp(")"):
		p.advance()
		c.Star = true
	case p.peek().isOp(")"):
	default:
		if p.accept("DISTINCT") {
			c.Distinct = true
		} else {
			p.accept("ALL")
		}
		if c.Args, err = p.exprList(); err != nil {
			return nil, err
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if p.peek().is("FILTER") && p.peekAt(1).isOp("(") {
		p.advance()
		p.advance()
		if _, err := p.expect("WHERE"); err != nil {
			return nil, err
		}
		if c.Filter, err = p.expr(); err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if p.peek().is("OVER") {
		if c.Over, err = p.window(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// window parses OVER ( [PARTITION BY …] [ORDER BY …] [frame] ).
func (p *parser) window() (*ast.Window, error) {
	over := p.advance()
	w := &ast.Window{At: over.pos}
	if !p.peek().isOp("(") {
		return nil, p.expected(`"(" after OVER (named windows are not supported)`)
	}
	p.advance()
	var err error
	if p.acceptSeq("PARTITION", "BY") {
		if w.PartitionBy, err = p.exprList(); err != nil {
			return nil, err
		}
	}
	if p.acceptSeq("ORDER", "BY") {
		if w.OrderBy, err = p.orderItems(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); t.is("ROWS") || t.is("RANGE") {
		var parts []string
		depth := 0
		for {
			t := p.peek()
			if t.kind == tEOF {
				return nil, p.expected(`")" closing OVER (`)
			}
			if t.isOp(")") {
				if depth == 0 {
					break
				}
				depth--
			}
			if t.isOp("(") {
				depth++
			}
			parts = append(parts, canonical(t))
			p.advance()
		}
		w.Frame = joinTokens(parts)
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return w, nil
}

// canonical is a token as the printer writes it: keywords upper case,
// strings and quoted names quoted.
func canonical(t token) string {
	switch t.kind {
	case tWord:
		return t.up
	case tString:
		return quoteString(t.text)
	case tQIdent:
		return "`" + strings.ReplaceAll(t.text, "`", "``") + "`"
	}
	return t.text
}

// joinTokens joins printed tokens with spaces, except around parentheses.
func joinTokens(parts []string) string {
	var b strings.Builder
	for i, s := range parts {
		if i > 0 && s != ")" && s != "," && parts[i-1] != "(" {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}

// orderItems parses expr [ASC|DESC] [NULLS FIRST|LAST] {, …}.
func (p *parser) orderItems() ([]*ast.OrderItem, error) {
	var items []*ast.OrderItem
	for {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		it := &ast.OrderItem{At: x.Position(), Expr: x}
		if p.accept("DESC") {
			it.Desc = true
		} else {
			p.accept("ASC")
		}
		if p.accept("NULLS") {
			switch {
			case p.accept("FIRST"):
				first := true
				it.NullsFirst = &first
			case p.accept("LAST"):
				first := false
				it.NullsFirst = &first
			default:
				return nil, p.expected("FIRST or LAST after NULLS")
			}
		}
		items = append(items, it)
		if !p.acceptOp(",") {
			return items, nil
		}
	}
}

// exprList parses expr {, expr}.
func (p *parser) exprList() ([]ast.Expr, error) {
	var xs []ast.Expr
	for {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
		if !p.acceptOp(",") {
			return xs, nil
		}
	}
}

func (p *parser) caseExpr() (ast.Expr, error) {
	t := p.advance()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	c := &ast.Case{At: t.pos}
	var err error
	if !p.peek().is("WHEN") {
		if c.Operand, err = p.expr(); err != nil {
			return nil, err
		}
	}
	for p.accept("WHEN") {
		w := &ast.When{}
		if w.Cond, err = p.expr(); err != nil {
			return nil, err
		}
		if _, err := p.expect("THEN"); err != nil {
			return nil, err
		}
		if w.Result, err = p.expr(); err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, w)
	}
	if len(c.Whens) == 0 {
		return nil, p.expected("WHEN in CASE")
	}
	if p.accept("ELSE") {
		if c.Else, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if !p.accept("END") {
		if c.Else != nil {
			return nil, p.expected("END closing CASE")
		}
		return nil, p.expected("WHEN, ELSE or END in CASE")
	}
	return c, nil
}

func (p *parser) cast() (ast.Expr, error) {
	t := p.advance()
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	c := &ast.Cast{At: t.pos, Try: t.up == "TRY_CAST"}
	var err error
	if c.X, err = p.expr(); err != nil {
		return nil, err
	}
	if !p.accept("AS") {
		return nil, p.expected(fmt.Sprintf("AS in %s(value AS type)", t.up))
	}
	if c.To, err = p.dataType(); err != nil {
		return nil, err
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return c, nil
}

// intervalUnits maps the units an INTERVAL takes, plural too, to their
// names.
var intervalUnits = map[string]string{
	"YEAR": "YEAR", "YEARS": "YEAR", "MONTH": "MONTH", "MONTHS": "MONTH",
	"DAY": "DAY", "DAYS": "DAY", "HOUR": "HOUR", "HOURS": "HOUR",
	"MINUTE": "MINUTE", "MINUTES": "MINUTE", "SECOND": "SECOND", "SECONDS": "SECOND",
}

// interval parses INTERVAL 'v' UNIT [(p)] [TO UNIT [(p)]].
func (p *parser) interval() (ast.Expr, error) {
	t := p.advance()
	iv := &ast.Interval{At: t.pos}
	switch v := p.peek(); {
	case v.kind == tString, v.kind == tNumber:
		p.advance()
		iv.Value = v.text
	case v.isOp("-") && p.peekAt(1).kind == tNumber:
		p.advance()
		iv.Value = "-" + p.advance().text
	default:
		return nil, p.expected("the interval's value as a quoted string (INTERVAL '10' SECOND)")
	}
	var err error
	if iv.Unit, iv.Precision, err = p.intervalUnit(); err != nil {
		return nil, err
	}
	if p.accept("TO") {
		if iv.ToUnit, iv.ToPrecision, err = p.intervalUnit(); err != nil {
			return nil, err
		}
	}
	return iv, nil
}

func (p *parser) intervalUnit() (string, int, error) {
	t := p.peek()
	u, ok := intervalUnits[t.up]
	if t.kind != tWord || !ok {
		return "", 0, p.expected("an interval unit (YEAR, MONTH, DAY, HOUR, MINUTE or SECOND)")
	}
	p.advance()
	prec := 0
	if p.peek().isOp("(") && p.peekAt(1).kind == tNumber {
		p.advance()
		n, err := p.intParam()
		if err != nil {
			return "", 0, err
		}
		prec = n
		if _, err := p.expectOp(")"); err != nil {
			return "", 0, err
		}
	}
	return u, prec, nil
}

// intParam parses a non-negative integer (a type's or unit's parameter).
func (p *parser) intParam() (int, error) {
	t := p.peek()
	if t.kind != tNumber {
		return 0, p.expected("an integer")
	}
	n, err := strconv.Atoi(t.text)
	if err != nil || n < 0 || n > 1<<30 {
		return 0, p.errAt(t, fmt.Sprintf("expected an integer, found %s", t.describe()))
	}
	p.advance()
	return n, nil
}

// funcName is the name of a special function at token t.
func funcName(t token) ast.Name {
	return ast.Name{At: t.pos, Parts: []ast.Ident{{At: t.pos, Name: t.text}}}
}

// trim parses TRIM([BOTH|LEADING|TRAILING] [chars] FROM s) as a call
// TRIM('BOTH', chars, s) (chars ' ' when not written), and TRIM(s) as a
// call of one argument.
func (p *parser) trim() (ast.Expr, error) {
	t := p.advance()
	open := p.advance()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	c := &ast.Call{At: t.pos, Name: funcName(t)}
	flag := ""
	if f := p.peek(); f.is("BOTH") || f.is("LEADING") || f.is("TRAILING") {
		p.advance()
		flag = f.up
	}
	var chars ast.Expr = &ast.Literal{At: t.pos, Kind: ast.LitString, Value: " "}
	if !p.accept("FROM") {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.accept("FROM") {
			if flag != "" {
				return nil, p.expected("FROM in TRIM(" + flag + " … FROM value)")
			}
			c.Args = []ast.Expr{x}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return c, nil
		}
		chars = x
	}
	if flag == "" {
		flag = "BOTH"
	}
	s, err := p.expr()
	if err != nil {
		return nil, err
	}
	c.Args = []ast.Expr{&ast.Literal{At: t.pos, Kind: ast.LitString, Value: flag}, chars, s}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return c, nil
}

// substring parses SUBSTRING(s FROM a [FOR b]) as SUBSTRING(s, a[, b]),
// and SUBSTRING(s, a, b) as any call.
func (p *parser) substring() (ast.Expr, error) {
	t := p.advance()
	open := p.advance()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	c := &ast.Call{At: t.pos, Name: funcName(t)}
	s, err := p.expr()
	if err != nil {
		return nil, err
	}
	c.Args = []ast.Expr{s}
	switch {
	case p.accept("FROM"):
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, a)
		if p.accept("FOR") {
			b, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, b)
		}
	case p.acceptOp(","):
		rest, err := p.exprList()
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, rest...)
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return c, nil
}

// extract parses EXTRACT(unit FROM x) as a call EXTRACT('UNIT', x).
func (p *parser) extract() (ast.Expr, error) {
	t := p.advance()
	p.advance()
	u := p.peek()
	if u.kind != tWord {
		return nil, p.expected("a time unit in EXTRACT(unit FROM value)")
	}
	p.advance()
	if _, err := p.expect("FROM"); err != nil {
		return nil, err
	}
	x, err := p.expr()
	if err != nil {
		return nil, err
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	unit := u.up
	if n, ok := intervalUnits[unit]; ok {
		unit = n
	}
	return &ast.Call{At: t.pos, Name: funcName(t), Args: []ast.Expr{&ast.Literal{At: u.pos, Kind: ast.LitString, Value: unit}, x}}, nil
}

// position parses POSITION(a IN b) as a call POSITION(a, b).
func (p *parser) position() (ast.Expr, error) {
	t := p.advance()
	open := p.advance()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	a, err := p.concat()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect("IN"); err != nil {
		return nil, err
	}
	b, err := p.expr()
	if err != nil {
		return nil, err
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return &ast.Call{At: t.pos, Name: funcName(t), Args: []ast.Expr{a, b}}, nil
}
