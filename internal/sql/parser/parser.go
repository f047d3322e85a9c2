// Package parser reads onceflow's SQL, the streaming subset of Flink's
// SQL dialect, into the syntax tree of package ast: scripts of DDL (CREATE
// TABLE, VIEW, FUNCTION), INSERT, SET, RESET, EXPLAIN, statement sets and
// queries, their expressions and their data types.
//
// It is a hand-written lexer and a recursive-descent parser with
// precedence climbing for expressions. Every error is an *Error naming the
// line and column where the script goes wrong.
//
// The special syntaxes of some functions become plain calls:
//
//	TRIM([BOTH|LEADING|TRAILING] [chars] FROM s)  TRIM('BOTH', chars, s), chars ' ' when not written
//	TRIM(s)                                       TRIM(s)
//	SUBSTRING(s FROM a [FOR b])                   SUBSTRING(s, a[, b])
//	EXTRACT(unit FROM x)                          EXTRACT('UNIT', x), the unit upper case and singular
//	POSITION(a IN b)                              POSITION(a, b)
//	CURRENT_TIMESTAMP, LOCALTIMESTAMP, …          a call without arguments
//	ARRAY[a, b], MAP[k, v]                        ARRAY(a, b), MAP(k, v)
//
// -x is a Unary of a positive literal, not a negative literal; x != y is
// the Binary "<>"; a column's inline PRIMARY KEY sets ColumnDef.PrimaryKey,
// not CreateTable.PrimaryKey. A /*+ … */ comment right after a table name
// in FROM is that table's hints, right after SELECT the query's hints;
// anywhere else it is a comment.
package parser

import (
	"fmt"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Error is a syntax error: where it is and what is wrong.
type Error struct {
	Pos ast.Pos
	Msg string
}

// Error prints the error as `line L, column C: message`.
func (e *Error) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

// parser is the state of one parse: the tokens and the current one.
type parser struct {
	toks []token
	i    int
	// depth is how deeply the current expression, type or query nests.
	depth int
}

func newParser(src string) (*parser, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return &parser{toks: toks}, nil
}

// Parse parses a script: statements separated by semicolons, the last
// semicolon optional.
func Parse(src string) (*ast.Script, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, err
	}
	return p.script()
}

// ParseExpr parses one scalar expression, as a computed column or a
// WHERE condition is written.
func ParseExpr(src string) (ast.Expr, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, err
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	return e, p.end("the expression")
}

// ParseType parses one data type: BIGINT, DECIMAL(10, 2), TIMESTAMP(3)
// WITH LOCAL TIME ZONE, ROW<a INT, b STRING>, ARRAY<T>, MAP<K, V>.
func ParseType(src string) (*ast.Type, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, err
	}
	t, err := p.dataType()
	if err != nil {
		return nil, err
	}
	return t, p.end("the type")
}

// ParseQuery parses one query: [WITH …] SELECT … [ORDER BY …] [LIMIT n].
func ParseQuery(src string) (*ast.Query, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, err
	}
	q, err := p.query()
	if err != nil {
		return nil, err
	}
	if p.peek().isOp(";") {
		p.advance()
	}
	return q, p.end("the query")
}

// end checks that nothing follows what was parsed.
func (p *parser) end(what string) error {
	if t := p.peek(); t.kind != tEOF {
		return p.errAt(t, fmt.Sprintf("unexpected %s after %s", t.describe(), what))
	}
	return nil
}

// Token access.

func (p *parser) peek() token { return p.toks[p.i] }

// peekAt is the token n after the current one (the EOF token past the end).
func (p *parser) peekAt(n int) token {
	if p.i+n >= len(p.toks) {
		return p.toks[len(p.toks)-1]
	}
	return p.toks[p.i+n]
}

func (p *parser) advance() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// accept consumes the keyword kw if it is next.
func (p *parser) accept(kw string) bool {
	if p.peek().is(kw) {
		p.advance()
		return true
	}
	return false
}

// acceptSeq consumes the keywords kws if they are all next.
func (p *parser) acceptSeq(kws ...string) bool {
	for n, kw := range kws {
		if !p.peekAt(n).is(kw) {
			return false
		}
	}
	p.i += len(kws)
	return true
}

// acceptOp consumes the operator op if it is next.
func (p *parser) acceptOp(op string) bool {
	if p.peek().isOp(op) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) errAt(t token, msg string) *Error { return &Error{Pos: t.pos, Msg: msg} }

// expected is the error `expected X, found Y` at the current token.
func (p *parser) expected(what string) *Error {
	t := p.peek()
	return p.errAt(t, fmt.Sprintf("expected %s, found %s", what, t.describe()))
}

// expect consumes the keyword kw or fails.
func (p *parser) expect(kw string) (token, error) {
	if !p.peek().is(kw) {
		return token{}, p.expected(kw)
	}
	return p.advance(), nil
}

// expectOp consumes the operator op or fails.
func (p *parser) expectOp(op string) (token, error) {
	if !p.peek().isOp(op) {
		return token{}, p.expected(`"` + op + `"`)
	}
	return p.advance(), nil
}

// reserved are the words that cannot be an unquoted name in an
// expression, an alias or a table name (ast.Reserved lists them: the
// printer quotes them).
var reserved = ast.Reserved

// aliasStop are words that may follow a select item or a table without
// being its alias.
var aliasStop = map[string]bool{
	"ASC": true, "DESC": true, "NULLS": true, "FILTER": true, "OVER": true,
	"PARTITION": true, "MATCH_RECOGNIZE": true, "TABLESAMPLE": true,
}

// Names.

// ident parses a name part: an unquoted word that is not reserved, or a
// quoted identifier. what names the construct for the error.
func (p *parser) ident(what string) (ast.Ident, error) {
	t := p.peek()
	switch {
	case t.kind == tQIdent:
		p.advance()
		return ast.Ident{At: t.pos, Name: t.text, Quoted: true}, nil
	case t.kind == tWord && !reserved[t.up]:
		p.advance()
		return ast.Ident{At: t.pos, Name: t.text}, nil
	case t.kind == tWord:
		return ast.Ident{}, p.errAt(t, fmt.Sprintf("expected %s, found the reserved word %s (quote it in backticks: `%s`)", what, t.up, t.text))
	}
	return ast.Ident{}, p.expected(what)
}

// anyIdent parses a name where any word can be one (column names of a
// CREATE TABLE, fields of a ROW, an INSERT's column list).
func (p *parser) anyIdent(what string) (ast.Ident, error) {
	t := p.peek()
	if t.kind == tWord {
		p.advance()
		return ast.Ident{At: t.pos, Name: t.text}, nil
	}
	return p.ident(what)
}

// name parses a possibly qualified name a.b.c.
func (p *parser) name(what string) (ast.Name, error) {
	first, err := p.ident(what)
	if err != nil {
		return ast.Name{}, err
	}
	n := ast.Name{At: first.At, Parts: []ast.Ident{first}}
	for p.peek().isOp(".") && (p.peekAt(1).kind == tWord || p.peekAt(1).kind == tQIdent) {
		p.advance()
		part, err := p.anyIdent(what)
		if err != nil {
			return ast.Name{}, err
		}
		n.Parts = append(n.Parts, part)
	}
	return n, nil
}

// identList parses '(' ident {',' ident} ')'.
func (p *parser) identList(what string) ([]ast.Ident, error) {
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	var ids []ast.Ident
	for {
		id, err := p.anyIdent(what)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		if !p.acceptOp(",") {
			break
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return ids, nil
}

// stringLit parses a quoted string; what names it in the error.
func (p *parser) stringLit(what string) (string, ast.Pos, error) {
	t := p.peek()
	if t.kind != tString {
		return "", t.pos, p.expected(what)
	}
	p.advance()
	return t.text, t.pos, nil
}
