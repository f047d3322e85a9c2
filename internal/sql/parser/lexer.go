package parser

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// kind is a token's kind.
type kind int

const (
	tEOF    kind = iota
	tWord        // an unquoted identifier or keyword
	tQIdent      // a `backticked` or "double-quoted" identifier
	tString      // a 'single-quoted' string
	tNumber      // 12, 1.5, 2e-3, .5
	tOp          // punctuation and operators
)

// token is one token of the script. Hints are the /*+ … */ comments
// written right before it (the parser reads them after a table name and
// ignores them elsewhere).
type token struct {
	kind kind
	// text is the word as written, a string's or quoted identifier's
	// value without quotes and escapes, a number as written, an operator.
	text string
	// up is text in upper case for words (keywords compare with it).
	up    string
	pos   ast.Pos
	hints []hintText
}

// hintText is the body of a /*+ … */ comment and where the body starts.
type hintText struct {
	body string
	pos  ast.Pos
}

// is reports whether the token is the keyword kw (upper case).
func (t token) is(kw string) bool { return t.kind == tWord && t.up == kw }

// isOp reports whether the token is the operator op.
func (t token) isOp(op string) bool { return t.kind == tOp && t.text == op }

// describe is the token as an error message quotes it.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return quoteString(t.text)
	case tQIdent:
		return "`" + strings.ReplaceAll(t.text, "`", "``") + "`"
	}
	return `"` + t.text + `"`
}

// quoteString quotes s as a SQL string literal.
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// lexer turns a script into tokens.
type lexer struct {
	src       string
	off       int
	line, col int
	toks      []token
	pending   []hintText
}

// lex returns the tokens of src, ending with a tEOF token, or the first
// lexical error.
func lex(src string) ([]token, error) {
	return lexAt(src, ast.Pos{Line: 1, Col: 1})
}

// lexAt lexes src as if it started at position start (hint bodies are
// lexed where they are in the script).
func lexAt(src string, start ast.Pos) ([]token, error) {
	lx := &lexer{src: src, line: start.Line, col: start.Col, toks: make([]token, 0, len(src)/5+1)}
	for {
		if err := lx.skipSpace(); err != nil {
			return nil, err
		}
		pos := lx.here()
		if lx.off >= len(lx.src) {
			lx.emit(token{kind: tEOF, pos: pos})
			return lx.toks, nil
		}
		if err := lx.next(pos); err != nil {
			return nil, err
		}
	}
}

func (lx *lexer) here() ast.Pos { return ast.Pos{Line: lx.line, Col: lx.col} }

func (lx *lexer) peekRune(ahead int) rune {
	off := lx.off
	for i := 0; ; i++ {
		if off >= len(lx.src) {
			return 0
		}
		r, n := utf8.DecodeRuneInString(lx.src[off:])
		if i == ahead {
			return r
		}
		off += n
	}
}

// advance moves past one rune, counting lines and columns.
func (lx *lexer) advance() rune {
	r, n := utf8.DecodeRuneInString(lx.src[lx.off:])
	lx.off += n
	if r == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	return r
}

func (lx *lexer) emit(t token) {
	t.hints = lx.pending
	lx.pending = nil
	lx.toks = append(lx.toks, t)
}

// skipSpace skips white space and comments, keeping hint comments.
func (lx *lexer) skipSpace() error {
	for lx.off < len(lx.src) {
		r := lx.peekRune(0)
		switch {
		case unicode.IsSpace(r):
			lx.advance()
		case r == '-' && lx.peekRune(1) == '-':
			for lx.off < len(lx.src) && lx.peekRune(0) != '\n' {
				lx.advance()
			}
		case r == '/' && lx.peekRune(1) == '*':
			start := lx.here()
			lx.advance()
			lx.advance()
			hint := lx.peekRune(0) == '+'
			if hint {
				lx.advance()
			}
			bodyPos, bodyOff := lx.here(), lx.off
			for {
				if lx.off >= len(lx.src) {
					return &Error{Pos: start, Msg: "unterminated comment: /* without */"}
				}
				if lx.peekRune(0) == '*' && lx.peekRune(1) == '/' {
					break
				}
				lx.advance()
			}
			body := lx.src[bodyOff:lx.off]
			lx.advance()
			lx.advance()
			if hint {
				lx.pending = append(lx.pending, hintText{body: body, pos: bodyPos})
			}
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// twoCharOps are the operators of two characters.
var twoCharOps = []string{"<>", "!=", "<=", ">=", "||", "=>"}

// next lexes one token starting at pos.
func (lx *lexer) next(pos ast.Pos) error {
	r := lx.peekRune(0)
	switch {
	case isIdentStart(r):
		start := lx.off
		for lx.off < len(lx.src) && isIdentPart(lx.peekRune(0)) {
			lx.advance()
		}
		w := lx.src[start:lx.off]
		lx.emit(token{kind: tWord, text: w, up: strings.ToUpper(w), pos: pos})
	case isDigit(r) || (r == '.' && isDigit(lx.peekRune(1))):
		start := lx.off
		for isDigit(lx.peekRune(0)) {
			lx.advance()
		}
		if lx.peekRune(0) == '.' && isDigit(lx.peekRune(1)) {
			lx.advance()
			for isDigit(lx.peekRune(0)) {
				lx.advance()
			}
		}
		if e := lx.peekRune(0); e == 'e' || e == 'E' {
			s := lx.peekRune(1)
			if isDigit(s) || ((s == '+' || s == '-') && isDigit(lx.peekRune(2))) {
				lx.advance()
				lx.advance()
				for isDigit(lx.peekRune(0)) {
					lx.advance()
				}
			}
		}
		lx.emit(token{kind: tNumber, text: lx.src[start:lx.off], pos: pos})
	case r == '\'':
		s, ok := lx.quoted('\'')
		if !ok {
			return &Error{Pos: pos, Msg: "unterminated string: ' without its closing '"}
		}
		lx.emit(token{kind: tString, text: s, pos: pos})
	case r == '`' || r == '"':
		s, ok := lx.quoted(r)
		if !ok {
			return &Error{Pos: pos, Msg: "unterminated quoted identifier: " + string(r) + " without its closing " + string(r)}
		}
		if s == "" {
			return &Error{Pos: pos, Msg: "empty quoted identifier"}
		}
		lx.emit(token{kind: tQIdent, text: s, pos: pos})
	default:
		for _, op := range twoCharOps {
			if strings.HasPrefix(lx.src[lx.off:], op) {
				lx.advance()
				lx.advance()
				lx.emit(token{kind: tOp, text: op, pos: pos})
				return nil
			}
		}
		if strings.ContainsRune("=<>+-*/%,.()[];", r) {
			lx.advance()
			lx.emit(token{kind: tOp, text: string(r), pos: pos})
			return nil
		}
		return &Error{Pos: pos, Msg: "unexpected character " + quoteRune(r)}
	}
	return nil
}

func quoteRune(r rune) string {
	if r == '"' {
		return `'"'`
	}
	return `"` + string(r) + `"`
}

// quoted reads a quoted string or identifier whose quote q is doubled to
// escape it; ok is false when it is not closed.
func (lx *lexer) quoted(q rune) (string, bool) {
	lx.advance()
	var b strings.Builder
	for lx.off < len(lx.src) {
		r := lx.advance()
		if r == q {
			if lx.peekRune(0) == q && lx.off < len(lx.src) {
				lx.advance()
				b.WriteRune(q)
				continue
			}
			return b.String(), true
		}
		b.WriteRune(r)
	}
	return "", false
}
