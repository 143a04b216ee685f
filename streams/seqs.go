package streams

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// TagSeqs is the Delta add-action tag in which the committer keeps the WAL
// sequences of every batch a records or templates file holds, in the text
// form of Seqs. A commit notice carries the same text as NoticeFile.WAL.
const TagSeqs = "quarry.seqs"

// maxSeqs bounds the sequences one parsed Seqs may hold, so a corrupt tag
// cannot make a reader expand it without limit.
const maxSeqs = 1 << 24

// ErrSeqs marks a Seqs text that does not parse.
var ErrSeqs = errors.New("bad WAL sequences")

// Seqs is a set of WAL sequences as sorted, disjoint, inclusive ranges.
// Its text form (String, ParseSeqs) is comma-separated ranges, "5-9,12".
type Seqs []SeqRange

// SeqRange is the inclusive range [Lo, Hi] of WAL sequences.
type SeqRange struct{ Lo, Hi uint64 }

// SeqsOf is the set of the given sequences, in any order, with repeats.
func SeqsOf(seqs []uint64) Seqs {
	s := slices.Clone(seqs)
	slices.Sort(s)
	s = slices.Compact(s)
	var out Seqs
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		out = append(out, SeqRange{s[i], s[j]})
		i = j + 1
	}
	return out
}

// String is the text form, "5-9,12"; "" for an empty set.
func (r Seqs) String() string {
	var b strings.Builder
	for i, g := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(g.Lo, 10))
		if g.Hi > g.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(g.Hi, 10))
		}
	}
	return b.String()
}

// ParseSeqs reads the text form. The ranges must be sorted and disjoint and
// hold at most 1<<24 sequences in all; "" is the empty set.
func ParseSeqs(text string) (Seqs, error) {
	if text == "" {
		return nil, nil
	}
	var out Seqs
	var n uint64
	for part := range strings.SplitSeq(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrSeqs, text, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, fmt.Errorf("%w %q: %v", ErrSeqs, text, err)
			}
		}
		if b < a || (len(out) > 0 && a <= out[len(out)-1].Hi) {
			return nil, fmt.Errorf("%w %q: range %q out of order", ErrSeqs, text, part)
		}
		if b-a >= maxSeqs-n {
			return nil, fmt.Errorf("%w %q: more than %d sequences", ErrSeqs, text, maxSeqs)
		}
		n += b - a + 1
		out = append(out, SeqRange{a, b})
	}
	return out, nil
}

// Has reports whether seq is in r.
func (r Seqs) Has(seq uint64) bool {
	i := sort.Search(len(r), func(i int) bool { return r[i].Hi >= seq })
	return i < len(r) && r[i].Lo <= seq
}

// Within reports whether r holds a sequence in (lo, hi].
func (r Seqs) Within(lo, hi uint64) bool {
	i := sort.Search(len(r), func(i int) bool { return r[i].Hi > lo })
	return i < len(r) && max(r[i].Lo, lo+1) <= hi
}

// Top is r's highest sequence (0 when empty).
func (r Seqs) Top() uint64 {
	if len(r) == 0 {
		return 0
	}
	return r[len(r)-1].Hi
}

// Values lists every sequence of r in order.
func (r Seqs) Values() []uint64 {
	var out []uint64
	for _, g := range r {
		for v := g.Lo; ; v++ {
			out = append(out, v)
			if v == g.Hi {
				break
			}
		}
	}
	return out
}
