package lake

import (
	"context"

	"github.com/quarrylake/quarry/internal/recfile"
)

// CachedSummary is the summary a search of l takes for the records file at
// rel: the cache's, with what it learned, where l keeps one.
func CachedSummary(ctx context.Context, l *Lake, rel string) (recfile.Summary, error) {
	m, err := l.openMeta(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer m.close()
	return m.summary, nil
}

// DropFooters empties l's cache of footers, as a search of more files than
// it holds does.
func DropFooters(l *Lake) {
	l.cache.footers.mu.Lock()
	defer l.cache.footers.mu.Unlock()
	clear(l.cache.footers.m)
}
