package recfile

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// PairsKey is the footer key-value entry of a records file of several row
// groups written at zstd's best level (since 2026-12-06; encodeOnce's
// gatherPairs) that holds, for each template version with a
// byte set in the summary, the pairs of adjacent bytes within its
// parameters (Pairs). A term whose bytes a parameter would have to hold
// side by side is settled false for a version whose pairs lack one, where
// the byte set alone leaves it open: a file name, a pod or a user name
// among a lake's ids (docs/benchmarks.md, "Search: needles and bloom
// filters"). A reader that does not know the key ignores it.
const PairsKey = "quarry.records.pairs"

// pairsVersion is the first byte of a PairsKey value (after text7).
const pairsVersion = 1

// Pairs is a hashed set of byte pairs: pair (a, b) sets bit pairHash of
// its words, whose number is a power of two from 1 to maxPairWords. It may
// hold a pair its parameters never had (another pair's bit), never lack
// one they had.
type Pairs []uint64

// maxPairWords bounds a set: 4,096 bits.
const maxPairWords = 64

// pairHash is the bit of pair (a, b) in a set of 1<<logBits bits
// (Fibonacci hashing of the 16-bit pair).
func pairHash(a, b byte, logBits int) uint32 {
	return (uint32(a)<<8 | uint32(b)) * 0x9E3779B1 >> (32 - logBits)
}

// HasPair reports whether the set may hold (a, b): query.PairSet. An
// empty set holds every pair.
func (p Pairs) HasPair(a, b byte) bool {
	if len(p) == 0 {
		return true
	}
	h := pairHash(a, b, bits.TrailingZeros(uint(len(p)))+6)
	return p[h>>6]&(1<<(h&63)) != 0
}

// pairSeen is every pair of adjacent bytes one version's parameters hold
// in a file, hashed to maxPairWords words (pairHash at 12 bits): the
// sets of fewer words are folded from it (a k-bit hash is the 12-bit
// hash's top k bits). 512 bytes a version: gathering the pairs exactly
// (8 KB a version, zeroed) cost the encode 15% of its CPU.
type pairSeen [maxPairWords]uint64

const pairSeenBits = 12 // log2 of pairSeen's bits

// addParam adds p's pairs to s and its bytes to seen (one pass over p
// for the summary's byte set and the pairs).
func (s *pairSeen) addParam(p string, seen *[256]bool) {
	if len(p) == 0 {
		return
	}
	prev := p[0]
	seen[prev] = true
	for j := 1; j < len(p); j++ {
		c := p[j]
		seen[c] = true
		h := pairHash(prev, c, pairSeenBits)
		s[h>>6&(maxPairWords-1)] |= 1 << (h & 63)
		prev = c
	}
}

// hashed is s folded to four bits per pair it holds (a quarter of them
// set) rounded up to a power of two, at most maxPairWords: the pairs of
// the Search benchmark's versions (140-250 each) take 128 bytes, and a
// term needs few of its own pairs missing to be settled false. Pairs that
// share a bit in s count once, which a set of 4,096 bits barely sees.
func (s *pairSeen) hashed() Pairs {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	words := 1
	for words*64 < 4*n && words < maxPairWords {
		words *= 2
	}
	out := make(Pairs, words)
	drop := pairSeenBits - (bits.TrailingZeros(uint(words)) + 6)
	for i, w := range s {
		for ; w != 0; w &= w - 1 {
			h := (i<<6 | bits.TrailingZeros64(w)) >> drop
			out[h>>6] |= 1 << (h & 63)
		}
	}
	return out
}

// PairsBuilder gathers one version's pairs of adjacent bytes from its
// parameters as the writer does at zstd's best level, for a reader that
// learns them from the rows of a file written without them (a busy
// encoder's): the set Pairs returns is the one PairsKey would hold for the
// same parameters. The zero value is ready.
type PairsBuilder struct {
	s    pairSeen
	seen [256]bool
}

// Add adds the pairs of one parameter's text.
func (b *PairsBuilder) Add(param string) { b.s.addParam(param, &b.seen) }

// Pairs returns the set of the pairs added.
func (b *PairsBuilder) Pairs() Pairs { return b.s.hashed() }

// pairs is the file's PairsKey entries: the versions with a byte set in
// the summary (paramBytesMinRows rows or more), when the encoder gathered
// pairs (a file of several row groups).
func (e *encoder) pairs() map[Key]Pairs {
	out := map[Key]Pairs{}
	for k, t := range e.infos {
		if t.pairs != nil && t.rows >= paramBytesMinRows {
			out[k] = t.pairs.hashed()
		}
	}
	return out
}

// encodePairs writes ps as the text7 form (pack7) of pairsVersion followed
// by the zstd frame of: uvarint count, then per version in key order
// uvarint id minus the previous entry's id (0 before the first), uvarint
// version, a byte n (the set has 1<<n words) and the words (little-endian).
func encodePairs(ps map[Key]Pairs) string {
	keys := make([]Key, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version)) })
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(keys)))
	var prevID uint64
	for _, k := range keys {
		p := ps[k]
		raw = binary.AppendUvarint(raw, k.ID-prevID)
		raw = binary.AppendUvarint(raw, uint64(k.Version))
		prevID = k.ID
		raw = append(raw, byte(bits.TrailingZeros(uint(len(p)))))
		for _, w := range p {
			raw = binary.LittleEndian.AppendUint64(raw, w)
		}
	}
	return packFooterValue(pairsVersion, raw) // "": not written, readers settle terms by the byte sets
}

var errPairs = errors.New("recfile: bad parameter pairs")

// ParsePairs decodes the value of a file's PairsKey entry. A value of a
// later version or a damaged one is an error; FileSummary then gives the
// summary without pairs.
func ParsePairs(v string) (map[Key]Pairs, error) {
	b, err := unpackFooterValue(v, pairsVersion, false, errPairs)
	if err != nil {
		return nil, err
	}
	next := func() (uint64, bool) { return nextUvarint(&b) }
	n, ok := next()
	if !ok || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: count", errPairs)
	}
	out := make(map[Key]Pairs, n)
	var id uint64
	for i := range n {
		d, ok1 := next()
		ver, ok2 := next()
		if !ok1 || !ok2 || ver > 1<<32-1 || len(b) < 1 {
			return nil, fmt.Errorf("%w: entry %d", errPairs, i)
		}
		id += d
		lw := int(b[0])
		b = b[1:]
		if lw > bits.TrailingZeros(maxPairWords) || len(b) < 8<<lw {
			return nil, fmt.Errorf("%w: entry %d: %d words", errPairs, i, 1<<min(lw, 30))
		}
		p := make(Pairs, 1<<lw)
		for w := range p {
			p[w] = binary.LittleEndian.Uint64(b[8*w:])
		}
		b = b[8<<lw:]
		k := Key{ID: id, Version: uint32(ver)}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: entry %d repeats its key", errPairs, i)
		}
		out[k] = p
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the entries", errPairs, len(b))
	}
	return out, nil
}
