package planner

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Outer joins (docs/design.md, "SQL"): `FROM a LEFT | RIGHT | FULL
// [OUTER] JOIN b ON …` of two tables (each a table, view or subquery)
// compiles as an inner join does, with the join step's kind: a row of a
// preserved side (the left of LEFT, the right of RIGHT, both of FULL)
// that finds no partner is written padded with NULLs and retracted when
// its first partner comes, so the result is a changelog.
//
// The conditions are not pooled as an inner join's are, since an outer
// join's ON says which rows match and its WHERE which rows of the
// result stay:
//   - ON: an equality of a column expression of each table is a key; a
//     condition of the side that is not preserved filters it before the
//     join (its rows that fail match nothing, and are never written
//     padded); a condition of a preserved side is a guard: a row that
//     fails it matches nothing and is written padded (its key is none);
//     any other condition of both tables is refused (the step would have
//     to test it per pair and keep track of which rows met a partner).
//   - WHERE: a condition of a table that is never padded with NULLs (the
//     left of LEFT, the right of RIGHT) filters it before the join, as
//     for an inner join; any other filters the joined rows, padded ones
//     included (a padded row's NULLs fail a comparison, as in SQL).
//
// A preserved side's key is none when one of its key columns is NULL or
// its guard fails: its select writes the column __m (true when the row
// may match), and the step's left-match (right-match) is `value.__m`.

const (
	outerMatchCol = "__m"
	outerMatch    = "value.__m"
)

func isOuter(kind string) bool { return kind == "LEFT" || kind == "RIGHT" || kind == "FULL" }

// outerSides is what joinRels needs of an outer join: its kind ("" for
// an inner join), which sides are preserved and their guards.
type outerSides struct {
	kind      string
	preserved [2]bool
	guards    [2]ast.Expr
}

func (jp *joinPlan) outerSides() outerSides {
	if jp.outer == "" {
		return outerSides{}
	}
	return outerSides{kind: jp.outer, preserved: preservedSides(jp.outer), guards: jp.guards}
}

// preservedSides tells which sides of an outer join of kind keep their
// rows without a partner.
func preservedSides(kind string) [2]bool {
	return [2]bool{kind == "LEFT" || kind == "FULL", kind == "RIGHT" || kind == "FULL"}
}

// checkOuterJoin refuses the outer joins not planned yet: RIGHT and FULL
// with USING. (In a chain, an outer join's sides are planned as leaves
// of their own: joinFrom.)
func (p *planner) checkOuterJoin(j *ast.Join, what string) bool {
	if len(j.Using) > 0 && j.Kind != "LEFT" {
		p.errorf(j.Right.Position(), "%s USING (…): a USING column of a %s join is %s, not supported yet; write ON with each table's column (ON a.c = b.c) and select the one you need", what, j.Kind, map[string]string{"RIGHT": "the right table's", "FULL": "COALESCE of both tables'"}[j.Kind])
		return false
	}
	return true
}

// outerPlace places the conditions of an outer join of two leaves (see
// above): ON conditions of one table become its filter or guard, WHERE
// conditions of a table padded with NULLs filter the joined rows (post).
// false after an error (reported).
func (jp *joinPlan) outerPlace(j *ast.Join) bool {
	p := jp.p
	if jp.win != nil {
		p.errorf(j.Right.Position(), "a %s window join is not supported yet: window joins are inner joins", jp.outer)
		return false
	}
	keep := preservedSides(jp.outer)
	var post []ast.Expr
	for _, c := range jp.conds {
		if c.used {
			continue
		}
		i := -1
		switch c.leaves {
		case 1:
			i = 0
		case 2:
			i = 1
		}
		switch {
		case c.on && c.leaves == 0:
			p.errorf(c.e.Position(), "%s in the ON of an outer join reads no table's column: move it to the WHERE", c.e)
			return false
		case i < 0:
			continue // both tables: a key, refused or a filter (build)
		case c.on && keep[i]:
			l := jp.leaves[i]
			jp.guards[i] = and(jp.guards[i], p.resolve(l.r, c.e))
		case c.on || !keep[1-i]:
			l := jp.leaves[i]
			l.r.where = and(l.r.where, p.resolve(l.r, c.e))
		default:
			post = append(post, c.e) // the table is padded with NULLs
		}
		c.used = true
	}
	jp.post = post
	return len(p.errs) == 0
}

// matchColumn is the __m column of a preserved side: TRUE when the row
// may match (match holds), FALSE when it is NULL or false.
func matchColumn(match ast.Expr) ast.Expr {
	if match == nil {
		return &ast.Literal{Kind: ast.LitBool, Value: "TRUE"}
	}
	return &ast.Case{At: match.Position(), Whens: []*ast.When{{Cond: match, Result: &ast.Literal{Kind: ast.LitBool, Value: "TRUE"}}}, Else: &ast.Literal{Kind: ast.LitBool, Value: "FALSE"}}
}

// outerKeyNotNull refuses a database table whose primary key column is
// written straight from a side of an outer join that is padded with
// NULLs: the first padded row would fail (a key column cannot be NULL
// in PostgreSQL or MySQL). r's columns are named as the table's.
func (p *planner) outerKeyNotNull(r *rel, sink *table, key []string, ins *ast.Insert) bool {
	if sink.connector != "jdbc" && sink.connector != "postgres" && sink.connector != "mysql" {
		return true
	}
	for _, k := range key {
		for _, c := range r.cols {
			ref, ok := unparen(c.expr).(*ast.ColumnRef)
			if !strings.EqualFold(c.name, k) || !ok || len(ref.Name.Parts) != 2 {
				continue
			}
			side := ref.Name.Parts[0].Name
			if r.nullableRef(ref) {
				from := fmt.Sprintf("the %s side of an outer join, which is", side)
				if !r.nullable[side+".*"] {
					from = "a column an outer join earlier in the chain pads, which is"
				}
				p.errorf(ins.At, "table %s's primary key column %s is written from %s NULL in a row written padded for want of a partner, and a database key column cannot be NULL: write COALESCE(…, -1) (a value no row has) in the query, as in SELECT COALESCE(b.id, -1)", sink.name, k, from)
				return false
			}
		}
	}
	return true
}
