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
	pieces []string         // literal text around the wildcards; len = params+1
	names  map[string][]int // parameter positions by name
}

func newTplInfo(t Template) *tplInfo {
	ti := &tplInfo{t: t, pieces: strings.Split(t.Text, Wildcard)}
	for i := 0; i+1 < len(ti.pieces); i++ {
		if name := ParamName(ti.pieces[i]); name != "" {
			if ti.names == nil {
				ti.names = map[string][]int{}
			}
			ti.names[name] = append(ti.names[name], i)
		}
	}
	return ti
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
