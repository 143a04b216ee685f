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
	"github.com/quarrylake/quarry/internal/recfile"
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

// Record is one committed record with its original line rendered. Line is
// the line's exact bytes (UTF-8 or not). Params are the parameters as text:
// stored as such in records v2 files; for records v3 files, which store
// them by kind, cut from Line by the template (splitParams).
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

// keepFile prunes a records file by its partition values and stats
// (layout.go: the date partition of a dated table, the ts stats of any).
func (f Filter) keepFile(a delta.Add) bool {
	if f.Tenant != "" && a.PartitionValues["tenant"] != f.Tenant {
		return false
	}
	if !f.Since.IsZero() || !f.Until.IsZero() {
		// By the date partition (a dated table) and the ts stats.
		st, _ := delta.ParseStats(a.Stats)
		if !FileInTimeRange(a.PartitionValues, st, f.Since, f.Until) {
			return false
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

// fileRow is one row of a records file of either version: a v2 row
// carries Params (rendered with the template text), a v3 row its Line
// (rendered by recfile.Decode).
type fileRow struct {
	WALSeq          int64
	Index           int32
	TS              int64 // microseconds
	TemplateID      int64
	TemplateVersion int32
	Source          string
	Attrs           map[string]string
	Params          []string // v2
	Line            []byte   // v3
	v3              bool
}

// rowSource yields a records file's rows in (wal_seq, record_index) order.
type rowSource interface {
	// read fills buf and returns how many rows it filled; 0 at the end.
	read(buf []fileRow) (int, error)
	close() error
}

// v2Source streams a records v2 file.
type v2Source struct {
	r       *parquet.GenericReader[RecordRow]
	closeFn func() error
	buf     []RecordRow
}

func (s *v2Source) read(out []fileRow) (int, error) {
	if cap(s.buf) < len(out) {
		s.buf = make([]RecordRow, len(out))
	}
	buf := s.buf[:len(out)]
	n, err := s.r.Read(buf)
	for i := range buf[:n] {
		r := &buf[i]
		out[i] = fileRow{WALSeq: r.WALSeq, Index: r.RecordIndex, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Source: r.Source, Attrs: r.Attrs, Params: r.Params}
		*r = RecordRow{}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func (s *v2Source) close() error { return s.closeFn() }

// v3Source is a decoded records v3 file (recfile.Decode returns its rows
// in WAL order).
type v3Source struct {
	recs []recfile.Record
}

func (s *v3Source) read(out []fileRow) (int, error) {
	n := copy3(out, s.recs)
	s.recs = s.recs[n:]
	return n, nil
}

func copy3(out []fileRow, recs []recfile.Record) int {
	n := min(len(out), len(recs))
	for i := range n {
		r := &recs[i]
		var attrs map[string]string
		if len(r.Attrs) > 0 {
			attrs = make(map[string]string, len(r.Attrs))
			for _, a := range r.Attrs {
				attrs[a.Key] = a.Value
			}
		}
		out[i] = fileRow{WALSeq: int64(r.WALSeq), Index: int32(r.Index), TS: floorDiv(r.TS, 1000),
			TemplateID: int64(r.TemplateID), TemplateVersion: int32(r.TemplateVersion), Source: r.Source,
			Attrs: attrs, Line: r.Line, v3: true}
		recs[i] = recfile.Record{}
	}
	return n
}

func (s *v3Source) close() error { s.recs = nil; return nil }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// cursor streams one records file's rows, checking they are ordered.
type cursor struct {
	add     delta.Add
	src     rowSource
	buf     []fileRow
	pos     int
	row     fileRow
	started bool
}

const cursorBatch = 512

// next advances to the next row; false at the end.
func (c *cursor) next() (bool, error) {
	if c.pos >= len(c.buf) {
		c.buf = c.buf[:cap(c.buf)]
		n, err := c.src.read(c.buf)
		c.buf = c.buf[:n]
		c.pos = 0
		if err != nil {
			return false, fmt.Errorf("read %s: %w", c.add.Path, err)
		}
		if n == 0 {
			return false, nil
		}
	}
	prev := c.row
	c.row = c.buf[c.pos]
	c.buf[c.pos] = fileRow{} // drop references early
	c.pos++
	if c.started && less(c.row, prev) {
		return false, fmt.Errorf("records file %s is not sorted by (wal_seq, record_index): (%d,%d) after (%d,%d)",
			c.add.Path, c.row.WALSeq, c.row.Index, prev.WALSeq, prev.Index)
	}
	c.started = true
	return true, nil
}

func less(a, b fileRow) bool {
	if a.WALSeq != b.WALSeq {
		return a.WALSeq < b.WALSeq
	}
	return a.Index < b.Index
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
// orphaned files are invisible), pruned by the tenant partition, the time
// range (FileInTimeRange: the ts stats, and the date partition of a dated
// table) and the template_id stats. Files are merged lazily: a file is opened when
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
			c.src.close()
		}
	}()
	var texts recfile.Templates // built on the first v3 file
	open := func(a delta.Add) error {
		if texts == nil {
			texts = tpls.texts()
		}
		src, err := l.openRecords(ctx, a, texts)
		if err != nil {
			return err
		}
		c := &cursor{add: a, src: src, buf: make([]fileRow, 0, cursorBatch)}
		ok, err := c.next()
		if err != nil || !ok {
			src.close()
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
			c.src.close()
		}
	}
}

// record turns a row into a Record if f selects it.
func (f Filter) record(row fileRow, a delta.Add, tpls templateSet) (Record, bool, error) {
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
			row.WALSeq, row.Index, a.Path, row.TemplateID, row.TemplateVersion, ErrTemplateMissing)
	}
	params, line := row.Params, string(row.Line)
	if row.v3 {
		params = splitParams(text, line)
	} else {
		var err error
		if line, err = render(text, row.Params); err != nil {
			return Record{}, false, fmt.Errorf("record (%d,%d) in %s: %w", row.WALSeq, row.Index, a.Path, err)
		}
	}
	return Record{
		WALSeq: uint64(row.WALSeq), Index: uint32(row.Index), Tenant: a.PartitionValues["tenant"], TS: ts,
		TemplateID: uint64(row.TemplateID), TemplateVersion: uint32(row.TemplateVersion), Params: params,
		Attrs: row.Attrs, Source: row.Source, Line: line,
	}, true, nil
}
