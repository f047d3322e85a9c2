package planner

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// typeOf is the SQL type of e over the schema in. (Provisional: replaced
// by the expression compiler's type checker.)
func typeOf(in []schemaCol, e ast.Expr) (*ast.Type, error) {
	switch n := e.(type) {
	case *ast.Paren:
		return typeOf(in, n.X)
	case *ast.ColumnRef:
		var t *ast.Type
		for _, c := range in {
			if strings.EqualFold(c.name, n.Name.Parts[0].Name) {
				t = c.typ
			}
		}
		if t == nil {
			return nil, fmt.Errorf("no column %s", n.Name.Parts[0].Name)
		}
		for _, f := range n.Name.Parts[1:] {
			var next *ast.Type
			for _, rf := range t.Fields {
				if strings.EqualFold(rf.Name.Name, f.Name) {
					next = rf.Type
				}
			}
			if next == nil {
				return nil, fmt.Errorf("%s has no field %s", n.Name.String(), f.Name)
			}
			t = next
		}
		return t, nil
	case *ast.Literal:
		switch n.Kind {
		case ast.LitNumber:
			if strings.ContainsAny(n.Value, ".eE") {
				return &ast.Type{Name: "DECIMAL"}, nil
			}
			return &ast.Type{Name: "INT"}, nil
		case ast.LitBool:
			return &ast.Type{Name: "BOOLEAN"}, nil
		case ast.LitNull:
			return &ast.Type{Name: "NULL"}, nil
		}
		return &ast.Type{Name: "STRING"}, nil
	case *ast.Cast:
		return n.To, nil
	case *ast.Case:
		for _, w := range n.Whens {
			if t, err := typeOf(in, w.Result); err != nil || t.Name != "NULL" {
				return t, err
			}
		}
		if n.Else != nil {
			return typeOf(in, n.Else)
		}
		return &ast.Type{Name: "NULL"}, nil
	case *ast.Binary:
		switch strings.ToUpper(n.Op) {
		case "+", "-", "*", "/", "%":
			x, err := typeOf(in, n.X)
			if err != nil {
				return nil, err
			}
			if _, iv := n.Y.(*ast.Interval); iv {
				return x, nil
			}
			y, err := typeOf(in, n.Y)
			if err != nil {
				return nil, err
			}
			for _, w := range []string{"DOUBLE", "FLOAT", "DECIMAL"} {
				if x.Name == w || y.Name == w {
					return &ast.Type{Name: w}, nil
				}
			}
			return &ast.Type{Name: "BIGINT"}, nil
		case "||":
			return &ast.Type{Name: "STRING"}, nil
		}
		return &ast.Type{Name: "BOOLEAN"}, nil
	case *ast.Unary:
		if n.Op == "NOT" {
			return &ast.Type{Name: "BOOLEAN"}, nil
		}
		return typeOf(in, n.X)
	case *ast.Between, *ast.In, *ast.IsNull, *ast.IsBool:
		return &ast.Type{Name: "BOOLEAN"}, nil
	case *ast.Call:
		switch strings.ToUpper(n.Name.Last()) {
		case "HOUR", "MINUTE", "SECOND", "YEAR", "MONTH", "DAYOFMONTH", "CHAR_LENGTH", "CHARACTER_LENGTH", "POSITION":
			return &ast.Type{Name: "BIGINT"}, nil
		case "MOD", "ABS", "FLOOR", "CEIL", "ROUND":
			if len(n.Args) > 0 {
				return typeOf(in, n.Args[0])
			}
		case "TO_TIMESTAMP", "TO_TIMESTAMP_LTZ", "PROCTIME", "NOW", "CURRENT_TIMESTAMP", "LOCALTIMESTAMP":
			return &ast.Type{Name: "TIMESTAMP", Params: []int{3}}, nil
		case "COALESCE", "IF", "NULLIF", "IFNULL", "GREATEST", "LEAST":
			for i, a := range n.Args {
				if strings.EqualFold(n.Name.Last(), "IF") && i == 0 {
					continue
				}
				if t, err := typeOf(in, a); err != nil || t.Name != "NULL" {
					return t, err
				}
			}
		case "POWER", "SQRT":
			return &ast.Type{Name: "DOUBLE"}, nil
		}
		return &ast.Type{Name: "STRING"}, nil
	case *ast.Field:
		t, err := typeOf(in, n.X)
		if err != nil {
			return nil, err
		}
		for _, rf := range t.Fields {
			if strings.EqualFold(rf.Name.Name, n.Name.Name) {
				return rf.Type, nil
			}
		}
		return nil, fmt.Errorf("no field %s", n.Name.Name)
	}
	return &ast.Type{Name: "STRING"}, nil
}
