package parser

import (
	"fmt"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// startsQuery reports whether a query starts at the current token.
func (p *parser) startsQuery() bool {
	t := p.peek()
	return t.is("SELECT") || t.is("WITH")
}

// subquery parses a query nested in parentheses opened by open.
func (p *parser) subquery(open token) (*ast.Query, error) {
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.query()
}

// query parses [WITH cte, …] body [ORDER BY …] [LIMIT n].
func (p *parser) query() (*ast.Query, error) {
	q := &ast.Query{At: p.peek().pos}
	if p.accept("WITH") {
		for {
			c, err := p.cte()
			if err != nil {
				return nil, err
			}
			q.With = append(q.With, c)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	var err error
	if q.Body, err = p.setExpr(1); err != nil {
		return nil, err
	}
	if p.acceptSeq("ORDER", "BY") {
		if q.OrderBy, err = p.orderItems(); err != nil {
			return nil, err
		}
	}
	if p.accept("LIMIT") {
		if q.Limit, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// cte parses name [(cols)] AS (query).
func (p *parser) cte() (*ast.CTE, error) {
	n, err := p.ident("the name of a WITH query")
	if err != nil {
		return nil, err
	}
	c := &ast.CTE{At: n.At, Name: n}
	if p.peek().isOp("(") {
		if c.Columns, err = p.identList("a column name"); err != nil {
			return nil, err
		}
	}
	if _, err := p.expect("AS"); err != nil {
		return nil, err
	}
	open, err := p.expectOp("(")
	if err != nil {
		return nil, err
	}
	if c.Query, err = p.subquery(open); err != nil {
		return nil, err
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return c, nil
}

// setOpPrec is the binding of the set operators: INTERSECT tighter.
func setOpPrec(t token) int {
	switch {
	case t.is("UNION"), t.is("EXCEPT"):
		return 1
	case t.is("INTERSECT"):
		return 2
	}
	return 0
}

// setExpr parses query bodies joined by set operators of precedence at
// least minPrec, left associative.
func (p *parser) setExpr(minPrec int) (ast.SetExpr, error) {
	left, err := p.setOperand()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec := setOpPrec(t)
		if prec == 0 || prec < minPrec {
			return left, nil
		}
		p.advance()
		op := &ast.SetOp{At: left.Position(), Op: t.up, Left: left}
		if p.accept("ALL") {
			op.All = true
		} else {
			p.accept("DISTINCT")
		}
		if op.Right, err = p.setExpr(prec + 1); err != nil {
			return nil, err
		}
		left = op
	}
}

// setOperand parses a SELECT or a parenthesized query.
func (p *parser) setOperand() (ast.SetExpr, error) {
	t := p.peek()
	switch {
	case t.is("SELECT"):
		return p.selectBlock()
	case t.isOp("("):
		p.advance()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		q, err := p.query()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return q, nil
	case t.is("VALUES"):
		return nil, p.errAt(t, "VALUES is not supported; write SELECT … (UNION ALL SELECT …)")
	}
	return nil, p.expected("SELECT")
}

func (p *parser) selectBlock() (*ast.Select, error) {
	t := p.advance()
	s := &ast.Select{At: t.pos}
	var err error
	if s.Hints, err = p.hints(); err != nil {
		return nil, err
	}
	if p.accept("DISTINCT") {
		s.Distinct = true
	} else {
		p.accept("ALL")
	}
	for {
		it, err := p.selectItem()
		if err != nil {
			return nil, err
		}
		s.Items = append(s.Items, it)
		if !p.acceptOp(",") {
			break
		}
	}
	if p.accept("FROM") {
		if s.From, err = p.from(); err != nil {
			return nil, err
		}
	}
	if p.accept("WHERE") {
		if s.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if p.acceptSeq("GROUP", "BY") {
		if s.GroupBy, err = p.exprList(); err != nil {
			return nil, err
		}
	}
	if p.accept("HAVING") {
		if s.Having, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// selectItem parses *, t.*, or expr [[AS] alias].
func (p *parser) selectItem() (*ast.SelectItem, error) {
	t := p.peek()
	if t.isOp("*") {
		p.advance()
		return &ast.SelectItem{At: t.pos, Star: true}, nil
	}
	// t.* : names joined by dots, then a dot and a star.
	if n := p.qualifiedStarLen(); n > 0 {
		q, err := p.name("a table name")
		if err != nil {
			return nil, err
		}
		p.advance() // .
		p.advance() // *
		return &ast.SelectItem{At: t.pos, Star: true, Qualifier: &q}, nil
	}
	x, err := p.expr()
	if err != nil {
		return nil, err
	}
	it := &ast.SelectItem{At: x.Position(), Expr: x}
	if it.Alias, err = p.alias(); err != nil {
		return nil, err
	}
	return it, nil
}

// qualifiedStarLen is the number of tokens of a `a.b.*` ahead, 0 if none.
func (p *parser) qualifiedStarLen() int {
	n := 0
	for {
		t := p.peekAt(n)
		if !(t.kind == tQIdent || (t.kind == tWord && (n > 0 || !reserved[t.up]))) {
			return 0
		}
		if !p.peekAt(n + 1).isOp(".") {
			return 0
		}
		if p.peekAt(n + 2).isOp("*") {
			return n + 3
		}
		n += 2
	}
}

// alias parses [AS] alias; nil when there is none.
func (p *parser) alias() (*ast.Ident, error) {
	if p.accept("AS") {
		id, err := p.ident("an alias after AS")
		if err != nil {
			return nil, err
		}
		return &id, nil
	}
	t := p.peek()
	if t.kind == tQIdent || (t.kind == tWord && !reserved[t.up] && !aliasStop[t.up]) {
		id, err := p.ident("an alias")
		if err != nil {
			return nil, err
		}
		return &id, nil
	}
	return nil, nil
}

// joinKinds maps the words starting a join to its kind.
var joinKinds = map[string]string{"JOIN": "INNER", "INNER": "INNER", "LEFT": "LEFT", "RIGHT": "RIGHT", "FULL": "FULL", "CROSS": "CROSS"}

// from parses ref {[kind] JOIN ref [ON … | USING (…)] | , ref}.
func (p *parser) from() (ast.TableExpr, error) {
	left, err := p.tableRef()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.isOp(",") {
			p.advance()
			right, err := p.tableRef()
			if err != nil {
				return nil, err
			}
			left = &ast.Join{At: left.Position(), Kind: "CROSS", Left: left, Right: right, Comma: true}
			continue
		}
		if t.is("NATURAL") {
			return nil, p.errAt(t, "NATURAL JOIN is not supported; join with ON or USING")
		}
		kind, ok := joinKinds[t.up]
		if t.kind != tWord || !ok {
			return left, nil
		}
		p.advance()
		if !t.is("JOIN") {
			if kind == "LEFT" || kind == "RIGHT" || kind == "FULL" {
				p.accept("OUTER")
			}
			if _, err := p.expect("JOIN"); err != nil {
				return nil, err
			}
		}
		right, err := p.tableRef()
		if err != nil {
			return nil, err
		}
		j := &ast.Join{At: left.Position(), Kind: kind, Left: left, Right: right}
		switch {
		case kind == "CROSS":
		case p.accept("ON"):
			if j.On, err = p.expr(); err != nil {
				return nil, err
			}
		case p.peek().is("USING"):
			p.advance()
			if j.Using, err = p.identList("a column name"); err != nil {
				return nil, err
			}
		default:
			return nil, p.expected(fmt.Sprintf("ON or USING after the table of the %s JOIN", kind))
		}
		left = j
	}
}

// tableRef parses one table of a FROM: a name, a subquery, a table
// function call.
func (p *parser) tableRef() (ast.TableExpr, error) {
	t := p.peek()
	switch {
	case t.isOp("("):
		p.advance()
		if !p.startsQuery() && !p.peek().isOp("(") {
			return nil, p.expected("a query in parentheses in FROM")
		}
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		q, err := p.query()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		ref := &ast.SubqueryRef{At: t.pos, Query: q}
		if ref.Alias, err = p.alias(); err != nil {
			return nil, err
		}
		if ref.AliasColumns, err = p.aliasColumns(ref.Alias); err != nil {
			return nil, err
		}
		return ref, nil
	case t.is("LATERAL"):
		return nil, p.errAt(t, "LATERAL TABLE(…) (a table function per row) is not supported")
	case t.is("UNNEST"):
		return nil, p.errAt(t, "UNNEST is not supported")
	case t.is("TABLE") && p.peekAt(1).isOp("("):
		p.advance()
		p.advance()
		n, err := p.ident("a table function name")
		if err != nil {
			return nil, err
		}
		f, err := p.tableFunc(n)
		if err != nil {
			return nil, err
		}
		f.At, f.Wrapped = t.pos, true
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		if f.Alias, err = p.alias(); err != nil {
			return nil, err
		}
		return f, nil
	}
	n, err := p.name("a table name")
	if err != nil {
		return nil, err
	}
	if p.peek().isOp("(") {
		if len(n.Parts) > 1 {
			return nil, p.errAt(t, "a table function's name is one word, as TUMBLE")
		}
		f, err := p.tableFunc(n.Parts[0])
		if err != nil {
			return nil, err
		}
		if f.Alias, err = p.alias(); err != nil {
			return nil, err
		}
		return f, nil
	}
	ref := &ast.TableRef{At: n.At, Name: n}
	if ref.Hints, err = p.hints(); err != nil {
		return nil, err
	}
	if p.acceptSeq("FOR", "SYSTEM_TIME") {
		if !p.acceptSeq("AS", "OF") {
			return nil, p.expected("AS OF after FOR SYSTEM_TIME")
		}
		if ref.SystemTime, err = p.concat(); err != nil {
			return nil, err
		}
	}
	if ref.Alias, err = p.alias(); err != nil {
		return nil, err
	}
	if ref.AliasColumns, err = p.aliasColumns(ref.Alias); err != nil {
		return nil, err
	}
	return ref, nil
}

// hints parses the /*+ … */ comments written before the current token.
func (p *parser) hints() ([]*ast.Hint, error) {
	var all []*ast.Hint
	for _, h := range p.peek().hints {
		hs, err := parseHints(h)
		if err != nil {
			return nil, err
		}
		all = append(all, hs...)
	}
	return all, nil
}

// aliasColumns parses the (cols) after an alias.
func (p *parser) aliasColumns(alias *ast.Ident) ([]ast.Ident, error) {
	if alias == nil || !p.peek().isOp("(") {
		return nil, nil
	}
	return p.identList("a column name")
}

// tableFunc parses the arguments of the table function name: (arg, …).
func (p *parser) tableFunc(name ast.Ident) (*ast.TableFunc, error) {
	open, err := p.expectOp("(")
	if err != nil {
		return nil, err
	}
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	f := &ast.TableFunc{At: name.At, Name: name}
	if !p.peek().isOp(")") {
		for {
			a, err := p.funcArg()
			if err != nil {
				return nil, err
			}
			f.Args = append(f.Args, a)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return f, nil
}

// funcArg parses [name =>] (TABLE t [PARTITION BY …] | DESCRIPTOR(…) | expr).
func (p *parser) funcArg() (*ast.FuncArg, error) {
	a := &ast.FuncArg{At: p.peek().pos}
	if t := p.peek(); (t.kind == tWord || t.kind == tQIdent) && p.peekAt(1).isOp("=>") {
		id, err := p.anyIdent("an argument name")
		if err != nil {
			return nil, err
		}
		p.advance()
		a.Named = &id
	}
	var err error
	switch t := p.peek(); {
	case t.is("TABLE"):
		p.advance()
		n, err := p.name("a table name after TABLE")
		if err != nil {
			return nil, err
		}
		a.Table = &n
		if p.acceptSeq("PARTITION", "BY") {
			if p.peek().isOp("(") {
				if a.PartitionBy, err = p.identList("a column name"); err != nil {
					return nil, err
				}
			} else {
				id, err := p.anyIdent("a column name")
				if err != nil {
					return nil, err
				}
				a.PartitionBy = []ast.Ident{id}
			}
		}
	case t.is("DESCRIPTOR") && p.peekAt(1).isOp("("):
		p.advance()
		if a.Descriptor, err = p.identList("a column name"); err != nil {
			return nil, err
		}
	default:
		if a.Expr, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// parseHints parses the body of a /*+ … */ comment: NAME[(args)] {, …},
// each argument 'key' = 'value' or a bare word or string.
func parseHints(h hintText) ([]*ast.Hint, error) {
	toks, err := lexAt(h.body, h.pos)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	var hints []*ast.Hint
	for {
		t := p.peek()
		if t.kind != tWord {
			return nil, p.expected("a hint name, as /*+ STATE_TTL('t' = '1d') */")
		}
		p.advance()
		hint := &ast.Hint{At: t.pos, Name: t.text}
		if p.acceptOp("(") && !p.acceptOp(")") {
			for {
				a := p.peek()
				switch {
				case a.kind == tString && p.peekAt(1).isOp("="):
					p.advance()
					p.advance()
					v, vat, err := p.stringLit("the hint option's value as a quoted string")
					if err != nil {
						return nil, err
					}
					hint.Options = append(hint.Options, &ast.Option{At: a.pos, Key: a.text, Value: v, ValueAt: vat})
				case a.kind == tString, a.kind == tWord, a.kind == tQIdent, a.kind == tNumber:
					p.advance()
					hint.Args = append(hint.Args, a.text)
				default:
					return nil, p.expected("a hint argument")
				}
				if !p.acceptOp(",") {
					break
				}
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
		}
		hints = append(hints, hint)
		if !p.acceptOp(",") {
			break
		}
	}
	if err := p.end("the hint"); err != nil {
		return nil, err
	}
	return hints, nil
}
