package query

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/byteset"
)

// canFormAll is former.canForm closing parameters under every byte of
// chars, with a slice for the state set: the reference the former's table,
// bit set and representative byte must agree with.
func canFormAll(segs, pieces []string, chars *byteset.Set) bool {
	return canFormPairs(segs, pieces, chars, nil)
}

// canFormPairs is canFormAll with the parameters' adjacent bytes pairs of
// pairs (nil: any): the closure walks (state, last byte) over every byte
// of chars, with no representative byte.
func canFormPairs(segs, pieces []string, chars *byteset.Set, pairs PairSet) bool {
	m := newSeqMatcher(segs)
	cur := make([]bool, m.final+1)
	cur[0] = true
	for i, piece := range pieces {
		for j := 0; j < len(piece); j++ {
			next := make([]bool, m.final+1)
			for s, on := range cur {
				if on {
					next[m.step(s, piece[j])] = true
				}
			}
			cur = next
		}
		if cur[m.final] || i == len(pieces)-1 {
			break
		}
		// last[b][s]: state s reached by a parameter ending in byte b
		last := make([][]bool, 256)
		for b := range last {
			last[b] = make([]bool, m.final+1)
		}
		type item struct {
			b byte
			s int
		}
		var todo []item
		for s, on := range cur {
			for b := 0; on && b < 256; b++ {
				if chars.Has(byte(b)) {
					if u := m.step(s, byte(b)); !last[b][u] {
						last[b][u] = true
						todo = append(todo, item{byte(b), u})
					}
				}
			}
		}
		for len(todo) > 0 {
			it := todo[0]
			todo = todo[1:]
			for c := 0; c < 256; c++ {
				if chars.Has(byte(c)) && (pairs == nil || pairs.HasPair(it.b, byte(c))) {
					if u := m.step(it.s, byte(c)); !last[c][u] {
						last[c][u] = true
						todo = append(todo, item{byte(c), u})
					}
				}
			}
		}
		for b := range last {
			for s, on := range last[b] {
				cur[s] = cur[s] || on
			}
		}
	}
	return cur[m.final]
}

// pairSet is an exact PairSet for tests.
type pairSet map[[2]byte]bool

func (p pairSet) HasPair(a, b byte) bool { return p[[2]byte{a, b}] }

// pairsOf is the pairs of adjacent bytes of each of ws.
func pairsOf(ws ...string) pairSet {
	p := pairSet{}
	for _, w := range ws {
		for i := 1; i < len(w); i++ {
			p[[2]byte{w[i-1], w[i]}] = true
		}
	}
	return p
}

// formCases makes random terms (segs) and templates (pieces) for canForm,
// over small alphabets so that terms, texts and parameters overlap often;
// word gives a parameter value.
type formCases struct{ r *rand.Rand }

const formAlpha = "abab.=x "

func (c formCases) word(alpha string, n int) string {
	var b strings.Builder
	for range c.r.IntN(n + 1) {
		b.WriteByte(alpha[c.r.IntN(len(alpha))])
	}
	return b.String()
}

func (c formCases) next() (segs, pieces []string) {
	segs = make([]string, 1+c.r.IntN(3))
	for j := range segs {
		for segs[j] == "" {
			segs[j] = c.word(formAlpha, 4)
		}
	}
	pieces = make([]string, 1+c.r.IntN(4))
	for j := range pieces {
		pieces[j] = c.word(formAlpha, 5)
	}
	return segs, pieces
}

func TestCanFormAgreesWithEveryByte(t *testing.T) {
	cases := formCases{rand.New(rand.NewPCG(1, 2))}
	trues, falses := 0, 0
	for i := range 20000 {
		segs, pieces := cases.next()
		var chars byteset.Set
		chars.AddString(cases.word(formAlpha+"yz019-", 6))
		want := canFormAll(segs, pieces, &chars)
		if got := newFormer(segs).canForm(pieces, &chars, nil); got != want {
			t.Fatalf("case %d: former(%q).canForm(%q, %q) = %v, every byte says %v", i, segs, pieces, charsString(&chars), got, want)
		}
		if want {
			trues++
		} else {
			falses++
		}
	}
	if trues < 1000 || falses < 1000 {
		t.Fatalf("cases not mixed: %d true, %d false", trues, falses)
	}
}

// TestCanFormPairsAgrees: with a pair set, canForm (the segments' bytes
// and one representative, a table of allowed pairs) answers as the
// reference that walks every byte and asks every pair; with the pairs of
// some parameter values, a term one of those values holds is never
// settled false (the set is sound), and terms are settled false that the
// byte set alone leaves open.
func TestCanFormPairsAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := formCases{r}
	trues, falses, narrowed := 0, 0, 0
	for i := range 20000 {
		segs, pieces := cases.next()
		values := make([]string, 1+r.IntN(3))
		var chars byteset.Set
		for j := range values {
			values[j] = cases.word(formAlpha+"yz019-", 6)
			chars.AddString(values[j])
		}
		pairs := pairsOf(values...)
		// canForm asks only pairs of the segments' bytes (others may
		// follow anything): the reference asks every pair of this set.
		var in byteset.Set // segs are under maxFormState bytes: all held
		for _, g := range segs {
			in.AddString(g)
		}
		want := canFormPairs(segs, pieces, &chars, segPairs{pairs, &in})
		got := newFormer(segs).canForm(pieces, &chars, pairs)
		if got != want {
			t.Fatalf("case %d: former(%q).canForm(%q, %q, pairs of %q) = %v, every pair says %v", i, segs, pieces, charsString(&chars), values, got, want)
		}
		if exact := canFormPairs(segs, pieces, &chars, pairs); exact && !got {
			t.Fatalf("case %d: former(%q).canForm(%q, %q, pairs of %q) false where the exact pairs say true", i, segs, pieces, charsString(&chars), values)
		}
		// Sound: a rendering with these values that holds the segments
		// in order is never ruled out.
		if len(pieces) > 1 {
			var line strings.Builder
			for j, p := range pieces {
				if j > 0 {
					line.WriteString(values[r.IntN(len(values))])
				}
				line.WriteString(p)
			}
			if inOrder(line.String(), segs) && !got {
				t.Fatalf("case %d: %q holds %q but canForm with the pairs of %q says no", i, line.String(), segs, values)
			}
		}
		if !got && canFormAll(segs, pieces, &chars) {
			narrowed++
		}
		if got {
			trues++
		} else {
			falses++
		}
	}
	if trues < 1000 || falses < 1000 || narrowed < 500 {
		t.Fatalf("cases not mixed: %d true, %d false, %d false only with pairs", trues, falses, narrowed)
	}
}

// segPairs is pairs asked only where both bytes are in the segments'
// bytes, as canForm asks them.
type segPairs struct {
	pairs PairSet
	in    *byteset.Set
}

func (p segPairs) HasPair(a, b byte) bool {
	return !p.in.Has(a) || !p.in.Has(b) || p.pairs.HasPair(a, b)
}

// inOrder reports whether s holds segs in order without overlap.
func inOrder(s string, segs []string) bool {
	for _, g := range segs {
		k := strings.Index(s, g)
		if k < 0 {
			return false
		}
		s = s[k+len(g):]
	}
	return true
}

func charsString(c *byteset.Set) string {
	var b []byte
	for x := 0; x < 256; x++ {
		if c.Has(byte(x)) {
			b = append(b, byte(x))
		}
	}
	return string(b)
}

func BenchmarkCanForm(b *testing.B) {
	var chars byteset.Set
	for c := byte(' '); c < 127; c++ {
		chars.Add(c)
	}
	segs := []string{"IllegalStateException"}
	pieces := []string{"ERROR [", "] ", " request ", " took ", " ms"}
	b.Run("built-each-time", func(b *testing.B) {
		for b.Loop() {
			newFormer(segs).canForm(pieces, &chars, nil)
		}
	})
	f := newFormer(segs)
	b.Run("former", func(b *testing.B) {
		for b.Loop() {
			f.canForm(pieces, &chars, nil)
		}
	})
}

// TestFormerLongTerm: of a term longer than maxFormState bytes a former
// holds the first maxFormState, so a template whose parameters cannot
// spell that much is settled false, and one that can spell it but not the
// rest is left to be scanned (never settled false wrongly).
func TestFormerLongTerm(t *testing.T) {
	long := strings.Repeat("ab", maxFormState) + "z" // the z past maxFormState
	if f := newFormer([]string{long}); f.final != maxFormState {
		t.Fatalf("a former of %d states for a %d-byte term", f.final, len(long))
	}
	q, err := Compile(long)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bytes string
		want  Decision
	}{
		{"xyz", None}, // cannot spell "abab..."
		{"ab", Scan},  // spells the first 63 bytes, not the z: maybe, never false
		{"abz", Scan}, // spells it all
	} {
		var cs byteset.Set
		cs.AddString(c.bytes)
		p := q.PlanTemplates("t", []Template{{ID: 1, Version: 1, Text: "value <*> end", ParamBytes: &cs}})
		if got := p.Templates()[0].Decision; got != c.want {
			t.Errorf("parameter bytes %q: decision %v, want %v", c.bytes, got, c.want)
		}
	}
	// Segments past the limit are dropped whole, the one across it cut.
	f := newFormer([]string{strings.Repeat("a", 40), strings.Repeat("b", 40), "c"})
	if f.final != maxFormState || f.in.Has('c') || !f.in.Has('b') {
		t.Fatalf("former of 40+40+1 bytes: %d states, holds c %v, b %v", f.final, f.in.Has('c'), f.in.Has('b'))
	}
}
