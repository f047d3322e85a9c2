package ast

import (
	"strconv"
	"strings"
	"unicode"
)

// Printing: every node's String is SQL that parses back to the same tree
// (positions aside). Keywords are printed upper case, names as written
// (quoted in backticks when they were), strings in single quotes.

// QuoteString quotes s as a SQL string literal, doubling its quotes.
func QuoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// plainIdent reports whether s can be written without backticks: a
// letter or _ and then letters, digits, _ or $.
func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || unicode.IsLetter(r)
		if !letter && (i == 0 || !(r == '$' || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// String prints the Ident as SQL.
func (n *Ident) String() string {
	if n.Quoted || !plainIdent(n.Name) {
		return "`" + strings.ReplaceAll(n.Name, "`", "``") + "`"
	}
	return n.Name
}

// String prints the Name as SQL.
func (n *Name) String() string {
	parts := make([]string, len(n.Parts))
	for i := range n.Parts {
		parts[i] = n.Parts[i].String()
	}
	return strings.Join(parts, ".")
}

func identList(ids []Ident) string {
	parts := make([]string, len(ids))
	for i := range ids {
		parts[i] = ids[i].String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func exprList(xs []Expr) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return strings.Join(parts, ", ")
}

// String prints the script, one statement a line, each ended by ";".
func (s *Script) String() string {
	var b strings.Builder
	for _, st := range s.Stmts {
		b.WriteString(st.String())
		b.WriteString(";\n")
	}
	return b.String()
}

// Statements.

// String prints the CreateTable as SQL.
func (n *CreateTable) String() string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if n.Temporary {
		b.WriteString("TEMPORARY ")
	}
	b.WriteString("TABLE ")
	if n.IfNotExists {
		b.WriteString("IF NOT EXISTS ")
	}
	b.WriteString(n.Name.String())
	var elems []string
	for _, c := range n.Columns {
		elems = append(elems, c.String())
	}
	if n.Watermark != nil {
		elems = append(elems, n.Watermark.String())
	}
	if n.PrimaryKey != nil {
		elems = append(elems, n.PrimaryKey.String())
	}
	b.WriteString(" (\n  " + strings.Join(elems, ",\n  ") + "\n)")
	if n.Comment != "" {
		b.WriteString(" COMMENT " + QuoteString(n.Comment))
	}
	if len(n.PartitionBy) > 0 {
		b.WriteString(" PARTITIONED BY " + identList(n.PartitionBy))
	}
	if len(n.Options) > 0 {
		opts := make([]string, len(n.Options))
		for i, o := range n.Options {
			opts[i] = o.String()
		}
		b.WriteString(" WITH (\n  " + strings.Join(opts, ",\n  ") + "\n)")
	}
	return b.String()
}

// String prints the ColumnDef as SQL.
func (n *ColumnDef) String() string {
	s := n.Name.String()
	if n.Expr != nil {
		s += " AS " + n.Expr.String()
	} else {
		if n.Type != nil {
			s += " " + n.Type.String()
			if n.NotNull && !n.Type.NotNull {
				s += " NOT NULL"
			}
		}
		if n.PrimaryKey {
			s += " PRIMARY KEY NOT ENFORCED"
		}
		if n.Metadata {
			s += " METADATA"
			if n.MetadataKey != "" {
				s += " FROM " + QuoteString(n.MetadataKey)
			}
			if n.Virtual {
				s += " VIRTUAL"
			}
		}
	}
	if n.Comment != "" {
		s += " COMMENT " + QuoteString(n.Comment)
	}
	return s
}

// String prints the Watermark as SQL.
func (n *Watermark) String() string {
	return "WATERMARK FOR " + n.Column.String() + " AS " + n.Expr.String()
}

// String prints the PrimaryKey as SQL.
func (n *PrimaryKey) String() string {
	s := "PRIMARY KEY " + identList(n.Columns)
	if n.NotEnforced {
		s += " NOT ENFORCED"
	}
	return s
}

// String prints the Option as SQL.
func (n *Option) String() string { return QuoteString(n.Key) + " = " + QuoteString(n.Value) }

// String prints the Type as SQL.
func (n *Type) String() string {
	var s string
	switch n.Name {
	case "ROW":
		fields := make([]string, len(n.Fields))
		for i, f := range n.Fields {
			fields[i] = f.String()
		}
		s = "ROW<" + strings.Join(fields, ", ") + ">"
	case "ARRAY", "MULTISET":
		s = n.Name + "<" + n.Elem.String() + ">"
	case "MAP":
		s = "MAP<" + n.Key.String() + ", " + n.Elem.String() + ">"
	default:
		s = n.Name
		if len(n.Params) > 0 {
			ps := make([]string, len(n.Params))
			for i, p := range n.Params {
				ps[i] = strconv.Itoa(p)
			}
			s += "(" + strings.Join(ps, ", ") + ")"
		}
		if n.WithLocalTimeZone {
			s += " WITH LOCAL TIME ZONE"
		}
	}
	if n.NotNull {
		s += " NOT NULL"
	}
	return s
}

// String prints the RowField as SQL.
func (n *RowField) String() string { return n.Name.String() + " " + n.Type.String() }

// String prints the CreateView as SQL.
func (n *CreateView) String() string {
	s := "CREATE "
	if n.Temporary {
		s += "TEMPORARY "
	}
	s += "VIEW "
	if n.IfNotExists {
		s += "IF NOT EXISTS "
	}
	s += n.Name.String()
	if len(n.Columns) > 0 {
		s += " " + identList(n.Columns)
	}
	return s + " AS\n" + n.Query.String()
}

// String prints the CreateFunction as SQL.
func (n *CreateFunction) String() string {
	s := "CREATE "
	if n.Temporary {
		s += "TEMPORARY "
	}
	if n.System {
		s += "SYSTEM "
	}
	s += "FUNCTION "
	if n.IfNotExists {
		s += "IF NOT EXISTS "
	}
	s += n.Name.String() + " AS " + QuoteString(n.Class)
	if n.Language != "" {
		s += " LANGUAGE " + n.Language
	}
	return s
}

// String prints the Insert as SQL.
func (n *Insert) String() string {
	s := "INSERT INTO "
	if n.Overwrite {
		s = "INSERT OVERWRITE "
	}
	s += n.Table.String()
	if len(n.Hints) > 0 {
		s += " " + hintsString(n.Hints)
	}
	if len(n.Columns) > 0 {
		s += " " + identList(n.Columns)
	}
	return s + "\n" + n.Query.String()
}

// String prints the Set as SQL.
func (n *Set) String() string {
	if n.Option.Key == "" {
		return "SET"
	}
	return "SET " + n.Option.String()
}

// String prints the Reset as SQL.
func (n *Reset) String() string {
	if n.Key == "" {
		return "RESET"
	}
	return "RESET " + QuoteString(n.Key)
}

// String prints the Explain as SQL.
func (n *Explain) String() string { return "EXPLAIN " + n.Stmt.String() }

// String prints the StatementSet as SQL.
func (n *StatementSet) String() string {
	var b strings.Builder
	b.WriteString("EXECUTE STATEMENT SET\nBEGIN\n")
	for _, ins := range n.Inserts {
		b.WriteString(ins.String())
		b.WriteString(";\n")
	}
	b.WriteString("END")
	return b.String()
}

// String prints the QueryStmt as SQL.
func (n *QueryStmt) String() string { return n.Query.String() }

// Queries.

// String prints the query without parentheses; as the body of another
// query or a set operand it is printed in parentheses.
func (n *Query) String() string {
	var b strings.Builder
	if len(n.With) > 0 {
		ctes := make([]string, len(n.With))
		for i, c := range n.With {
			ctes[i] = c.String()
		}
		b.WriteString("WITH " + strings.Join(ctes, ",\n") + "\n")
	}
	b.WriteString(setExprString(n.Body))
	if len(n.OrderBy) > 0 {
		b.WriteString("\nORDER BY " + orderItems(n.OrderBy))
	}
	if n.Limit != nil {
		b.WriteString("\nLIMIT " + n.Limit.String())
	}
	return b.String()
}

// setExprString prints a query body: a nested query in parentheses.
func setExprString(e SetExpr) string {
	if q, ok := e.(*Query); ok {
		return "(" + q.String() + ")"
	}
	return e.String()
}

// String prints the CTE as SQL.
func (n *CTE) String() string {
	s := n.Name.String()
	if len(n.Columns) > 0 {
		s += " " + identList(n.Columns)
	}
	return s + " AS (" + n.Query.String() + ")"
}

// String prints the SetOp as SQL.
func (n *SetOp) String() string {
	op := n.Op
	if n.All {
		op += " ALL"
	}
	return setExprString(n.Left) + "\n" + op + "\n" + setExprString(n.Right)
}

// String prints the Select as SQL.
func (n *Select) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if len(n.Hints) > 0 {
		b.WriteString(hintsString(n.Hints) + " ")
	}
	if n.Distinct {
		b.WriteString("DISTINCT ")
	}
	items := make([]string, len(n.Items))
	for i, it := range n.Items {
		items[i] = it.String()
	}
	b.WriteString(strings.Join(items, ", "))
	if n.From != nil {
		b.WriteString("\nFROM " + n.From.String())
	}
	if n.Where != nil {
		b.WriteString("\nWHERE " + n.Where.String())
	}
	if len(n.GroupBy) > 0 {
		b.WriteString("\nGROUP BY " + exprList(n.GroupBy))
	}
	if n.Having != nil {
		b.WriteString("\nHAVING " + n.Having.String())
	}
	return b.String()
}

// String prints the SelectItem as SQL.
func (n *SelectItem) String() string {
	if n.Star {
		if n.Qualifier != nil {
			return n.Qualifier.String() + ".*"
		}
		return "*"
	}
	s := n.Expr.String()
	if n.Alias != nil {
		s += " AS " + n.Alias.String()
	}
	return s
}

// String prints the OrderItem as SQL.
func (n *OrderItem) String() string {
	s := n.Expr.String()
	if n.Desc {
		s += " DESC"
	}
	if n.NullsFirst != nil {
		if *n.NullsFirst {
			s += " NULLS FIRST"
		} else {
			s += " NULLS LAST"
		}
	}
	return s
}

func orderItems(items []*OrderItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.String()
	}
	return strings.Join(parts, ", ")
}

func aliasString(a *Ident) string {
	if a == nil {
		return ""
	}
	return " AS " + a.String()
}

// String prints the TableRef as SQL.
func (n *TableRef) String() string {
	s := n.Name.String()
	if len(n.Hints) > 0 {
		s += " " + hintsString(n.Hints)
	}
	if n.SystemTime != nil {
		s += " FOR SYSTEM_TIME AS OF " + n.SystemTime.String()
	}
	return s + aliasString(n.Alias) + aliasColumns(n.AliasColumns)
}

// aliasColumns prints the (cols) after an alias.
func aliasColumns(cols []Ident) string {
	if len(cols) == 0 {
		return ""
	}
	return " " + identList(cols)
}

// String prints the SubqueryRef as SQL.
func (n *SubqueryRef) String() string {
	return "(" + n.Query.String() + ")" + aliasString(n.Alias) + aliasColumns(n.AliasColumns)
}

// String prints the TableFunc as SQL.
func (n *TableFunc) String() string {
	args := make([]string, len(n.Args))
	for i, a := range n.Args {
		args[i] = a.String()
	}
	s := n.Name.String() + "(" + strings.Join(args, ", ") + ")"
	if n.Wrapped {
		s = "TABLE(" + s + ")"
	}
	return s + aliasString(n.Alias)
}

// String prints the argument of a table function.
func (n *FuncArg) String() string {
	s := ""
	if n.Named != nil {
		s = n.Named.String() + " => "
	}
	switch {
	case n.Table != nil:
		s += "TABLE " + n.Table.String()
		switch len(n.PartitionBy) {
		case 0:
		case 1:
			s += " PARTITION BY " + n.PartitionBy[0].String()
		default:
			s += " PARTITION BY " + identList(n.PartitionBy)
		}
	case n.Descriptor != nil:
		s += "DESCRIPTOR" + identList(n.Descriptor)
	case n.Expr != nil:
		s += n.Expr.String()
	}
	return s
}

// String prints the Join as SQL.
func (n *Join) String() string {
	if n.Comma {
		return n.Left.String() + ", " + n.Right.String()
	}
	kind := n.Kind + " JOIN"
	if n.Kind == "INNER" {
		kind = "JOIN"
	}
	s := n.Left.String() + "\n" + kind + " " + n.Right.String()
	switch {
	case n.On != nil:
		s += " ON " + n.On.String()
	case len(n.Using) > 0:
		s += " USING " + identList(n.Using)
	}
	return s
}

// hintsString prints hints as the comment /*+ … */.
func hintsString(hints []*Hint) string {
	hs := make([]string, len(hints))
	for i, h := range hints {
		hs[i] = h.String()
	}
	return "/*+ " + strings.Join(hs, ", ") + " */"
}

// String prints the hint as it goes inside /*+ … */.
func (n *Hint) String() string {
	var args []string
	for _, a := range n.Args {
		if plainIdent(a) {
			args = append(args, a)
		} else {
			args = append(args, QuoteString(a))
		}
	}
	for _, o := range n.Options {
		args = append(args, o.String())
	}
	if len(args) == 0 {
		return n.Name
	}
	return n.Name + "(" + strings.Join(args, ", ") + ")"
}

// Expressions.

// String prints the ColumnRef as SQL.
func (n *ColumnRef) String() string { return n.Name.String() }

// String prints the Literal as SQL.
func (n *Literal) String() string {
	switch n.Kind {
	case LitString:
		return QuoteString(n.Value)
	case LitTime, LitDate, LitTimeDay:
		return n.Kind + " " + QuoteString(n.Value)
	case LitNull:
		return "NULL"
	}
	return n.Value
}

func unitString(unit string, prec int) string {
	if prec > 0 {
		return unit + "(" + strconv.Itoa(prec) + ")"
	}
	return unit
}

// String prints the Interval as SQL.
func (n *Interval) String() string {
	s := "INTERVAL " + QuoteString(n.Value) + " " + unitString(n.Unit, n.Precision)
	if n.ToUnit != "" {
		s += " TO " + unitString(n.ToUnit, n.ToPrecision)
	}
	return s
}

// String prints the Unary as SQL.
func (n *Unary) String() string {
	x := n.X.String()
	if n.Op == "NOT" {
		return "NOT " + x
	}
	if strings.HasPrefix(x, "-") || strings.HasPrefix(x, "+") {
		return n.Op + " " + x
	}
	return n.Op + x
}

// String prints the Binary as SQL.
func (n *Binary) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

// write prints the binary expression into b; a long chain a OR b OR c …
// is printed in time linear in its length.
func (n *Binary) write(b *strings.Builder) {
	writeExpr(b, n.X)
	b.WriteString(" " + n.Op + " ")
	writeExpr(b, n.Y)
	if n.Escape != nil {
		b.WriteString(" ESCAPE ")
		writeExpr(b, n.Escape)
	}
}

func writeExpr(b *strings.Builder, x Expr) {
	if bin, ok := x.(*Binary); ok {
		bin.write(b)
		return
	}
	b.WriteString(x.String())
}

func not(b bool) string {
	if b {
		return "NOT "
	}
	return ""
}

// String prints the Between as SQL.
func (n *Between) String() string {
	s := n.X.String() + " " + not(n.Not) + "BETWEEN "
	if n.Symmetric {
		s += "SYMMETRIC "
	}
	return s + n.Lo.String() + " AND " + n.Hi.String()
}

// String prints the In as SQL.
func (n *In) String() string {
	s := n.X.String() + " " + not(n.Not) + "IN ("
	if n.Query != nil {
		return s + n.Query.String() + ")"
	}
	return s + exprList(n.List) + ")"
}

// String prints the IsNull as SQL.
func (n *IsNull) String() string { return n.X.String() + " IS " + not(n.Not) + "NULL" }

// String prints the IsBool as SQL.
func (n *IsBool) String() string { return n.X.String() + " IS " + not(n.Not) + n.Value }

// String prints the Case as SQL.
func (n *Case) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	if n.Operand != nil {
		b.WriteString(" " + n.Operand.String())
	}
	for _, w := range n.Whens {
		b.WriteString(" " + w.String())
	}
	if n.Else != nil {
		b.WriteString(" ELSE " + n.Else.String())
	}
	b.WriteString(" END")
	return b.String()
}

// String prints WHEN cond THEN result.
func (n *When) String() string { return "WHEN " + n.Cond.String() + " THEN " + n.Result.String() }

// String prints the Cast as SQL.
func (n *Cast) String() string {
	fn := "CAST"
	if n.Try {
		fn = "TRY_CAST"
	}
	return fn + "(" + n.X.String() + " AS " + n.To.String() + ")"
}

// niladic are the functions written without parentheses.
var niladic = map[string]bool{
	"CURRENT_TIMESTAMP": true, "CURRENT_DATE": true, "CURRENT_TIME": true,
	"LOCALTIMESTAMP": true, "LOCALTIME": true,
}

// trimFlags are the first words of TRIM(BOTH x FROM s).
var trimFlags = map[string]bool{"BOTH": true, "LEADING": true, "TRAILING": true}

// String prints the Call as SQL.
func (n *Call) String() string {
	fn := ""
	if len(n.Name.Parts) == 1 && !n.Name.Parts[0].Quoted {
		fn = strings.ToUpper(n.Name.Parts[0].Name)
	}
	plain := !n.Distinct && !n.Star && n.Filter == nil && n.Over == nil
	name := n.Name.String()
	if plain {
		switch {
		case niladic[fn] && len(n.Args) == 0:
			return name
		case fn == "TRIM" && len(n.Args) == 3:
			if l, ok := n.Args[0].(*Literal); ok && l.Kind == LitString && trimFlags[l.Value] {
				return name + "(" + l.Value + " " + n.Args[1].String() + " FROM " + n.Args[2].String() + ")"
			}
		case fn == "EXTRACT" && len(n.Args) == 2:
			if l, ok := n.Args[0].(*Literal); ok && l.Kind == LitString && plainIdent(l.Value) {
				return name + "(" + l.Value + " FROM " + n.Args[1].String() + ")"
			}
		case fn == "POSITION" && len(n.Args) == 2:
			return name + "(" + n.Args[0].String() + " IN " + n.Args[1].String() + ")"
		case (fn == "ARRAY" || fn == "MAP") && len(n.Args) > 0:
			return name + "[" + exprList(n.Args) + "]"
		}
	}
	s := name + "("
	switch {
	case n.Star:
		s += "*"
	case n.Distinct:
		s += "DISTINCT " + exprList(n.Args)
	default:
		s += exprList(n.Args)
	}
	s += ")"
	if n.Filter != nil {
		s += " FILTER (WHERE " + n.Filter.String() + ")"
	}
	if n.Over != nil {
		s += " " + n.Over.String()
	}
	return s
}

// String prints OVER (…).
func (n *Window) String() string {
	var parts []string
	if len(n.PartitionBy) > 0 {
		parts = append(parts, "PARTITION BY "+exprList(n.PartitionBy))
	}
	if len(n.OrderBy) > 0 {
		parts = append(parts, "ORDER BY "+orderItems(n.OrderBy))
	}
	if n.Frame != "" {
		parts = append(parts, n.Frame)
	}
	return "OVER (" + strings.Join(parts, " ") + ")"
}

// String prints the Subscript as SQL.
func (n *Subscript) String() string { return n.X.String() + "[" + n.Index.String() + "]" }

// String prints the Field as SQL.
func (n *Field) String() string { return n.X.String() + "." + n.Name.String() }

// String prints the Paren as SQL.
func (n *Paren) String() string { return "(" + n.X.String() + ")" }

// String prints the Subquery as SQL.
func (n *Subquery) String() string {
	s := "(" + n.Query.String() + ")"
	if n.Exists {
		return "EXISTS " + s
	}
	return s
}
