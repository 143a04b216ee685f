package query

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// canFormAll is former.canForm closing parameters under every byte of
// chars, with a slice for the state set: the reference the former's table,
// bit set and representative byte must agree with.
func canFormAll(segs, pieces []string, chars *Charset) bool {
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
		for changed := true; changed; {
			changed = false
			for s, on := range cur {
				for b := 0; on && b < 256; b++ {
					if chars.Has(byte(b)) {
						if u := m.step(s, byte(b)); !cur[u] {
							cur[u], changed = true, true
						}
					}
				}
			}
		}
	}
	return cur[m.final]
}

func TestCanFormAgreesWithEveryByte(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(alpha string, n int) string {
		var b strings.Builder
		for range r.IntN(n + 1) {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		return b.String()
	}
	// Small alphabets so that terms, texts and parameters overlap often.
	const alpha = "abab.=x "
	trues, falses := 0, 0
	for i := range 20000 {
		segs := make([]string, 1+r.IntN(3))
		for j := range segs {
			for segs[j] == "" {
				segs[j] = word(alpha, 4)
			}
		}
		pieces := make([]string, 1+r.IntN(4))
		for j := range pieces {
			pieces[j] = word(alpha, 5)
		}
		var chars Charset
		chars.AddString(word(alpha+"yz019-", 6))
		want := canFormAll(segs, pieces, &chars)
		if got := newFormer(segs).canForm(pieces, &chars); got != want {
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

func charsString(c *Charset) string {
	var b []byte
	for x := 0; x < 256; x++ {
		if c.Has(byte(x)) {
			b = append(b, byte(x))
		}
	}
	return string(b)
}

func BenchmarkCanForm(b *testing.B) {
	var chars Charset
	for c := byte(' '); c < 127; c++ {
		chars.Add(c)
	}
	segs := []string{"IllegalStateException"}
	pieces := []string{"ERROR [", "] ", " request ", " took ", " ms"}
	b.Run("built-each-time", func(b *testing.B) {
		for b.Loop() {
			newFormer(segs).canForm(pieces, &chars)
		}
	})
	f := newFormer(segs)
	b.Run("former", func(b *testing.B) {
		for b.Loop() {
			f.canForm(pieces, &chars)
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
		var cs Charset
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
