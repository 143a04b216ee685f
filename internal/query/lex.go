package query

import (
	"strconv"
	"strings"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // bare word; segs are its pieces between unescaped '*'
	tPhrase         // "quoted" or 'quoted' text
	tRegex          // /regex/
	tLParen         // (
	tRParen         // )
	tPipe           // |
	tComma          // , (pipes only)
	tAnd            // AND
	tOr             // OR
	tNot            // NOT or a leading '-'
	tField          // name[idx] op; the next token is its value
	tRange          // [a, b) after ts:
)

var tokNames = [...]string{
	tEOF: "end of query", tWord: "word", tPhrase: "phrase", tRegex: "regex",
	tLParen: "'('", tRParen: "')'", tPipe: "'|'", tComma: "','", tAnd: "AND",
	tOr: "OR", tNot: "NOT", tField: "field", tRange: "range",
}

type token struct {
	kind tokKind
	pos  int    // byte offset of the token's first byte
	text string // unescaped text (word, phrase, regex source, range body)
	// word
	segs    []string // pieces between unescaped '*'
	star    bool     // an unescaped '*' occurs
	escaped bool     // a backslash escape occurs
	// field
	name string
	idx  int // param[idx]; -1 when absent
	op   string
	// range
	open, close byte
}

// lexer scans tokens on demand; the parser switches it into pipe mode after
// the first '|' and into value mode after a field.
type lexer struct {
	src   string
	pos   int
	pipe  bool   // after '|': ',' is a token; no fields, keywords, regexes or '-'
	field *token // the field whose value comes next
	look  token
	has   bool
}

func (l *lexer) peek() token {
	if !l.has {
		l.look = l.scan()
		l.has = true
	}
	return l.look
}

func (l *lexer) next() token {
	t := l.peek()
	l.has = false
	return t
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// peekByte is the byte at the scan position, 0 at the end.
func (l *lexer) peekByte() byte {
	if l.pos >= len(l.src) {
		return 0
	}
	return l.src[l.pos]
}

// isDelim reports whether c ends a bare word.
func (l *lexer) isDelim(c byte) bool {
	return isSpace(c) || c == '(' || c == ')' || c == '|' || (l.pipe && c == ',')
}

func (l *lexer) scan() token {
	if l.field != nil {
		f := l.field
		l.field = nil
		return l.scanValue(f)
	}
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start}
	}
	c := l.src[l.pos]
	switch {
	case c == '(':
		l.pos++
		return token{kind: tLParen, pos: start}
	case c == ')':
		l.pos++
		return token{kind: tRParen, pos: start}
	case c == '|':
		l.pos++
		return token{kind: tPipe, pos: start}
	case c == ',' && l.pipe:
		l.pos++
		return token{kind: tComma, pos: start}
	case c == '"' || c == '\'':
		return l.scanPhrase()
	case c == '/' && !l.pipe:
		return l.scanRegex()
	case c == '-' && !l.pipe:
		l.pos++
		if c := l.peekByte(); c == 0 || isSpace(c) || c == ')' || c == '|' {
			l.errorf(start, "expected a term after '-' (quote \"-\" to search for it)")
		}
		return token{kind: tNot, pos: start}
	}
	if !l.pipe {
		if t, ok := l.scanField(); ok {
			return t
		}
	}
	t := l.scanWord(false)
	if !l.pipe && !t.star && !t.escaped {
		switch strings.ToLower(t.text) {
		case "and":
			t.kind = tAnd
		case "or":
			t.kind = tOr
		case "not":
			t.kind = tNot
		}
	}
	return t
}

// scanWord reads a bare word: backslash escapes the next byte, an unescaped
// '*' splits it into segments. In value mode only whitespace, ')' and '|'
// end it.
func (l *lexer) scanWord(value bool) token {
	t := token{kind: tWord, pos: l.pos, idx: -1}
	var text, seg strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if value {
			if isSpace(c) || c == ')' || c == '|' {
				break
			}
		} else if l.isDelim(c) {
			break
		}
		switch c {
		case '\\':
			if l.pos+1 >= len(l.src) {
				l.errorf(l.pos, "backslash at the end of the query")
			}
			t.escaped = true
			text.WriteByte(l.src[l.pos+1])
			seg.WriteByte(l.src[l.pos+1])
			l.pos += 2
			continue
		case '*':
			t.star = true
			t.segs = append(t.segs, seg.String())
			seg.Reset()
		default:
			seg.WriteByte(c)
		}
		text.WriteByte(c)
		l.pos++
	}
	t.segs = append(t.segs, seg.String())
	t.text = text.String()
	return t
}

// scanPhrase reads "text" or 'text'. Escapes: \\ \" \' \n \t \r.
func (l *lexer) scanPhrase() token {
	start := l.pos
	q := l.src[l.pos]
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			l.errorf(start, "unterminated phrase: missing closing %c", q)
		}
		c := l.src[l.pos]
		if c == q {
			l.pos++
			break
		}
		if c == '\\' {
			if l.pos+1 >= len(l.src) {
				l.errorf(start, "unterminated phrase: missing closing %c", q)
			}
			switch e := l.src[l.pos+1]; e {
			case '\\', '"', '\'':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				l.errorf(l.pos, "unknown escape \\%c in phrase (escapes: \\\\ \\\" \\' \\n \\t \\r)", e)
			}
			l.pos += 2
			continue
		}
		b.WriteByte(c)
		l.pos++
	}
	l.endOfTerm("phrase")
	return token{kind: tPhrase, pos: start, text: b.String(), idx: -1}
}

// scanRegex reads /regex/; \/ stands for '/', every other backslash goes to
// RE2 as written.
func (l *lexer) scanRegex() token {
	start := l.pos
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			l.errorf(start, "unterminated regex: missing closing /")
		}
		c := l.src[l.pos]
		if c == '/' {
			l.pos++
			break
		}
		if c == '\\' && l.pos+1 < len(l.src) {
			if l.src[l.pos+1] == '/' {
				b.WriteByte('/')
			} else {
				b.WriteByte('\\')
				b.WriteByte(l.src[l.pos+1])
			}
			l.pos += 2
			continue
		}
		b.WriteByte(c)
		l.pos++
	}
	l.endOfTerm("regex")
	return token{kind: tRegex, pos: start, text: b.String(), idx: -1}
}

// endOfTerm insists that a phrase or regex is followed by a delimiter.
func (l *lexer) endOfTerm(what string) {
	if l.pos < len(l.src) {
		c := l.src[l.pos]
		if !isSpace(c) && c != ')' && c != '|' && !(l.pipe && c == ',') {
			l.errorf(l.pos, "expected a space after the %s", what)
		}
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || (c|0x20) >= 'a' && (c|0x20) <= 'z'
}

func isIdent(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '.' || c == '-'
}

// scanField recognises NAME[IDX]OP at the start of a term, where NAME is
// [A-Za-z_][A-Za-z0-9_.-]*, [IDX] is optional and OP is one of
// : = != < <= > >=. On a match the next token is scanned as its value.
func (l *lexer) scanField() (token, bool) {
	s := l.src[l.pos:]
	if !isIdentStart(s[0]) {
		return token{}, false
	}
	i := 1
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	t := token{kind: tField, pos: l.pos, name: s[:i], idx: -1}
	if i < len(s) && s[i] == '[' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 || j >= len(s) || s[j] != ']' || j-i-1 > 6 {
			if t.name == "param" || t.name == "params" {
				l.errorf(l.pos+i+1, "bad number: param[N] takes a parameter position 0..999999")
			}
			return token{}, false
		}
		n := 0
		for _, d := range s[i+1 : j] {
			n = n*10 + int(d-'0')
		}
		t.idx = n
		i = j + 1
	}
	for _, op := range []string{":", "!=", "<=", ">=", "=", "<", ">"} {
		if strings.HasPrefix(s[i:], op) {
			t.op = op
			break
		}
	}
	if t.op == "" {
		if t.idx >= 0 && (t.name == "param" || t.name == "params") {
			l.errorf(l.pos+i, "expected an operator (= != < <= > >=) after %s", s[:i])
		}
		return token{}, false
	}
	l.pos += i + len(t.op)
	l.field = &t
	return t, true
}

// scanValue reads the value of field f, which must follow it directly: a
// phrase, ~/regex/ (or ~"regex"), a time range after ts:, or a word (which
// may contain '/', ':' and the like).
func (l *lexer) scanValue(f *token) token {
	if l.pos >= len(l.src) || isSpace(l.src[l.pos]) || l.src[l.pos] == ')' || l.src[l.pos] == '|' {
		l.errorf(l.pos, "expected a value after %s%s", f.display(), f.op)
	}
	switch c := l.src[l.pos]; {
	case c == '"' || c == '\'':
		return l.scanPhrase()
	case c == '~':
		l.pos++
		switch l.peekByte() {
		case '/':
			return l.scanRegex()
		case '"', '\'':
			t := l.scanPhrase()
			t.kind = tRegex
			return t
		}
		l.errorf(l.pos, "expected /regex/ or \"regex\" after ~")
	case (c == '[' || c == '(') && f.name == "ts" && f.op == ":":
		start := l.pos
		end := strings.IndexAny(l.src[l.pos+1:], "])")
		if end < 0 {
			l.errorf(start, "unterminated time range: missing ] or )")
		}
		end += l.pos + 1
		t := token{kind: tRange, pos: start, text: l.src[start+1 : end], open: c, close: l.src[end], idx: -1}
		l.pos = end + 1
		l.endOfTerm("time range")
		return t
	}
	return l.scanWord(true)
}

// display renders a field token's name as written.
func (t token) display() string {
	if t.idx >= 0 {
		return t.name + "[" + strconv.Itoa(t.idx) + "]"
	}
	return t.name
}
