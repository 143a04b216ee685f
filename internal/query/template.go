package query

import (
	"strings"

	"github.com/quarrylake/quarry/internal/byteset"
)

// Template is one version of a tenant's template, as the lake's templates
// table holds it.
type Template struct {
	ID      uint64
	Version uint32
	Text    string // literal text with Wildcard for each parameter
	// Canonical is the template this one was merged into (0: none);
	// template:N selects a template when N is its ID or its Canonical.
	Canonical uint64
	// ParamBytes, when set, holds every byte that occurs in this template's
	// parameters (in the data the plan will be used on). It lets the plan
	// settle a term false when no parameter could supply it; nil means any
	// byte may occur.
	ParamBytes *byteset.Set
	// ParamPairs, when set, holds every pair of adjacent bytes within
	// one of this template's parameters (as ParamBytes, in the data the
	// plan will be used on): a term whose bytes a parameter must hold
	// side by side settles false without such a pair. nil means any pair
	// may occur.
	ParamPairs PairSet
}

// PairSet is a set of byte pairs. HasPair(a, b) reports whether b may
// follow a within one parameter: a set may answer true for a pair that
// never occurs (a hashed set), never false for one that does.
type PairSet interface {
	HasPair(a, b byte) bool
}

// tplInfo is a template split for evaluation.
type tplInfo struct {
	t      Template
	pieces []string             // literal text around the wildcards; len = params+1
	names  map[string][]nameRef // the values a name has, in text order
}

// nameRef is where a template gives a name its value: a parameter, or a
// value written in its literal text (the miner kept `level=info` whole).
type nameRef struct {
	param int    // the parameter's position; -1: the value is lit
	lit   string // the literal value, when param is -1
}

func newTplInfo(t Template) *tplInfo {
	ti := &tplInfo{t: t, pieces: strings.Split(t.Text, Wildcard)}
	add := func(name string, r nameRef) {
		if ti.names == nil {
			ti.names = map[string][]nameRef{}
		}
		ti.names[name] = append(ti.names[name], r)
	}
	for i, piece := range ti.pieces {
		last := i+1 == len(ti.pieces)
		literalValues(piece, i == 0, last, func(name, value string) { add(name, nameRef{param: -1, lit: value}) })
		if last {
			break
		}
		if name := ParamName(piece); name != "" {
			add(name, nameRef{param: i})
		}
	}
	return ti
}

// hasParamNamed reports whether some parameter of t is called name.
func (t *tplInfo) hasParamNamed(name string) bool {
	for _, r := range t.names[name] {
		if r.param >= 0 {
			return true
		}
	}
	return false
}

// literalValues calls add for each NAME=VALUE (or NAME: VALUE, a quoted
// key or value, a JSON member) written wholly in piece, one literal piece
// of a template's text, in order: the name as ParamName reads the text
// before the '=' or ':'; the value quoted ("..", '..' or \"..\", up to the
// closing quote, which must be in the piece) or up to a blank or one of
// ,;&)]}"'. A pair that a parameter may continue is not written wholly
// in the piece and is left out: a name at the start of a piece that is not
// the first (a parameter ends the key), an unquoted value at the end of a
// piece that is not the last, a quoted value whose closing quote is not in
// the piece. An unquoted empty value (`logname= uid=`) is none, and so is
// a URL's scheme (`http://x`, as ParamName reads `http://<*>`).
func literalValues(piece string, first, last bool, add func(name, value string)) {
	for j := 0; j < len(piece); j++ {
		c := piece[j]
		if c != '=' && c != ':' {
			continue
		}
		if j+1 < len(piece) && (piece[j+1] == '=' || piece[j+1] == ':') {
			j++ // ==, :=, ::, =: name nothing
			continue
		}
		if j > 0 && strings.IndexByte("=:!<>", piece[j-1]) >= 0 {
			continue
		}
		name := ParamName(piece[:j+1])
		if name == "" {
			continue
		}
		// where the name starts: before the separator, spaces and a
		// closing quote, as ParamName read them
		k := j
		for k > 0 && piece[k-1] == ' ' {
			k--
		}
		if k > 0 && (piece[k-1] == '"' || piece[k-1] == '\'') {
			k--
			if k > 0 && piece[k-1] == '\\' {
				k--
			}
		}
		if k-len(name) == 0 && !first {
			continue // the key goes on into the parameter before it
		}
		if c == ':' && strings.HasPrefix(piece[j+1:], "//") {
			continue // a URL's scheme, as ParamName reads "http://<*>"
		}
		k = j + 1
		for k < len(piece) && piece[k] == ' ' {
			k++
		}
		rest := piece[k:]
		if q := openQuote(rest); q != "" {
			if v, ok := quoted(rest[len(q):], q); ok {
				add(name, v)
			}
			continue
		}
		e := 0
		for e < len(rest) && strings.IndexByte(" \t,;&)]}\"'", rest[e]) < 0 {
			e++
		}
		if e > 0 && (e < len(rest) || last) {
			add(name, rest[:e])
		}
	}
}

// openQuote is the quote rest starts with: ", ', \" or none.
func openQuote(rest string) string {
	switch {
	case strings.HasPrefix(rest, `\"`):
		return `\"`
	case len(rest) > 0 && (rest[0] == '"' || rest[0] == '\''):
		return rest[:1]
	}
	return ""
}

// quoted is the text of s up to the closing quote q (one not escaped by
// a backslash, for a plain quote), and whether s has it.
func quoted(s, q string) (string, bool) {
	for i := 0; i+len(q) <= len(s); i++ {
		if len(q) == 1 && s[i] == '\\' {
			i++ // an escaped byte
			continue
		}
		if s[i:i+len(q)] == q {
			return s[:i], true
		}
	}
	return "", false
}

func (t *tplInfo) params() int { return len(t.pieces) - 1 }

// render appends the line to dst. With the wrong number of parameters it
// renders as far as both go, then the remaining pieces or parameters
// separated by spaces, so that a damaged record still searches.
func (t *tplInfo) render(dst []byte, params []string) []byte {
	if len(t.pieces) == 1 && len(params) == 0 {
		return append(dst, t.pieces[0]...)
	}
	if len(t.pieces) == 2 && t.pieces[0] == "" && t.pieces[1] == "" && len(params) == 1 {
		return append(dst, params[0]...) // the catch-all "<*>"
	}
	i := 0
	for ; i < len(params) && i+1 < len(t.pieces); i++ {
		dst = append(dst, t.pieces[i]...)
		dst = append(dst, params[i]...)
	}
	dst = append(dst, t.pieces[i]...)
	for _, p := range params[i:] {
		dst = append(dst, ' ')
		dst = append(dst, p...)
	}
	for _, p := range t.pieces[min(i+1, len(t.pieces)):] {
		dst = append(dst, p...)
	}
	return dst
}

// ParamName is the name a template gives the parameter that follows the
// literal text before (the piece of template text between the previous
// wildcard, or the start, and this one). The rule, applied to the end of
// before:
//
//  1. drop one opening quote (" or ', or \") if there is one;
//  2. drop spaces;
//  3. the next byte must be '=' or ':'; drop it, then drop spaces;
//  4. if the key is quoted (a closing " or ', or \" as inside a JSON
//     string), drop the closing quote; the name must then be preceded by
//     the same opening quote;
//  5. the name is the longest run of [A-Za-z0-9_.-] that ends there, and it
//     must start with a letter or '_'.
//
// So "status: <*>", "status=<*>", "status = <*>" and `status="<*>"` all
// name the parameter status, as do the JSON keys `"status":<*>` and
// `"status": "<*>"` and the escaped `\"status\":<*>` of JSON inside a
// JSON string; "12:<*>", "http://<*>", "<*>=<*>", "took <*>" and
// `status":<*>` (a closing quote that none opens) name nothing ("").
// Names are case-sensitive.
func ParamName(before string) string {
	s := before
	if n := len(s); n > 0 && (s[n-1] == '"' || s[n-1] == '\'') {
		s = strings.TrimSuffix(s[:n-1], "\\")
	}
	s = strings.TrimRight(s, " ")
	if n := len(s); n == 0 || s[n-1] != '=' && s[n-1] != ':' {
		return ""
	}
	s = strings.TrimRight(s[:len(s)-1], " ")
	quote := ""
	if n := len(s); n > 0 && (s[n-1] == '"' || s[n-1] == '\'') {
		quote = s[n-1:]
		if n > 1 && s[n-2] == '\\' {
			quote = s[n-2:]
		}
		s = s[:n-len(quote)]
	}
	i := len(s)
	for i > 0 && isIdent(s[i-1]) {
		i--
	}
	if i == len(s) || !isIdentStart(s[i]) { // the run must start with a letter or '_'
		return ""
	}
	if !strings.HasSuffix(s[:i], quote) { // a quoted key opens with its quote
		return ""
	}
	return s[i:]
}
