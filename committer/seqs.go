package committer

import "github.com/quarrylake/quarry/streams"

// The committer's view of the quarry.seqs tag; streams.Seqs is its one
// implementation.

// formatSeqs writes a set of WAL sequences in the tag's text form.
func formatSeqs(seqs []uint64) string { return streams.SeqsOf(seqs).String() }

// parseSeqs is the inverse of formatSeqs.
func parseSeqs(s string) ([]uint64, error) {
	r, err := streams.ParseSeqs(s)
	if err != nil {
		return nil, err
	}
	return r.Values(), nil
}

// lastSeq is the highest sequence of a tag value (0 for ""), without
// expanding the ranges.
func lastSeq(s string) (uint64, error) {
	r, err := streams.ParseSeqs(s)
	return r.Top(), err
}
