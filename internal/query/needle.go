package query

import "strings"

// Needle is a phrase every record the template plan selects must hold
// within one of its parameters: a phrase the residual requires (itself, a
// part of a glob, or such a term of an AND) that cannot overlap any
// literal piece of the template. Every rendering of the template is its pieces with a
// parameter between each two; an occurrence of such a phrase touches no
// piece, so it lies inside one parameter. A reader may then rule a row out
// by its parameters' values alone, without rendering its line, and match
// the residual on the lines of the rows it keeps (lake's readLines). Nil
// when there is none (the longest when there are several); a Scan plan
// only.
func (tp *TemplatePlan) Needle() []byte {
	if tp.Decision != Scan || tp.info == nil {
		return nil
	}
	var best []byte
	for _, b := range required(tp.residual, nil) {
		if len(b) > len(best) && withinParams(string(b), tp.info.pieces) {
			best = b
		}
	}
	return best
}

// required appends the byte strings n requires of a line: a phrase, each
// part of a glob (the parts occur in order, so each occurs), or those
// required by the kids of an AND.
func required(n *node, dst [][]byte) [][]byte {
	if n == nil {
		return dst
	}
	switch {
	case n.op == opText && (n.text == textPhrase || n.text == textGlob):
		for _, b := range n.segsB {
			if len(b) > 0 {
				dst = append(dst, b)
			}
		}
	case n.op == opAnd:
		for _, k := range n.kids {
			dst = required(k, dst)
		}
	}
	return dst
}

// withinParams reports whether every occurrence of t in a rendering
// P0 x1 P1 ... xn Pn of pieces (n of at least 1) lies inside one
// parameter xi. An occurrence that is not inside one parameter overlaps a
// piece Pj in a byte at least (or spans an empty Pj between two
// parameters): it is inside Pj, or it runs past Pj's end into x(j+1) (a
// prefix of t is a suffix of Pj), or past its start from xj (a suffix of
// t is a prefix of Pj), or both (Pj is inside t). The function is false
// when any of these can happen. (A phrase inside a piece settles its
// template, but a part of a glob does not.)
func withinParams(t string, pieces []string) bool {
	n := len(pieces) - 1
	if n < 1 || t == "" {
		return false
	}
	for j, p := range pieces {
		before, after := j > 0, j < n
		if p == "" {
			if before && after {
				return false // xj and x(j+1) adjoin: t may span both
			}
			continue
		}
		if strings.Contains(p, t) {
			return false
		}
		for k := 1; k <= len(p) && k < len(t); k++ {
			if after && strings.HasSuffix(p, t[:k]) {
				return false
			}
			if before && strings.HasPrefix(p, t[len(t)-k:]) {
				return false
			}
		}
		if before && after && len(p) < len(t) && strings.Contains(t, p) {
			return false
		}
	}
	return true
}
