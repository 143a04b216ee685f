package query

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// canFormAll is canForm closing parameters under every byte of chars: the
// reference closureAlphabet's representative byte must agree with.
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
		if got := canForm(segs, pieces, &chars); got != want {
			t.Fatalf("case %d: canForm(%q, %q, %q) = %v, every byte says %v", i, segs, pieces, charsString(&chars), got, want)
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

func TestClosureAlphabet(t *testing.T) {
	var chars Charset
	chars.AddString("0123456789abcdef-:")
	got := string(closureAlphabet([]string{"dead", "f00"}, &chars))
	// The segments' bytes in chars, and one byte (the lowest) for the rest.
	if want := "-0adef"; got != want {
		t.Fatalf("alphabet %q, want %q", got, want)
	}
	var none Charset
	if got := closureAlphabet([]string{"x"}, &none); len(got) != 0 {
		t.Fatalf("empty charset: alphabet %q", got)
	}
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
			canForm(segs, pieces, &chars)
		}
	})
	f := newFormer(segs)
	b.Run("former", func(b *testing.B) {
		for b.Loop() {
			f.canForm(pieces, &chars)
		}
	})
}

// TestFormerLongTerm: a term longer than a former holds has none, and is
// settled by canForm as before: false where the parameters' bytes cannot
// spell it, open where they can.
func TestFormerLongTerm(t *testing.T) {
	long := strings.Repeat("ab", maxFormState/2+1)
	if f := newFormer([]string{long}); f != nil {
		t.Fatalf("a former for a %d-byte term", len(long))
	}
	if f := newFormer([]string{long[:maxFormState]}); f == nil {
		t.Fatalf("no former for a %d-byte term", maxFormState)
	}
	q, err := Compile(long)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bytes string
		want  Decision
	}{{"xyz", None}, {"ab", Scan}} {
		var cs Charset
		cs.AddString(c.bytes)
		p := q.PlanTemplates("t", []Template{{ID: 1, Version: 1, Text: "value <*> end", ParamBytes: &cs}})
		if got := p.Templates()[0].Decision; got != c.want {
			t.Errorf("parameter bytes %q: decision %v, want %v", c.bytes, got, c.want)
		}
	}
}
