package query

import "strings"

// Needle is a phrase every record the template plan selects must hold
// within one of its parameters: a phrase the residual requires (itself, or
// a conjunct of an AND) that cannot overlap any literal piece of the
// template. Every rendering of the template is its pieces with a
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
	for _, n := range required(tp.residual, nil) {
		b := n.segsB[0]
		if len(b) > len(best) && withinParams(string(b), tp.info.pieces) {
			best = b
		}
	}
	return best
}

// required appends the phrases n requires: n itself, or the phrases
// required by the kids of an AND.
func required(n *node, dst []*node) []*node {
	if n == nil {
		return dst
	}
	switch {
	case n.op == opText && n.text == textPhrase && len(n.segsB) == 1 && len(n.segsB[0]) > 0:
		return append(dst, n)
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
// parameters); it is not inside Pj, or the template's text would hold t
// and settle it. So it runs past Pj's end into x(j+1) (a prefix of t is a
// suffix of Pj), or past its start from xj (a suffix of t is a prefix of
// Pj), or both (Pj is inside t). The function is false when any of these
// can happen.
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
