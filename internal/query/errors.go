package query

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseError is a query the parser rejects. Column is the 1-based byte
// column of the mistake in Query.
type ParseError struct {
	Query  string
	Column int
	Msg    string
}

func (e *ParseError) Error() string { return fmt.Sprintf("col %d: %s", e.Column, e.Msg) }

// Caret renders the query and, under it, a caret at the column of the
// mistake, for a terminal:
//
//	status=404 | top x param[2]
//	                 ^
//
// The caret is placed by runes, so it lines up under multi-byte text.
func (e *ParseError) Caret() string {
	q := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(e.Query)
	off := e.Column - 1
	if off > len(q) {
		off = len(q)
	}
	if off < 0 {
		off = 0
	}
	return q + "\n" + strings.Repeat(" ", utf8.RuneCountInString(q[:off])) + "^"
}

// errorf aborts parsing with a *ParseError at byte offset pos; parse
// recovers it.
func (l *lexer) errorf(pos int, format string, args ...any) {
	panic(&ParseError{Query: l.src, Column: pos + 1, Msg: fmt.Sprintf(format, args...)})
}
