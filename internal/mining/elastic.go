package mining

import (
	"slices"
	"strings"
)

// Elastic templates.
//
// Fixed-shape templates only gather lines with the same structure. When a
// line matches none, it is aligned (longest common subsequence of literal
// tokens) with the templates that share its anchor word; if enough of the
// words agree, the template becomes elastic: its text keeps the aligned
// literals and a wildcard wherever either side had anything else, so an
// optional "(1.1 KB)" or a "lifetime 00:01" vs "lifetime <1 sec" fits one
// template. An elastic template matches a line when its literal pieces occur
// in the line in order (first as a prefix, last as a suffix); the
// parameters are the bytes in between, so rendering is exact by
// construction.

// Bounds on the work for a line of a new shape: the alignment table
// (tokens x tokens) and the number of alignments tried.
const (
	maxAlignCells = 1 << 14
	maxAligns     = 4
	maxCandidates = 64 // newest templates of an anchor considered
)

// anchorKey hashes the first plain word of a line, or returns 0.
func anchorKey(line string, toks []token) uint64 {
	for _, tk := range toks {
		if tk.kind != kWord {
			continue
		}
		w := line[tk.start:tk.end]
		if !isPlainWord(w) {
			continue
		}
		h := uint64(14695981039346656037)
		for i := 0; i < len(w); i++ {
			h ^= uint64(w[i])
			h *= 1099511628211
		}
		if h == 0 {
			h = 1
		}
		return h
	}
	return 0
}

// matchPieces matches line against the literal pieces of an elastic
// template and returns the parameters.
func matchPieces(pieces []string, line string) ([]string, bool) {
	if !strings.HasPrefix(line, pieces[0]) {
		return nil, false
	}
	last := pieces[len(pieces)-1]
	if len(line) < len(pieces[0])+len(last) || !strings.HasSuffix(line, last) {
		return nil, false
	}
	ps := make([]string, 0, len(pieces)-1)
	pos, end := len(pieces[0]), len(line)-len(last)
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(line[pos:end], p)
		if i < 0 {
			return nil, false
		}
		ps = append(ps, line[pos:pos+i])
		pos += i + len(p)
	}
	ps = append(ps, line[pos:end])
	return ps, true
}

// maxShapes bounds the line shapes an elastic template remembers.
const maxShapes = 64

// elastic assigns a line that matched no fixed template to an elastic
// template of its anchor: directly when the template already accepted a
// line of this shape, else after aligning the line with every template of
// the anchor, widening the most similar one (making it elastic) if needed.
func (m *Model) elastic(t *tenant, anchor, key uint64, line string, toks []token, events []Event) (*cluster, []string, []Event) {
	if anchor == 0 || t.set.elasticSimilarity > 1 {
		return nil, nil, events
	}
	for _, c := range t.byShape[key] {
		if c.anchor == anchor {
			if ps, ok := matchPieces(c.pieces, line); ok {
				return c, ps, events
			}
		}
	}
	var best *cluster
	var bestText string
	bestScore := 0.0
	lw, glued := 0, 0
	for i, tk := range toks {
		if tk.kind == kWord {
			lw++
			if gluedToVar(toks, i) {
				glued++
			}
		}
	}
	tries := 0
	cands := t.anchors[anchor]
	for k := len(cands) - 1; k >= 0 && k >= len(cands)-maxCandidates; k-- {
		c := cands[k]
		// The score is at most min/max of the word counts (the line's
		// words glued to a variable may be part of a value, see align).
		tw := c.wordCount()
		if float64(min(tw, lw)) < t.set.elasticSimilarity*float64(max(tw, lw)-glued) {
			continue
		}
		if tries++; tries > maxAligns {
			break
		}
		text, score, ok := align(c.text(), line, toks)
		if ok && score >= t.set.elasticSimilarity && score > bestScore {
			best, bestText, bestScore = c, text, score
		}
	}
	if best == nil {
		return nil, nil, events
	}
	c := best
	if c.elastic {
		if ps, ok := matchPieces(c.pieces, line); ok {
			t.addShape(c, key)
			return c, ps, events
		}
	}
	pieces := strings.Split(bestText, Wildcard)
	ps, ok := matchPieces(pieces, line)
	if !ok {
		return nil, nil, events
	}
	if r, err := Render(bestText, ps); err != nil || r != line {
		return nil, nil, events
	}
	if !c.elastic {
		t.removeFromBucket(c)
		c.elastic = true
		t.addShape(c, c.key)
		c.slots = nil
		c.alts = nil
		c.line = ""
	}
	t.addShape(c, key)
	c.pieces = pieces
	c.nparams = len(pieces) - 1
	if prev := c.text(); prev != bestText {
		c.words = -1
		c.texts = append(c.texts, bestText)
		m.changes++
		events = append(events, Event{Kind: EventChanged, ID: c.id, Tenant: t.name, Version: c.version(), Template: bestText, Previous: prev})
	}
	// Fixed templates of the anchor whose text the elastic one now matches
	// with a compatible alignment are merged into it.
	var absorbed []*cluster
	cands = t.anchors[anchor]
	tries = 0
	for k := len(cands) - 1; k >= 0 && k >= len(cands)-maxCandidates; k-- {
		o := cands[k]
		if o == c || o.elastic {
			continue
		}
		if _, ok := matchPieces(pieces, o.text()); !ok {
			continue
		}
		if tries++; tries > maxAligns {
			break
		}
		if _, score, ok := align(bestText, o.text(), mustTokens(o.text())); ok && score >= t.set.elasticSimilarity {
			absorbed = append(absorbed, o)
		}
	}
	for k := len(absorbed) - 1; k >= 0; k-- { // oldest first
		o := absorbed[k]
		t.addShape(c, o.key)
		events = m.merge(t, o, c, events)
	}
	return c, ps, events
}

func mustTokens(s string) []token {
	toks, _, _ := tokenize(nil, s, HardMaxTokens)
	return toks
}

// addShape records that elastic template c accepts lines of shape key.
// Templates of one shape are kept in id order.
func (t *tenant) addShape(c *cluster, key uint64) {
	if len(c.shapes) >= maxShapes || slices.Contains(c.shapes, key) {
		return
	}
	c.shapes = append(c.shapes, key)
	t.indexShape(c, key)
}

func (t *tenant) indexShape(c *cluster, key uint64) {
	b := t.byShape[key]
	i, _ := slices.BinarySearchFunc(b, c.id, func(x *cluster, id uint64) int {
		switch {
		case x.id < id:
			return -1
		case x.id > id:
			return 1
		}
		return 0
	})
	t.byShape[key] = slices.Insert(b, i, c)
}

// unindexShapes removes elastic template c from the shape index.
func (t *tenant) unindexShapes(c *cluster) {
	for _, key := range c.shapes {
		b := t.byShape[key]
		if i := slices.Index(b, c); i >= 0 {
			b = slices.Delete(b, i, i+1)
		}
		if len(b) == 0 {
			delete(t.byShape, key)
		} else {
			t.byShape[key] = b
		}
	}
}

// wordCount returns the number of literal words of c's current text.
func (c *cluster) wordCount() int {
	if c.words < 0 {
		n := 0
		for _, tk := range mustTokens(c.text()) {
			if tk.kind == kWord {
				n++
			}
		}
		c.words = n
	}
	return c.words
}

// tokenHashes hashes each token (kind and bytes); variables hash to varHash.
func tokenHashes(s string, toks []token, varHash uint64) []uint64 {
	hs := make([]uint64, len(toks))
	for i, tk := range toks {
		if tk.kind == kVar {
			hs[i] = varHash
			continue
		}
		h := uint64(14695981039346656037) ^ uint64(tk.kind)
		for p := tk.start; p < tk.end; p++ {
			h ^= uint64(s[p])
			h *= 1099511628211
		}
		hs[i] = h | 2 // never 0 or 1
	}
	return hs
}

// align aligns the tokens of a template text with those of a line (longest
// common subsequence of equal literal tokens) and returns the merged text,
// with one wildcard for every stretch where either side has anything else,
// and the share of words that agree (of the larger word count).
func align(text, line string, ltoks []token) (string, float64, bool) {
	ttoks, _, over := tokenize(nil, text, HardMaxTokens)
	n, k := len(ttoks), len(ltoks)
	if over || n == 0 || k == 0 || n*k > maxAlignCells {
		return "", 0, false
	}
	// Token hashes make the inner loop cheap; equal hashes are confirmed
	// on the bytes. Variables never match (0 and 1 differ on purpose).
	th := tokenHashes(text, ttoks, 0)
	lh := tokenHashes(line, ltoks, 1)
	eq := func(i, j int) bool {
		if th[i] != lh[j] {
			return false
		}
		a, b := ttoks[i], ltoks[j]
		return text[a.start:a.end] == line[b.start:b.end]
	}
	// dp[i][j] = LCS of ttoks[i:] and ltoks[j:]
	w := k + 1
	dp := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := k - 1; j >= 0; j-- {
			v := dp[(i+1)*w+j]
			if x := dp[i*w+j+1]; x > v {
				v = x
			}
			if eq(i, j) {
				if x := dp[(i+1)*w+j+1] + 1; x > v {
					v = x
				}
			}
			dp[i*w+j] = v
		}
	}
	var b strings.Builder
	words, wordsT, wordsL := 0, 0, 0
	for _, tk := range ttoks {
		if tk.kind == kWord {
			wordsT++
		}
	}
	for _, tk := range ltoks {
		if tk.kind == kWord {
			wordsL++
		}
	}
	// A gap is a stretch where the sides differ. A gap with nothing on
	// one side (an insertion) must not hold words: an extra "user=root"
	// or "(bus 0)" makes a different event, an extra "(1.1 KB)" does not.
	gap := false
	// Variables and whitespace do not make a side non-empty. Nor may a
	// side that is only variables face one that is only literals: a value
	// replaced by a marker ("****") is a different event too.
	//
	// A gap with variables on both sides and words on one side only, in
	// one whitespace-free run whose only punctuation is brackets, is one
	// value written in two shapes ("0x7f3a10" and "NAME(0)"): its words
	// are part of the value, so they are allowed and do not count
	// against the score. Words on both sides ("depth 3" and "limit 5")
	// are different events.
	tSkip, lSkip, tWords, lWords, tVars, lVars := 0, 0, 0, 0, 0, 0
	tSpace, lSpace := 0, 0
	tOther, lOther := 0, 0 // punctuation other than brackets
	absorbedT, absorbedL := 0, 0
	closeGap := func() bool {
		var ok bool
		if tVars > 0 && lVars > 0 && tSpace == 0 && lSpace == 0 &&
			(tWords == 0 && lOther == 0 || lWords == 0 && tOther == 0) {
			ok = true
			absorbedT += tWords
			absorbedL += lWords
		} else {
			ok = !((tSkip == 0 && lWords > 0) || (lSkip == 0 && tWords > 0) ||
				(tSkip == 0 && tVars > 0 && lSkip > 0 && lVars == 0) ||
				(lSkip == 0 && lVars > 0 && tSkip > 0 && tVars == 0))
		}
		tSkip, lSkip, tWords, lWords, tVars, lVars = 0, 0, 0, 0, 0, 0
		tSpace, lSpace, tOther, lOther = 0, 0, 0, 0
		return ok
	}
	literal := func(k tokKind) bool { return k == kWord || k == kPunct }
	i, j := 0, 0
	for i < n || j < k {
		if i < n && j < k && eq(i, j) && dp[i*w+j] == dp[(i+1)*w+j+1]+1 {
			if gap {
				if !closeGap() {
					return "", 0, false
				}
				b.WriteString(Wildcard)
				gap = false
			}
			b.WriteString(line[ltoks[j].start:ltoks[j].end])
			if ltoks[j].kind == kWord {
				words++
			}
			i++
			j++
			continue
		}
		gap = true
		if i < n && (j >= k || dp[(i+1)*w+j] >= dp[i*w+j+1]) {
			if literal(ttoks[i].kind) {
				tSkip++
			}
			switch ttoks[i].kind {
			case kWord:
				tWords++
			case kVar:
				tVars++
			case kSpace:
				tSpace++
			case kPunct:
				if !isBracketTok(text, ttoks[i]) {
					tOther++
				}
			}
			i++
		} else {
			if literal(ltoks[j].kind) {
				lSkip++
			}
			switch ltoks[j].kind {
			case kWord:
				lWords++
			case kVar:
				lVars++
			case kSpace:
				lSpace++
			case kPunct:
				if !isBracketTok(line, ltoks[j]) {
					lOther++
				}
			}
			j++
		}
	}
	if gap {
		if !closeGap() {
			return "", 0, false
		}
		b.WriteString(Wildcard)
	}
	maxWords := max(wordsT-absorbedT, wordsL-absorbedL)
	if maxWords == 0 {
		return "", 0, false
	}
	return b.String(), float64(words) / float64(maxWords), true
}

// gluedToVar reports whether token i is in the same whitespace-delimited run
// as a variable token ("NONE" in "NONE(0)").
func gluedToVar(toks []token, i int) bool {
	for j := i - 1; j >= 0 && toks[j].kind != kSpace; j-- {
		if toks[j].kind == kVar {
			return true
		}
	}
	for j := i + 1; j < len(toks) && toks[j].kind != kSpace; j++ {
		if toks[j].kind == kVar {
			return true
		}
	}
	return false
}

// isBracketTok reports whether tk is one bracket byte.
func isBracketTok(s string, tk token) bool {
	if tk.end-tk.start != 1 {
		return false
	}
	switch s[tk.start] {
	case '(', ')', '[', ']', '{', '}', '<', '>':
		return true
	}
	return false
}
