package committer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// formatSeqs writes a set of WAL sequences as sorted, comma-separated
// ranges, e.g. "5-9,12". It is the value of the "quarry.seqs" tag.
func formatSeqs(seqs []uint64) string {
	s := slices.Clone(seqs)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(s[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(s[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// maxRangeLen bounds the seqs of a parsed tag, so a corrupt tag cannot
// make the committer allocate without limit.
const maxRangeLen = 1 << 24

// parseSeqs is the inverse of formatSeqs.
func parseSeqs(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint64
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seqs %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, fmt.Errorf("seqs %q: %w", s, err)
			}
		}
		if b < a || b-a >= maxRangeLen-uint64(len(out)) {
			return nil, fmt.Errorf("seqs %q: bad range %q (or more than %d seqs)", s, part, maxRangeLen)
		}
		for v := a; ; v++ {
			out = append(out, v)
			if v == b {
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("seqs: empty")
	}
	return out, nil
}

// lastSeq is the highest sequence of a formatSeqs value (its last range's
// end; 0 for ""), without expanding the ranges.
func lastSeq(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	last := s[strings.LastIndexByte(s, ',')+1:]
	if i := strings.IndexByte(last, '-'); i >= 0 {
		last = last[i+1:]
	}
	v, err := strconv.ParseUint(last, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("seqs %q: %w", s, err)
	}
	return v, nil
}
