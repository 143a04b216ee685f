package lake

import (
	"context"
	"fmt"
	"sort"

	"github.com/quarrylake/quarry/internal/recfile"
)

// TemplateInfo is one committed template version and how many committed
// records use it.
type TemplateInfo struct {
	TemplateID uint64 `json:"template_id"`
	Tenant     string `json:"tenant"`
	Version    uint32 `json:"version"`
	Text       string `json:"text"`
	Kind       string `json:"kind"`
	Previous   string `json:"previous,omitempty"`
	WALSeq     uint64 `json:"wal_seq"`
	Records    int64  `json:"records"`
	// MergedInto is the template this one was retired into (following
	// merges to the survivor), 0 while it is live.
	MergedInto uint64 `json:"merged_into,omitempty"`
	// Kinds names, per wildcard, the mask that made it ("" for one the
	// miner found itself); empty when no mask made any.
	Kinds []string `json:"kinds,omitempty"`
}

type tplKey struct {
	id      int64
	version int32
}

// templateSet is the committed templates table: the versions by (id,
// version), and the merges (retired id -> the id it was merged into).
type templateSet struct {
	rows   map[tplKey]TemplateRow
	merges map[int64]int64
}

// loadTemplates reads every committed templates file (tenant "" = all).
func (l *Lake) loadTemplates(ctx context.Context, tenant string) (templateSet, error) {
	set := templateSet{merges: map[int64]int64{}}
	snap, err := l.templates.Snapshot(ctx)
	if err != nil {
		return set, fmt.Errorf("templates snapshot: %w", err)
	}
	// Every file's rows first, so that the map is made at its size: grown
	// row by row, it rehashed its large values about ten times.
	files := make([][]TemplateRow, len(snap.Files))
	n := 0
	for i, f := range snap.Files {
		ck := cacheKey{l.templates.FileKey(f.Path), f.Size}
		rows, ok := l.cache.templateRows(ck)
		if !ok {
			if rows, err = readTemplateRows(ctx, l.templates, f.Path); err != nil {
				return set, err
			}
			l.cache.putTemplateRows(ck, rows)
		}
		files[i] = rows
		n += len(rows)
	}
	set.rows = make(map[tplKey]TemplateRow, n)
	for i, f := range snap.Files {
		for _, r := range files[i] {
			if tenant != "" && r.Tenant != tenant {
				continue
			}
			if r.Kind == "merged" {
				set.merges[r.TemplateID] = r.MergedInto
				continue
			}
			k := tplKey{r.TemplateID, r.Version}
			if old, dup := set.rows[k]; dup && old.Template != r.Template {
				return set, fmt.Errorf("template %d version %d has two texts (%q in an earlier file, %q in %s)",
					r.TemplateID, r.Version, old.Template, r.Template, f.Path)
			}
			set.rows[k] = r
		}
	}
	return set, nil
}

// previous is the text of the version before a changed row's: its
// previous column in a file written before templates v2, else the text of
// (id, version-1) ("" when that version is not in the set).
func (s templateSet) previous(r TemplateRow) string {
	if r.Previous != "" || r.Kind != "changed" {
		return r.Previous
	}
	return s.rows[tplKey{r.TemplateID, r.Version - 1}].Template
}

// canonical follows merges from id to the surviving template.
func (s templateSet) canonical(id int64) int64 {
	for range len(s.merges) + 1 { // a cycle cannot happen; bound the walk anyway
		into, ok := s.merges[id]
		if !ok || into == 0 {
			return id
		}
		id = into
	}
	return id
}

// family is every template id whose canonical template is id's.
func (s templateSet) family(id int64) map[int64]bool {
	c := s.canonical(id)
	out := map[int64]bool{c: true}
	for retired := range s.merges {
		if s.canonical(retired) == c {
			out[retired] = true
		}
	}
	return out
}

// templateCount is the projection of a records file Templates reads.
type templateCount struct {
	TemplateID      int64 `parquet:"template_id"`
	TemplateVersion int32 `parquet:"template_version"`
}

// countTemplates adds to counts the rows of each template version in the
// records file at rel: from the summary in its footer (recfile.Summary)
// when it has one, reading no row; else from its template columns.
func (l *Lake) countTemplates(ctx context.Context, rel string, counts map[tplKey]int64) error {
	m, err := l.openMeta(ctx, rel)
	if err != nil {
		return err
	}
	sum := m.summary
	m.close()
	if sum != nil {
		for _, t := range sum {
			counts[tplKey{int64(t.Key.ID), int32(t.Key.Version)}] += t.Rows
		}
		return nil
	}
	rows, err := readAll[templateCount](ctx, l.records, rel)
	if err != nil {
		return err
	}
	for _, r := range rows {
		counts[tplKey{r.TemplateID, r.TemplateVersion}]++
	}
	return nil
}

// Templates lists every committed template version of tenant ("" = every
// tenant), sorted by (tenant, template id, version), with the number of
// committed records of each. The records table is read first so every
// template its records use is already committed in the templates table.
func (l *Lake) Templates(ctx context.Context, tenant string) ([]TemplateInfo, error) {
	recSnap, err := l.records.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("records snapshot: %w", err)
	}
	set, err := l.loadTemplates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	counts := map[tplKey]int64{}
	for _, f := range recSnap.Files {
		if tenant != "" && f.PartitionValues["tenant"] != tenant {
			continue
		}
		if err := l.countTemplates(ctx, f.Path, counts); err != nil {
			return nil, err
		}
	}
	out := make([]TemplateInfo, 0, len(set.rows))
	for k, r := range set.rows {
		ti := TemplateInfo{
			TemplateID: uint64(r.TemplateID), Tenant: r.Tenant, Version: uint32(r.Version), Text: r.Template,
			Kind: r.Kind, Previous: set.previous(r), WALSeq: uint64(r.WALSeq), Records: counts[k], Kinds: r.Kinds,
		}
		if c := set.canonical(r.TemplateID); c != r.TemplateID {
			ti.MergedInto = uint64(c)
		}
		out = append(out, ti)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.TemplateID != b.TemplateID {
			return a.TemplateID < b.TemplateID
		}
		return a.Version < b.Version
	})
	return out, nil
}

// texts is every template version's text, for recfile.Decode.
func (s templateSet) texts() recfile.Templates {
	out := make(recfile.Templates, len(s.rows))
	for k, r := range s.rows {
		out[recfile.Key{ID: uint64(k.id), Version: uint32(k.version)}] = r.Template
	}
	return out
}

// text looks up the template text of (id, version).
func (s templateSet) text(id int64, version int32) (string, bool) {
	r, ok := s.rows[tplKey{id, version}]
	return r.Template, ok
}
