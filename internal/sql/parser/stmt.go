package parser

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/suggest"
)

// script parses stmt {; stmt} [;].
func (p *parser) script() (*ast.Script, error) {
	s := &ast.Script{}
	for {
		for p.acceptOp(";") {
		}
		if p.peek().kind == tEOF {
			return s, nil
		}
		st, err := p.stmt()
		if err != nil {
			return nil, err
		}
		s.Stmts = append(s.Stmts, st)
		if t := p.peek(); !t.isOp(";") && t.kind != tEOF {
			return nil, p.errAt(t, fmt.Sprintf(`expected ";" or the end of the script after the statement, found %s`, t.describe()))
		}
	}
}

// statementWords are the words a statement starts with.
var statementWords = []string{"CREATE", "INSERT", "SELECT", "WITH", "SET", "RESET", "EXPLAIN", "EXECUTE", "BEGIN"}

func (p *parser) stmt() (ast.Stmt, error) {
	t := p.peek()
	switch {
	case t.is("CREATE"):
		return p.create()
	case t.is("INSERT"):
		return p.insert()
	case t.is("SET"):
		return p.set()
	case t.is("RESET"):
		return p.reset()
	case t.is("EXPLAIN"):
		p.advance()
		p.acceptSeq("PLAN", "FOR")
		if p.peek().is("EXPLAIN") {
			return nil, p.expected("a statement to explain")
		}
		st, err := p.stmt()
		if err != nil {
			return nil, err
		}
		return &ast.Explain{At: t.pos, Stmt: st}, nil
	case t.is("EXECUTE"):
		p.advance()
		if !p.acceptSeq("STATEMENT", "SET") {
			return nil, p.expected("STATEMENT SET after EXECUTE")
		}
		if _, err := p.expect("BEGIN"); err != nil {
			return nil, err
		}
		return p.statementSet(t)
	case t.is("BEGIN"):
		p.advance()
		if !p.acceptSeq("STATEMENT", "SET") {
			return nil, p.expected("STATEMENT SET after BEGIN")
		}
		if _, err := p.expectOp(";"); err != nil {
			return nil, err
		}
		return p.statementSet(t)
	case t.is("SELECT"), t.is("WITH"), t.isOp("("):
		q, err := p.query()
		if err != nil {
			return nil, err
		}
		return &ast.QueryStmt{At: t.pos, Query: q}, nil
	case t.is("DROP"), t.is("ALTER"), t.is("USE"), t.is("SHOW"), t.is("DESCRIBE"), t.is("DESC"), t.is("LOAD"), t.is("UNLOAD"), t.is("ADD"):
		return nil, p.errAt(t, fmt.Sprintf("the %s statement is not supported", t.up))
	}
	msg := fmt.Sprintf("expected a statement (CREATE, INSERT, SELECT, SET, …), found %s", t.describe())
	if t.kind == tWord {
		if s := suggest.Closest(t.up, statementWords); s != "" {
			msg = fmt.Sprintf("unknown statement %s; did you mean %s?", t.describe(), s)
		}
	}
	return nil, p.errAt(t, msg)
}

// statementSet parses insert; {insert;} END, after BEGIN.
func (p *parser) statementSet(start token) (ast.Stmt, error) {
	ss := &ast.StatementSet{At: start.pos}
	for {
		for p.acceptOp(";") {
		}
		if p.accept("END") {
			break
		}
		if !p.peek().is("INSERT") {
			return nil, p.expected("INSERT or END in the statement set")
		}
		ins, err := p.insert()
		if err != nil {
			return nil, err
		}
		ss.Inserts = append(ss.Inserts, ins)
		if !p.peek().isOp(";") && !p.peek().is("END") {
			return nil, p.expected(`";" after the INSERT of the statement set`)
		}
	}
	if len(ss.Inserts) == 0 {
		return nil, p.errAt(start, "a statement set needs at least one INSERT")
	}
	return ss, nil
}

func (p *parser) create() (ast.Stmt, error) {
	t := p.advance()
	temporary := p.accept("TEMPORARY")
	system := p.accept("SYSTEM")
	switch k := p.peek(); {
	case k.is("TABLE") && !system:
		p.advance()
		return p.createTable(t, temporary)
	case k.is("VIEW") && !system:
		p.advance()
		return p.createView(t, temporary)
	case k.is("FUNCTION"):
		p.advance()
		return p.createFunction(t, temporary, system)
	case k.is("CATALOG"), k.is("DATABASE"):
		return nil, p.errAt(k, fmt.Sprintf("CREATE %s is not supported", k.up))
	}
	if system {
		return nil, p.expected("FUNCTION after CREATE … SYSTEM")
	}
	return nil, p.expected("TABLE, VIEW or FUNCTION after CREATE")
}

// ifNotExists parses an optional IF NOT EXISTS.
func (p *parser) ifNotExists() (bool, error) {
	if !p.accept("IF") {
		return false, nil
	}
	if !p.acceptSeq("NOT", "EXISTS") {
		return false, p.expected("NOT EXISTS after IF")
	}
	return true, nil
}

func (p *parser) createTable(t token, temporary bool) (ast.Stmt, error) {
	ct := &ast.CreateTable{At: t.pos, Temporary: temporary}
	var err error
	if ct.IfNotExists, err = p.ifNotExists(); err != nil {
		return nil, err
	}
	if ct.Name, err = p.name("a table name"); err != nil {
		return nil, err
	}
	if p.peek().is("LIKE") {
		return nil, p.errAt(p.peek(), "CREATE TABLE … LIKE is not supported")
	}
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	for {
		if err := p.tableElem(ct); err != nil {
			return nil, err
		}
		if !p.acceptOp(",") {
			break
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		if tk := p.peek(); tk.kind == tWord || tk.kind == tQIdent {
			return nil, p.expected(`"," or ")" after the column (a column is name type [constraints])`)
		}
		return nil, err
	}
	if p.accept("COMMENT") {
		if ct.Comment, _, err = p.stringLit("the table's comment as a quoted string"); err != nil {
			return nil, err
		}
	}
	if p.accept("PARTITIONED") {
		if _, err := p.expect("BY"); err != nil {
			return nil, err
		}
		if ct.PartitionBy, err = p.identList("a column name"); err != nil {
			return nil, err
		}
	}
	if p.accept("WITH") {
		if ct.Options, err = p.options(); err != nil {
			return nil, err
		}
	}
	return ct, nil
}

// tableElem parses one element of a CREATE TABLE: a column, a WATERMARK,
// a PRIMARY KEY.
func (p *parser) tableElem(ct *ast.CreateTable) error {
	t := p.peek()
	var err error
	switch {
	case t.is("WATERMARK") && p.peekAt(1).is("FOR"):
		p.advance()
		p.advance()
		if ct.Watermark != nil {
			return p.errAt(t, "a table has one WATERMARK")
		}
		w := &ast.Watermark{At: t.pos}
		if w.Column, err = p.anyIdent("the watermark's column"); err != nil {
			return err
		}
		if _, err := p.expect("AS"); err != nil {
			return err
		}
		if w.Expr, err = p.expr(); err != nil {
			return err
		}
		ct.Watermark = w
		return nil
	case t.is("CONSTRAINT") && p.peekAt(2).is("PRIMARY"), t.is("PRIMARY") && p.peekAt(1).is("KEY"):
		if t.is("CONSTRAINT") {
			p.advance()
			p.advance()
		}
		pk := &ast.PrimaryKey{At: p.peek().pos}
		p.advance()
		p.advance()
		if ct.PrimaryKey != nil {
			return p.errAt(t, "a table has one PRIMARY KEY")
		}
		if pk.Columns, err = p.identList("a column name"); err != nil {
			return err
		}
		if p.acceptSeq("NOT", "ENFORCED") {
			pk.NotEnforced = true
		}
		ct.PrimaryKey = pk
		return nil
	}
	name, err := p.anyIdent("a column name")
	if err != nil {
		return err
	}
	c := &ast.ColumnDef{At: name.At, Name: name}
	if p.accept("AS") {
		if c.Expr, err = p.expr(); err != nil {
			return err
		}
	} else {
		if c.Type, err = p.dataType(); err != nil {
			return err
		}
		c.NotNull = c.Type.NotNull
		if p.acceptSeq("PRIMARY", "KEY") {
			c.PrimaryKey = true
			p.acceptSeq("NOT", "ENFORCED")
		}
		if p.accept("METADATA") {
			c.Metadata = true
			if p.accept("FROM") {
				if c.MetadataKey, _, err = p.stringLit("the metadata key as a quoted string, as METADATA FROM 'timestamp'"); err != nil {
					return err
				}
			}
			c.Virtual = p.accept("VIRTUAL")
		}
	}
	if p.accept("COMMENT") {
		if c.Comment, _, err = p.stringLit("the column's comment as a quoted string"); err != nil {
			return err
		}
	}
	ct.Columns = append(ct.Columns, c)
	return nil
}

// options parses ( 'key' = 'value' {, …} ) after WITH.
func (p *parser) options() ([]*ast.Option, error) {
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	var opts []*ast.Option
	for {
		k := p.peek()
		if k.kind != tString {
			key, _ := p.looseValue()
			if key == "" {
				return nil, p.expected("an option 'key' = 'value' in WITH (…)")
			}
			val := "…"
			if p.acceptOp("=") {
				if v, ok := p.looseValue(); ok {
					val = v
				}
			}
			return nil, p.errAt(k, fmt.Sprintf("WITH option keys and values must be quoted strings: %s = %s", quoteString(key), quoteString(val)))
		}
		p.advance()
		if _, err := p.expectOp("="); err != nil {
			return nil, err
		}
		v := p.peek()
		if v.kind != tString {
			val, ok := p.looseValue()
			if !ok {
				return nil, p.expected("the option's value as a quoted string")
			}
			return nil, p.errAt(v, fmt.Sprintf("WITH option values must be quoted strings: %s = %s", quoteString(k.text), quoteString(val)))
		}
		p.advance()
		opts = append(opts, &ast.Option{At: k.pos, Key: k.text, Value: v.text, ValueAt: v.pos})
		if !p.acceptOp(",") {
			break
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return opts, nil
}

// looseValue reads an unquoted key or value: a dotted or dashed run of
// words and numbers, or a string; ok is false when there is none.
func (p *parser) looseValue() (string, bool) {
	var b strings.Builder
	last := -1
	for {
		t := p.peek()
		switch {
		case t.kind == tString && b.Len() == 0:
			p.advance()
			return t.text, true
		case t.kind == tWord, t.kind == tNumber, t.kind == tQIdent:
		case (t.isOp(".") || t.isOp("-")) && b.Len() > 0:
		default:
			return b.String(), b.Len() > 0
		}
		// Only tokens written without spaces between them make one value.
		if last >= 0 && (t.pos.Line != p.toks[last].pos.Line || t.pos.Col != p.toks[last].pos.Col+len([]rune(p.toks[last].text))) {
			return b.String(), true
		}
		b.WriteString(t.text)
		last = p.i
		p.advance()
	}
}

func (p *parser) createView(t token, temporary bool) (ast.Stmt, error) {
	cv := &ast.CreateView{At: t.pos, Temporary: temporary}
	var err error
	if cv.IfNotExists, err = p.ifNotExists(); err != nil {
		return nil, err
	}
	if cv.Name, err = p.name("a view name"); err != nil {
		return nil, err
	}
	if p.peek().isOp("(") {
		if cv.Columns, err = p.identList("a column name"); err != nil {
			return nil, err
		}
	}
	if _, err := p.expect("AS"); err != nil {
		return nil, err
	}
	if cv.Query, err = p.query(); err != nil {
		return nil, err
	}
	return cv, nil
}

func (p *parser) createFunction(t token, temporary, system bool) (ast.Stmt, error) {
	cf := &ast.CreateFunction{At: t.pos, Temporary: temporary, System: system}
	var err error
	if cf.IfNotExists, err = p.ifNotExists(); err != nil {
		return nil, err
	}
	if cf.Name, err = p.name("a function name"); err != nil {
		return nil, err
	}
	if _, err := p.expect("AS"); err != nil {
		return nil, err
	}
	if cf.Class, _, err = p.stringLit("the function's class as a quoted string"); err != nil {
		return nil, err
	}
	if p.accept("LANGUAGE") {
		l := p.peek()
		if l.kind != tWord {
			return nil, p.expected("a language (JAVA, SCALA, PYTHON)")
		}
		p.advance()
		cf.Language = l.up
	}
	return cf, nil
}

func (p *parser) insert() (*ast.Insert, error) {
	t := p.advance()
	ins := &ast.Insert{At: t.pos}
	switch {
	case p.accept("INTO"):
	case p.accept("OVERWRITE"):
		ins.Overwrite = true
	default:
		return nil, p.expected("INTO or OVERWRITE after INSERT")
	}
	var err error
	if ins.Table, err = p.name("a table name"); err != nil {
		return nil, err
	}
	if ins.Hints, err = p.hints(); err != nil {
		return nil, err
	}
	if p.peek().isOp("(") && !p.peekAt(1).is("SELECT") && !p.peekAt(1).is("WITH") && !p.peekAt(1).isOp("(") {
		if ins.Columns, err = p.identList("a column name"); err != nil {
			return nil, err
		}
	}
	if p.peek().is("VALUES") {
		return nil, p.errAt(p.peek(), "INSERT … VALUES is not supported; insert a query")
	}
	if !p.startsQuery() && !p.peek().isOp("(") {
		return nil, p.expected("a query (SELECT …) after INSERT INTO " + ins.Table.Last())
	}
	if ins.Query, err = p.query(); err != nil {
		return nil, err
	}
	return ins, nil
}

// atStmtEnd reports whether the statement ends here.
func (p *parser) atStmtEnd() bool {
	t := p.peek()
	return t.kind == tEOF || t.isOp(";")
}

// set parses SET, SET 'key' = 'value' and SET key = value.
func (p *parser) set() (ast.Stmt, error) {
	t := p.advance()
	s := &ast.Set{At: t.pos}
	if p.atStmtEnd() {
		return s, nil
	}
	k := p.peek()
	key, ok := p.looseValue()
	if !ok || key == "" {
		return nil, p.errAt(k, fmt.Sprintf("expected a setting 'key' = 'value' after SET, found %s", k.describe()))
	}
	s.Option.At, s.Option.Key = k.pos, key
	if _, err := p.expectOp("="); err != nil {
		return nil, err
	}
	v := p.peek()
	val, ok := p.looseValue()
	if !ok {
		return nil, p.expected("the setting's value after =")
	}
	s.Option.Value, s.Option.ValueAt = val, v.pos
	return s, nil
}

// reset parses RESET ['key'].
func (p *parser) reset() (ast.Stmt, error) {
	t := p.advance()
	r := &ast.Reset{At: t.pos}
	if p.atStmtEnd() {
		return r, nil
	}
	key, ok := p.looseValue()
	if !ok {
		return nil, p.expected("a setting's key after RESET")
	}
	r.Key = key
	return r, nil
}
