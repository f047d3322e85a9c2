// Package ast is the syntax tree of onceflow's SQL: the statements and
// expressions of Flink's SQL dialect that a .sql job is written in
// (docs/design.md, "SQL"). Package internal/sql/parser builds it from
// text; the planner binds it to tables and compiles it to a job's plan.
// Every node knows where it was written (Pos), so every error can name a
// line and a column.
//
// String on any node prints it back as SQL that parses to the same tree
// (the parser's tests check the round trip).
package ast

import "fmt"

// Pos is where a node starts in the script: line and column, from 1;
// columns count runes.
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Node is any node of the tree.
type Node interface {
	Position() Pos
	String() string
}

// Ident is a name as written: unquoted names keep their spelling (Flink
// resolves them case-sensitively); Quoted says it was in backticks.
type Ident struct {
	At     Pos
	Name   string
	Quoted bool
}

// Name is a possibly qualified name: catalog.db.table, t.col, a.b.c.
type Name struct {
	At    Pos
	Parts []Ident
}

// Last is the name's last part.
func (n Name) Last() string {
	if len(n.Parts) == 0 {
		return ""
	}
	return n.Parts[len(n.Parts)-1].Name
}

// Statements.

// Stmt is a statement of a script.
type Stmt interface {
	Node
	stmt()
}

// Script is a parsed .sql file: its statements in order.
type Script struct {
	Stmts []Stmt
}

// CreateTable is CREATE [TEMPORARY] TABLE [IF NOT EXISTS] name (…)
// [PARTITIONED BY (…)] [WITH (…)].
type CreateTable struct {
	At          Pos
	Temporary   bool
	IfNotExists bool
	Name        Name
	Columns     []*ColumnDef
	Watermark   *Watermark // nil: none
	PrimaryKey  *PrimaryKey
	PartitionBy []Ident
	Options     []*Option
	// Comment is the table's COMMENT 'x'; "" when none.
	Comment string
}

// ColumnDef is one column of a CREATE TABLE: physical (Type set, Expr
// nil), computed (`name AS expr`: Expr set, Type nil) or metadata
// (Metadata true, Type set).
type ColumnDef struct {
	At      Pos
	Name    Ident
	Type    *Type
	NotNull bool
	// PrimaryKey: the column was declared `PRIMARY KEY [NOT ENFORCED]`
	// inline (the seed's bare form).
	PrimaryKey bool
	Expr       Expr
	Metadata   bool
	// MetadataKey is the FROM 'key' of a metadata column; "" when the
	// column's name is the key.
	MetadataKey string
	Virtual     bool
	Comment     string
}

// Watermark is WATERMARK FOR column AS expr.
type Watermark struct {
	At     Pos
	Column Ident
	Expr   Expr
}

// PrimaryKey is PRIMARY KEY (cols) [NOT ENFORCED].
type PrimaryKey struct {
	At          Pos
	Columns     []Ident
	NotEnforced bool
}

// Option is one 'key' = 'value' of a WITH clause or a SET statement.
type Option struct {
	At    Pos
	Key   string
	Value string
	// ValueAt is where the value is written (errors about the value point
	// there).
	ValueAt Pos
}

// Type is a SQL data type: a name with optional parameters
// (DECIMAL(10, 2), TIMESTAMP(3), VARCHAR(20)), or a ROW, ARRAY or MAP.
type Type struct {
	At Pos
	// Name is upper case: BIGINT, STRING, TIMESTAMP, ROW, ARRAY, MAP, ...
	Name string
	// Params are the numbers in parentheses.
	Params []int
	// WithLocalTimeZone: TIMESTAMP(p) WITH LOCAL TIME ZONE (TIMESTAMP_LTZ).
	WithLocalTimeZone bool
	// Fields are a ROW's fields.
	Fields []*RowField
	// Elem is an ARRAY's element type or a MAP's value type; Key is a
	// MAP's key type.
	Elem, Key *Type
	NotNull   bool
}

// RowField is one field of a ROW type.
type RowField struct {
	Name Ident
	Type *Type
}

// CreateView is CREATE [TEMPORARY] VIEW [IF NOT EXISTS] name [(cols)] AS query.
type CreateView struct {
	At          Pos
	Temporary   bool
	IfNotExists bool
	Name        Name
	Columns     []Ident
	Query       *Query
}

// CreateFunction is CREATE [TEMPORARY] [SYSTEM] FUNCTION name AS 'class'
// [LANGUAGE lang]. Parsed so a script carrying one gets a precise error.
type CreateFunction struct {
	At       Pos
	Name     Name
	Class    string
	Language string
	// Temporary, System and IfNotExists are the words written.
	Temporary, System, IfNotExists bool
}

// Insert is INSERT INTO|OVERWRITE table [(cols)] query.
type Insert struct {
	At        Pos
	Overwrite bool
	Table     Name
	Columns   []Ident
	Query     *Query
	// Hints are the table's /*+ OPTIONS(…) */ written after its name.
	Hints []*Hint
}

// Set is SET 'key' = 'value' (or SET key = value); Key "" is a bare SET
// (list the settings).
type Set struct {
	At     Pos
	Option Option
}

// Reset is RESET ['key'].
type Reset struct {
	At  Pos
	Key string
}

// Explain is EXPLAIN [PLAN FOR] stmt.
type Explain struct {
	At   Pos
	Stmt Stmt
}

// StatementSet is EXECUTE STATEMENT SET BEGIN insert; … END (also BEGIN
// STATEMENT SET; … END;).
type StatementSet struct {
	At      Pos
	Inserts []*Insert
}

// QueryStmt is a query on its own (the `onceflow sql` shell prints its
// rows).
type QueryStmt struct {
	At    Pos
	Query *Query
}

func (*CreateTable) stmt()    {}
func (*CreateView) stmt()     {}
func (*CreateFunction) stmt() {}
func (*Insert) stmt()         {}
func (*Set) stmt()            {}
func (*Reset) stmt()          {}
func (*Explain) stmt()        {}
func (*StatementSet) stmt()   {}
func (*QueryStmt) stmt()      {}

// Queries.

// Query is [WITH ctes] body [ORDER BY …] [LIMIT n].
type Query struct {
	At   Pos
	With []*CTE
	Body SetExpr
	// OrderBy and Limit apply to the whole body.
	OrderBy []*OrderItem
	Limit   Expr
}

// CTE is one `name [(cols)] AS (query)` of a WITH.
type CTE struct {
	At      Pos
	Name    Ident
	Columns []Ident
	Query   *Query
}

// SetExpr is a query body: a *Select, a *SetOp or a parenthesized *Query.
type SetExpr interface {
	Node
	setExpr()
}

// SetOp is left UNION [ALL] | INTERSECT | EXCEPT right.
type SetOp struct {
	At          Pos
	Op          string // UNION, INTERSECT, EXCEPT
	All         bool
	Left, Right SetExpr
}

// Select is one SELECT block.
type Select struct {
	At Pos
	// Hints are the /*+ … */ written right after SELECT (a query hint,
	// as STATE_TTL('t' = '1h')).
	Hints    []*Hint
	Distinct bool
	Items    []*SelectItem
	From     TableExpr // nil: no FROM
	Where    Expr
	GroupBy  []Expr
	Having   Expr
}

// SelectItem is `expr [[AS] alias]`, `*` or `t.*` (Star set, Expr nil;
// Qualifier the t of t.*).
type SelectItem struct {
	At        Pos
	Expr      Expr
	Alias     *Ident
	Star      bool
	Qualifier *Name
}

// OrderItem is `expr [ASC|DESC] [NULLS FIRST|LAST]`.
type OrderItem struct {
	At         Pos
	Expr       Expr
	Desc       bool
	NullsFirst *bool
}

func (*Select) setExpr() {}
func (*SetOp) setExpr()  {}
func (*Query) setExpr()  {}

// TableExpr is what FROM reads: *TableRef, *SubqueryRef, *TableFunc or
// *Join.
type TableExpr interface {
	Node
	tableExpr()
}

// TableRef is a table or view by name, `[FOR SYSTEM_TIME AS OF expr]
// [[AS] alias [(cols)]]`, with an optional hint /*+ … */.
type TableRef struct {
	At         Pos
	Name       Name
	SystemTime Expr // FOR SYSTEM_TIME AS OF; nil: none
	Alias      *Ident
	Hints      []*Hint
	// AliasColumns are the (cols) after the alias, renaming the columns.
	AliasColumns []Ident
}

// SubqueryRef is (query) [AS] alias.
type SubqueryRef struct {
	At    Pos
	Query *Query
	Alias *Ident
	// AliasColumns are the (cols) after the alias, renaming the columns.
	AliasColumns []Ident
}

// TableFunc is TABLE(fn(args)) or a bare fn(args) in FROM: the window
// table functions TUMBLE, HOP, CUMULATE and SESSION.
type TableFunc struct {
	At    Pos
	Name  Ident
	Args  []*FuncArg
	Alias *Ident
	// Wrapped: written as TABLE(fn(…)), Flink's form.
	Wrapped bool
}

// FuncArg is one argument of a table function: [name =>] followed by
// TABLE t [PARTITION BY cols], DESCRIPTOR(cols) or an expression.
type FuncArg struct {
	At          Pos
	Named       *Ident
	Table       *Name   // TABLE t
	PartitionBy []Ident // TABLE t PARTITION BY …
	Descriptor  []Ident // DESCRIPTOR(…); nil otherwise
	Expr        Expr
}

// Join is left [kind] JOIN right [ON cond | USING (cols)]; Kind is INNER,
// LEFT, RIGHT, FULL or CROSS; a comma in FROM is a CROSS join with
// Comma set.
type Join struct {
	At          Pos
	Kind        string
	Left, Right TableExpr
	On          Expr
	Using       []Ident
	Comma       bool
}

// Hint is one /*+ NAME(args) */ hint, as STATE_TTL('o' = '1d').
type Hint struct {
	At      Pos
	Name    string
	Options []*Option // 'k' = 'v' arguments
	Args    []string  // bare arguments
}

func (*TableRef) tableExpr()    {}
func (*SubqueryRef) tableExpr() {}
func (*TableFunc) tableExpr()   {}
func (*Join) tableExpr()        {}

// Expressions.

// Expr is a scalar expression.
type Expr interface {
	Node
	expr()
}

// ColumnRef is a column by name, qualified or not: col, t.col, and a
// nested field person.id (resolved by the binder: a table alias or a
// ROW column).
type ColumnRef struct {
	Name Name
}

// Literal kinds.
const (
	LitNumber  = "NUMBER"
	LitString  = "STRING"
	LitBool    = "BOOLEAN"
	LitNull    = "NULL"
	LitTime    = "TIMESTAMP" // TIMESTAMP '…'
	LitDate    = "DATE"      // DATE '…'
	LitTimeDay = "TIME"      // TIME '…'
)

// Literal is a constant: Kind is one of the Lit constants; Value the
// text (a number as written, a string unquoted, TRUE/FALSE, NULL).
type Literal struct {
	At    Pos
	Kind  string
	Value string
}

// Interval is INTERVAL 'value' UNIT [TO UNIT] (Value as written inside
// the quotes; Unit upper case: SECOND, MINUTE, HOUR, DAY, ...).
type Interval struct {
	At     Pos
	Value  string
	Unit   string
	ToUnit string
	// Precision and ToPrecision are the units' precisions, as the 3 of
	// SECOND(3); 0 when not written.
	Precision, ToPrecision int
}

// Unary is NOT x, -x, +x.
type Unary struct {
	At Pos
	Op string // NOT, -, +
	X  Expr
}

// Binary is x op y: OR, AND, =, <>, <, <=, >, >=, +, -, *, /, %, ||,
// LIKE, NOT LIKE, SIMILAR TO, IS DISTINCT FROM, IS NOT DISTINCT FROM.
type Binary struct {
	At   Pos
	Op   string
	X, Y Expr
	// Escape is LIKE's ESCAPE character; nil: none.
	Escape Expr
}

// Between is x [NOT] BETWEEN [SYMMETRIC] lo AND hi.
type Between struct {
	At     Pos
	X      Expr
	Lo, Hi Expr
	Not    bool
	// Symmetric: BETWEEN SYMMETRIC (the bounds in either order).
	Symmetric bool
}

// In is x [NOT] IN (list) or x [NOT] IN (query).
type In struct {
	At    Pos
	X     Expr
	List  []Expr
	Query *Query
	Not   bool
}

// IsNull is x IS [NOT] NULL; IsBool is x IS [NOT] TRUE|FALSE|UNKNOWN.
type IsNull struct {
	At  Pos
	X   Expr
	Not bool
}

// IsBool is x IS [NOT] TRUE, FALSE or UNKNOWN (Value upper case).
type IsBool struct {
	At    Pos
	X     Expr
	Not   bool
	Value string
}

// Case is CASE [operand] WHEN … THEN … [ELSE …] END.
type Case struct {
	At      Pos
	Operand Expr // nil: searched CASE
	Whens   []*When
	Else    Expr
}

// When is one WHEN cond THEN result.
type When struct {
	Cond, Result Expr
}

// Cast is CAST(x AS type) or TRY_CAST(x AS type).
type Cast struct {
	At  Pos
	X   Expr
	To  *Type
	Try bool
}

// Call is a function call: fn([DISTINCT] args) [FILTER (WHERE …)]
// [OVER (…)], and fn(*) as Star. Name is as written; the binder looks it
// up case-insensitively.
type Call struct {
	At       Pos
	Name     Name
	Args     []Expr
	Distinct bool
	Star     bool
	Filter   Expr
	Over     *Window
}

// Window is an OVER clause.
type Window struct {
	At          Pos
	PartitionBy []Expr
	OrderBy     []*OrderItem
	// Frame is the ROWS|RANGE BETWEEN … text as written (kept for errors
	// and printing; no operator uses it yet).
	Frame string
}

// Subscript is x[i] (an ARRAY element from 1, or a MAP value).
type Subscript struct {
	At    Pos
	X     Expr
	Index Expr
}

// Field is x.name on an expression that is not a plain name, as
// (f(x)).a.
type Field struct {
	At   Pos
	X    Expr
	Name Ident
}

// Paren is (x), kept so printing gives back the parentheses.
type Paren struct {
	At Pos
	X  Expr
}

// Subquery is (query) used as a value, or EXISTS (query).
type Subquery struct {
	At     Pos
	Query  *Query
	Exists bool
}

// Param is `?`, not used by scripts; reserved for the Go API.

func (*ColumnRef) expr() {}
func (*Literal) expr()   {}
func (*Interval) expr()  {}
func (*Unary) expr()     {}
func (*Binary) expr()    {}
func (*Between) expr()   {}
func (*In) expr()        {}
func (*IsNull) expr()    {}
func (*IsBool) expr()    {}
func (*Case) expr()      {}
func (*Cast) expr()      {}
func (*Call) expr()      {}
func (*Subscript) expr() {}
func (*Field) expr()     {}
func (*Paren) expr()     {}
func (*Subquery) expr()  {}

// Positions.

func (n *Ident) Position() Pos          { return n.At }
func (n *Name) Position() Pos           { return n.At }
func (n *CreateTable) Position() Pos    { return n.At }
func (n *CreateView) Position() Pos     { return n.At }
func (n *CreateFunction) Position() Pos { return n.At }
func (n *Insert) Position() Pos         { return n.At }
func (n *Set) Position() Pos            { return n.At }
func (n *Reset) Position() Pos          { return n.At }
func (n *Explain) Position() Pos        { return n.At }
func (n *StatementSet) Position() Pos   { return n.At }
func (n *QueryStmt) Position() Pos      { return n.At }
func (n *Query) Position() Pos          { return n.At }
func (n *SetOp) Position() Pos          { return n.At }
func (n *Select) Position() Pos         { return n.At }
func (n *TableRef) Position() Pos       { return n.At }
func (n *SubqueryRef) Position() Pos    { return n.At }
func (n *TableFunc) Position() Pos      { return n.At }
func (n *Join) Position() Pos           { return n.At }
func (n *ColumnRef) Position() Pos      { return n.Name.At }
func (n *Literal) Position() Pos        { return n.At }
func (n *Interval) Position() Pos       { return n.At }
func (n *Unary) Position() Pos          { return n.At }
func (n *Binary) Position() Pos         { return n.At }
func (n *Between) Position() Pos        { return n.At }
func (n *In) Position() Pos             { return n.At }
func (n *IsNull) Position() Pos         { return n.At }
func (n *IsBool) Position() Pos         { return n.At }
func (n *Case) Position() Pos           { return n.At }
func (n *Cast) Position() Pos           { return n.At }
func (n *Call) Position() Pos           { return n.At }
func (n *Subscript) Position() Pos      { return n.At }
func (n *Field) Position() Pos          { return n.At }
func (n *Paren) Position() Pos          { return n.At }
func (n *Subquery) Position() Pos       { return n.At }
