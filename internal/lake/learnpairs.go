package lake

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/quarrylake/quarry/internal/delta"
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
// It looks at the snapshot's newest records files (by WAL position; 0:
// all of them) it has not looked at before and returns how many it
// learned from. Learned sets take about 6 KB a file (128 bytes a
// version); reading a file takes about ten times its size in memory while
// it lasts. Without a cache it does nothing. A file it cannot read, or a
// version whose rows it does not all see split, keeps what it had: results
// are the same with or without the sets, only fewer rows are read with
// them. A learned set is sound for
// any split of a line that renders it (a term inside a parameter of one
// split lies inside a parameter of the other, or spans pieces whose
// bytes the plan checks against the template's text).
func (l *Lake) LearnPairs(ctx context.Context, newest int) (int, error) {
	if l.cache == nil {
		return 0, nil
	}
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("records snapshot: %w", err)
	}
	// The newest files first (today's, a busy encoder's): each is read
	// whole once, and what is learned is kept apart from the footers
	// (fileCache.pairs), so a cache emptied by searches of a large lake
	// does not make the same files read again.
	files := slices.Clone(snap.Files)
	slices.SortStableFunc(files, func(a, b delta.Add) int {
		alo, _, _ := fileSeqRange(a)
		blo, _, _ := fileSeqRange(b)
		return cmp.Compare(blo, alo)
	})
	if newest > 0 {
		files = files[:min(len(files), newest)]
	}
	var texts recfile.Templates
	learned := 0
	for _, a := range files {
		if err := ctx.Err(); err != nil {
			return learned, err
		}
		ck := cacheKey{l.records.FileKey(a.Path), a.Size}
		if _, ok := l.cache.looked.get(ck); ok {
			continue // not opened again
		}
		m, err := l.openMeta(ctx, a.Path)
		if err != nil {
			return learned, err
		}
		if m.footer == nil || !m.footer.wantsPairs() {
			l.cache.looked.put(ck, struct{}{}) // a v2 file, or one with its pairs
			m.close()
			continue
		}
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
		// Not looked at again, learned or not: a file that failed (a
		// search reports a corrupt one; a read that timed out costs only
		// this file's sets) would be read whole every pass.
		l.cache.looked.put(ck, struct{}{})
		if err != nil || len(sets) == 0 {
			continue
		}
		// Under the key openMeta finds it by: the object's own size (the
		// add action's, unless the object was rewritten in place).
		l.cache.pairs.put(cacheKey{ck.key, m.size}, sets)
		m.footer.learnPairs(sets)
		learned++
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
