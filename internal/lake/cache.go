package lake

import (
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/byteset"
	"github.com/quarrylake/quarry/internal/recfile"
)

// fileCache keeps, between searches of a long-running reader (quarry
// serve), what a search reads from every file before its rows: the rows of
// the templates files and the footers (and template summaries) of the
// records v3 files. A data file of a Delta table is never rewritten: a
// path names the same bytes for good (a rewrite, compaction or retention,
// writes new paths and removes the old ones), so an entry is valid as long
// as its path has the size it had; which files a search reads still comes
// from each search's own snapshot of the Delta logs. Entries are keyed by
// the object key and its size; the cache is emptied when it holds more
// than maxCached entries (files a newer snapshot removed are dropped so).
type fileCache struct {
	templates boundedMap[[]TemplateRow]
	footers   boundedMap[*cachedFooter]
	// looked: the records files LearnPairs looked at (it does not again);
	// pairs: the sets it learned, by file, which openMeta gives a footer
	// it reads again (after the footers map was emptied).
	looked boundedMap[struct{}]
	pairs  boundedMap[map[recfile.Key]recfile.Pairs]
}

type cacheKey struct {
	key  string
	size int64
}

// cachedFooter is a records v3 file's footer: the opened file (metadata
// and schema, its rows read through a recfile.Reader at a new handle of
// the object) and its summary, in which the byte sets a search learned
// from the rows of versions the footer gives none (AnyBytes) take their
// place (learn).
type cachedFooter struct {
	pf      *parquet.File
	mu      sync.Mutex
	summary recfile.Summary // replaced, never changed in place
}

func (c *cachedFooter) currentSummary() recfile.Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.summary
}

// learn gives the AnyBytes entries of the summary the byte sets of sets:
// each the bytes of every parameter of every row of that version in the
// file, as a search that rendered all of them found them (readLines), so
// later searches settle a text term against them as they do against the
// footer's own.
func (c *cachedFooter) learn(sets map[recfile.Key]byteset.Set) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := slices.Clone(c.summary)
	for i := range ns {
		if cs, ok := sets[ns[i].Key]; ok && ns[i].AnyBytes {
			ns[i].AnyBytes, ns[i].ParamBytes = false, cs
		}
	}
	c.summary = ns
}

// wantsPairs reports whether the summary has a version with a byte set
// and no pairs.
func (c *cachedFooter) wantsPairs() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.summary {
		if !t.AnyBytes && t.ParamPairs == nil {
			return true
		}
	}
	return false
}

// learnPairs gives the entries of the summary with a byte set and no
// pairs the pair sets of sets (LearnPairs).
func (c *cachedFooter) learnPairs(sets map[recfile.Key]recfile.Pairs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := slices.Clone(c.summary)
	for i := range ns {
		if ps, ok := sets[ns[i].Key]; ok && !ns[i].AnyBytes && ns[i].ParamPairs == nil {
			ns[i].ParamPairs = ps
		}
	}
	c.summary = ns
}

// maxCached bounds each map: about 10 KB per records footer.
const maxCached = 4096

// EnableCache makes l keep the templates files' rows and the records
// files' footers between searches (fileCache): for a reader that serves
// many queries over one lake. A footer kept also takes the byte sets that
// a search (Search or SearchRaw) learns from the rows of the versions the file's summary gives
// none (cachedFooter.learn), so a later text term those bytes cannot spell
// skips their rows as it skips those of the versions with a byte set, and
// the pair sets LearnPairs learns for the files written without them.
// Results are the same with or without it.
func (l *Lake) EnableCache() {
	l.cache = &fileCache{templates: newBoundedMap[[]TemplateRow](), footers: newBoundedMap[*cachedFooter](), looked: newBoundedMap[struct{}](),
		pairs: newBoundedMap[map[recfile.Key]recfile.Pairs]()}
}

// boundedMap is one of the cache's maps, safe for concurrent searches and
// emptied when it would hold more than maxCached entries.
type boundedMap[V any] struct {
	mu sync.Mutex
	m  map[cacheKey]V
}

func newBoundedMap[V any]() boundedMap[V] { return boundedMap[V]{m: map[cacheKey]V{}} }

func (b *boundedMap[V]) get(k cacheKey) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

func (b *boundedMap[V]) put(k cacheKey, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) >= maxCached {
		clear(b.m)
	}
	b.m[k] = v
}

// templateRows, putTemplateRows, footer and putFooter are no-ops on a nil
// cache (a lake without EnableCache).
func (c *fileCache) templateRows(k cacheKey) ([]TemplateRow, bool) {
	if c == nil {
		return nil, false
	}
	return c.templates.get(k)
}

func (c *fileCache) putTemplateRows(k cacheKey, rows []TemplateRow) {
	if c != nil {
		c.templates.put(k, rows)
	}
}

func (c *fileCache) footer(k cacheKey) (*cachedFooter, bool) {
	if c == nil {
		return nil, false
	}
	return c.footers.get(k)
}

func (c *fileCache) putFooter(k cacheKey, f *cachedFooter) {
	if c != nil {
		c.footers.put(k, f)
	}
}
