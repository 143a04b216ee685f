package lake

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
)

// Filter selects records. Zero fields select everything.
type Filter struct {
	Tenant string
	// TemplateID selects the records of a template and of every template
	// that was merged into it.
	TemplateID uint64
	// Since is inclusive, Until exclusive (record time).
	Since, Until time.Time

	ids map[int64]bool // TemplateID's family, set by Query
}

func (f Filter) matchTS(ts time.Time) bool {
	if !f.Since.IsZero() && ts.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !ts.Before(f.Until) {
		return false
	}
	return true
}

// Record is one committed record with its original line rendered.
type Record struct {
	WALSeq          uint64            `json:"wal_seq"`
	Index           uint32            `json:"index"`
	Tenant          string            `json:"tenant"`
	TS              time.Time         `json:"ts"`
	TemplateID      uint64            `json:"template_id"`
	TemplateVersion uint32            `json:"template_version"`
	Params          []string          `json:"params"`
	Attrs           map[string]string `json:"attrs,omitempty"`
	Source          string            `json:"source"`
	Line            string            `json:"line"`
}

// keepFile prunes a records file by its partition values and stats.
func (f Filter) keepFile(a delta.Add) bool {
	if f.Tenant != "" && a.PartitionValues["tenant"] != f.Tenant {
		return false
	}
	if d, ok := a.PartitionValues["date"]; ok && d != "" {
		day, err := time.Parse(time.DateOnly, d)
		if err == nil {
			if !f.Since.IsZero() && !day.Add(24*time.Hour).After(f.Since) {
				return false
			}
			if !f.Until.IsZero() && !day.Before(f.Until) {
				return false
			}
		}
	}
	if f.TemplateID != 0 {
		if lo, hi, ok := statRange(a.Stats, "template_id"); ok {
			in := false
			for id := range f.wanted() {
				if id >= lo && id <= hi {
					in = true
					break
				}
			}
			if !in {
				return false
			}
		}
	}
	return true
}

// wanted is the set of template ids TemplateID selects.
func (f Filter) wanted() map[int64]bool {
	if f.ids != nil {
		return f.ids
	}
	return map[int64]bool{int64(f.TemplateID): true}
}

// cursor streams one records file's rows, checking they are ordered.
type cursor struct {
	add     delta.Add
	r       *parquet.GenericReader[RecordRow]
	closeFn func() error
	buf     []RecordRow
	pos     int
	row     RecordRow
	started bool
}

const cursorBatch = 512

// next advances to the next row; false at the end.
func (c *cursor) next() (bool, error) {
	if c.pos >= len(c.buf) {
		c.buf = c.buf[:cap(c.buf)]
		n, err := c.r.Read(c.buf)
		c.buf = c.buf[:n]
		c.pos = 0
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, fmt.Errorf("read %s: %w", c.add.Path, err)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", c.add.Path, err)
		}
	}
	prev := c.row
	c.row = c.buf[c.pos]
	c.buf[c.pos] = RecordRow{} // drop references early
	c.pos++
	if c.started && less(c.row, prev) {
		return false, fmt.Errorf("records file %s is not sorted by (wal_seq, record_index): (%d,%d) after (%d,%d)",
			c.add.Path, c.row.WALSeq, c.row.RecordIndex, prev.WALSeq, prev.RecordIndex)
	}
	c.started = true
	return true, nil
}

func less(a, b RecordRow) bool {
	if a.WALSeq != b.WALSeq {
		return a.WALSeq < b.WALSeq
	}
	return a.RecordIndex < b.RecordIndex
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return less(h[i].row, h[j].row) }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Query calls fn for every committed record f selects, in (wal_seq,
// record_index) order, with its line rendered from the committed template
// text. Only files in the records table's snapshot are read (uncommitted or
// orphaned files are invisible), pruned by the tenant and date partitions
// and the template_id stats. Files are merged lazily: a file is opened when
// the merge reaches the lowest WAL sequence its stats (or name) give, so
// only overlapping files are open at once. An error from fn stops the query
// and is returned.
func (l *Lake) Query(ctx context.Context, f Filter, fn func(Record) error) error {
	// Records first, templates second: the committer commits templates
	// before records, so every template a record of this snapshot uses is
	// in the later templates snapshot.
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("records snapshot: %w", err)
	}
	tpls, err := l.loadTemplates(ctx, f.Tenant)
	if err != nil {
		return err
	}
	if f.TemplateID != 0 {
		f.ids = tpls.family(int64(f.TemplateID))
	}
	type pending struct {
		add delta.Add
		lo  int64
	}
	var files []pending
	for _, a := range snap.Files {
		if !f.keepFile(a) {
			continue
		}
		lo, _, ok := fileSeqRange(a)
		if !ok {
			lo = -1 << 63 // unknown: open it first
		}
		files = append(files, pending{a, lo})
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].lo < files[j].lo })

	h := &cursorHeap{}
	defer func() {
		for _, c := range *h {
			c.closeFn()
		}
	}()
	open := func(a delta.Add) error {
		r, closeFn, err := openParquet[RecordRow](ctx, l.records, a.Path)
		if err != nil {
			return err
		}
		c := &cursor{add: a, r: r, closeFn: closeFn, buf: make([]RecordRow, 0, cursorBatch)}
		ok, err := c.next()
		if err != nil || !ok {
			closeFn()
			return err
		}
		heap.Push(h, c)
		return nil
	}
	next := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Open every file that may hold a row at or below the heap's head.
		for next < len(files) && (h.Len() == 0 || files[next].lo <= (*h)[0].row.WALSeq) {
			if err := open(files[next].add); err != nil {
				return err
			}
			next++
		}
		if h.Len() == 0 {
			return nil
		}
		c := (*h)[0]
		row := c.row
		if rec, ok, err := f.record(row, c.add, tpls); err != nil {
			return err
		} else if ok {
			if err := fn(rec); err != nil {
				return err
			}
		}
		more, err := c.next()
		if err != nil {
			return err
		}
		if more {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
			c.closeFn()
		}
	}
}

// record turns a row into a Record if f selects it.
func (f Filter) record(row RecordRow, a delta.Add, tpls templateSet) (Record, bool, error) {
	if f.TemplateID != 0 && !f.wanted()[row.TemplateID] {
		return Record{}, false, nil
	}
	ts := time.UnixMicro(row.TS).UTC()
	if !f.matchTS(ts) {
		return Record{}, false, nil
	}
	text, ok := tpls.text(row.TemplateID, row.TemplateVersion)
	if !ok {
		return Record{}, false, fmt.Errorf("record (%d,%d) in %s: template %d version %d: %w",
			row.WALSeq, row.RecordIndex, a.Path, row.TemplateID, row.TemplateVersion, ErrTemplateMissing)
	}
	line, err := render(text, row.Params)
	if err != nil {
		return Record{}, false, fmt.Errorf("record (%d,%d) in %s: %w", row.WALSeq, row.RecordIndex, a.Path, err)
	}
	return Record{
		WALSeq: uint64(row.WALSeq), Index: uint32(row.RecordIndex), Tenant: a.PartitionValues["tenant"], TS: ts,
		TemplateID: uint64(row.TemplateID), TemplateVersion: uint32(row.TemplateVersion), Params: row.Params,
		Attrs: row.Attrs, Source: row.Source, Line: line,
	}, true, nil
}
