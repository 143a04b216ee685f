package lake

import (
	"context"
	"fmt"

	"github.com/quarrylake/quarry/internal/recfile"
)

// LearnPairs gives records files of the current snapshot written without
// their versions' byte pairs (recfile.PairsKey: a busy encoder writes
// none, compaction and an idle encoder do) the pair sets such a file
// would carry, learned from its rows: every row of the file is rendered
// and split against its template's text, and each version the summary
// gives a byte set gets the pairs of all its rows' parameters
// (recfile.PairsBuilder). The sets go into the file's cache entry
// (EnableCache), where later searches take them as they take a footer's:
// a term whose bytes a version's parameters never hold side by side
// settles false for it before its rows are read, as over compacted files
// (docs/benchmarks.md, "Search: needles and bloom filters").
//
// It looks at up to maxFiles files it has not looked at before (0: every
// one; a file in the cache it looked at is not opened again) and returns
// how many it learned from. Without a cache it does
// nothing. A file it cannot read, or a version whose rows it does not all
// see split, keeps what it had: results are the same with or without the
// sets, only fewer rows are read with them. A learned set is sound for
// any split of a line that renders it (a term inside a parameter of one
// split lies inside a parameter of the other, or spans pieces whose
// bytes the plan checks against the template's text).
func (l *Lake) LearnPairs(ctx context.Context, maxFiles int) (int, error) {
	if l.cache == nil {
		return 0, nil
	}
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("records snapshot: %w", err)
	}
	var texts recfile.Templates
	learned, looked := 0, 0
	for _, a := range snap.Files {
		if maxFiles > 0 && looked >= maxFiles {
			break
		}
		if err := ctx.Err(); err != nil {
			return learned, err
		}
		// A file looked at before is not opened again: every pass looks
		// at every file of the snapshot.
		ck := cacheKey{l.records.FileKey(a.Path), a.Size}
		if c, ok := l.cache.footer(ck); ok && !c.wantsPairs() {
			continue
		}
		if _, ok := l.cache.noPairs.get(ck); ok {
			continue
		}
		m, err := l.openMeta(ctx, a.Path)
		if err != nil {
			return learned, err
		}
		if m.footer == nil || !m.footer.wantsPairs() {
			if m.footer == nil { // a records v2 file: no summary to give pairs
				l.cache.noPairs.put(ck, struct{}{})
			}
			m.close()
			continue
		}
		looked++
		if texts == nil {
			tpls, err := l.loadTemplates(ctx, "")
			if err != nil {
				m.close()
				return learned, err
			}
			texts = tpls.texts()
		}
		sets, err := pairsOf(m, texts)
		m.close()
		if err != nil {
			// Unreadable here, unreadable to a search too, which reports
			// it: the file is not looked at again.
			m.footer.learnPairs(nil)
			continue
		}
		m.footer.learnPairs(sets)
		if len(sets) > 0 {
			learned++
		}
	}
	return learned, nil
}

// pairsOf renders every row of m's file and returns the pair sets of the
// versions its summary gives a byte set and no pairs, of which it saw and
// split every row the summary counts.
func pairsOf(m *fileMeta, texts recfile.Templates) (map[recfile.Key]recfile.Pairs, error) {
	want := map[recfile.Key]int64{}
	for _, t := range m.summary {
		if !t.AnyBytes && t.ParamPairs == nil {
			want[t.Key] = t.Rows
		}
	}
	lines, err := m.rd.DecodeLines(texts, recfile.Projection{Lines: true, FileOrder: true,
		Keep: func(k recfile.Key) bool { _, ok := want[k]; return ok }})
	if err != nil {
		return nil, err
	}
	defer lines.Release()
	type seen struct {
		rows int64
		bad  bool // a line that does not split
		b    recfile.PairsBuilder
	}
	by := map[recfile.Key]*seen{}
	var line []byte
	for x := range lines.Len() {
		k := lines.Key(x)
		if _, ok := want[k]; !ok {
			continue
		}
		s := by[k]
		if s == nil {
			s = &seen{}
			by[k] = s
		}
		s.rows++
		if s.bad {
			continue
		}
		if line, err = lines.AppendLine(line[:0], x); err != nil {
			return nil, err
		}
		params := splitParams(texts[k], string(line))
		if params == nil {
			s.bad = true
			continue
		}
		for _, p := range params {
			s.b.Add(p)
		}
	}
	out := map[recfile.Key]recfile.Pairs{}
	for k, s := range by {
		if !s.bad && s.rows == want[k] {
			out[k] = s.b.Pairs()
		}
	}
	return out, nil
}
