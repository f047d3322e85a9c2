package parser

import (
	"github.com/onceflow/onceflow/internal/sql/ast"
)

// dataType parses a type: NAME [(n [, m])] [WITH LOCAL TIME ZONE |
// WITHOUT TIME ZONE] [NOT NULL | NULL], ROW<name type, …> (or ROW(…)),
// ARRAY<T>, MULTISET<T>, MAP<K, V>, and the names of two words DOUBLE
// PRECISION, CHARACTER VARYING and CHAR VARYING.
func (p *parser) dataType() (*ast.Type, error) {
	t := p.peek()
	if t.kind != tWord {
		return nil, p.expected("a data type")
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	p.advance()
	ty := &ast.Type{At: t.pos, Name: t.up}
	var err error
	switch t.up {
	case "ROW":
		closer := ">"
		switch {
		case p.acceptOp("<>"): // ROW<> lexes as the operator <>: a row of no fields
			closer = ""
		case p.acceptOp("<"):
		case p.acceptOp("("):
			closer = ")"
		default:
			return nil, p.expected(`"<" after ROW (ROW<name type, …>)`)
		}
		if closer != "" && !p.peek().isOp(closer) {
			for {
				f := &ast.RowField{}
				if f.Name, err = p.anyIdent("a field name"); err != nil {
					return nil, err
				}
				if f.Type, err = p.dataType(); err != nil {
					return nil, err
				}
				if p.accept("COMMENT") {
					if _, _, err := p.stringLit("the field's comment as a quoted string"); err != nil {
						return nil, err
					}
				}
				ty.Fields = append(ty.Fields, f)
				if !p.acceptOp(",") {
					break
				}
			}
		}
		if closer != "" {
			if _, err := p.expectOp(closer); err != nil {
				return nil, err
			}
		}
	case "ARRAY", "MULTISET":
		if _, err := p.expectOp("<"); err != nil {
			return nil, err
		}
		if ty.Elem, err = p.dataType(); err != nil {
			return nil, err
		}
		if _, err := p.expectOp(">"); err != nil {
			return nil, err
		}
	case "MAP":
		if _, err := p.expectOp("<"); err != nil {
			return nil, err
		}
		if ty.Key, err = p.dataType(); err != nil {
			return nil, err
		}
		if _, err := p.expectOp(","); err != nil {
			return nil, err
		}
		if ty.Elem, err = p.dataType(); err != nil {
			return nil, err
		}
		if _, err := p.expectOp(">"); err != nil {
			return nil, err
		}
	default:
		switch {
		case t.up == "DOUBLE" && p.accept("PRECISION"):
			ty.Name = "DOUBLE PRECISION"
		case (t.up == "CHARACTER" || t.up == "CHAR") && p.accept("VARYING"):
			ty.Name = t.up + " VARYING"
		}
		if p.acceptOp("(") {
			for {
				n, err := p.intParam()
				if err != nil {
					return nil, err
				}
				ty.Params = append(ty.Params, n)
				if len(ty.Params) == 2 || !p.acceptOp(",") {
					break
				}
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
		}
		switch {
		case p.acceptSeq("WITH", "LOCAL", "TIME", "ZONE"):
			ty.WithLocalTimeZone = true
		case p.acceptSeq("WITHOUT", "TIME", "ZONE"):
		}
	}
	switch {
	case p.acceptSeq("NOT", "NULL"):
		ty.NotNull = true
	case p.accept("NULL"):
	}
	return ty, nil
}
