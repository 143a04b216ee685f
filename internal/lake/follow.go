package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/streams"
)

// This file serves followers of the lake (package subscribe): reading one
// commit of the records log, describing it as a commit notice, and reading
// one committed records file in order.

// ReadCommit reads and decodes version's commit of t. A version not (or no
// longer) in the log is an error wrapping objstore.ErrNotFound.
func ReadCommit(ctx context.Context, t *delta.Table, version int64) ([]delta.Action, error) {
	data, err := t.Store().Get(ctx, t.CommitKey(version))
	if err != nil {
		return nil, fmt.Errorf("read %s version %d: %w", t.Root(), version, err)
	}
	actions, err := delta.DecodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("%s version %d: %v: %w", t.Root(), version, err, delta.ErrCorrupt)
	}
	return actions, nil
}

// NoticeOf describes one commit of table (its version and actions) as the
// commit notice the committer publishes for it. It is the one place a
// notice is made, for the committer and for a follower reading the log.
func NoticeOf(table string, version int64, actions []delta.Action) *streams.Notice {
	n := &streams.Notice{Table: table, Version: version, Adds: []streams.NoticeFile{}, Removes: []streams.NoticeFile{}}
	for _, a := range actions {
		switch {
		case a.CommitInfo != nil:
			if op, ok := a.CommitInfo["operation"].(string); ok {
				n.Operation = op
			}
			switch ts := a.CommitInfo["timestamp"].(type) {
			case float64:
				n.CommitTime = time.UnixMilli(int64(ts)).UTC()
			case int64:
				n.CommitTime = time.UnixMilli(ts).UTC()
			case json.Number:
				if ms, err := ts.Int64(); err == nil {
					n.CommitTime = time.UnixMilli(ms).UTC()
				}
			}
		case a.Txn != nil && a.Txn.AppID == AppID && a.Txn.Version >= 0:
			n.HighWater = uint64(a.Txn.Version)
		case a.Add != nil:
			n.Adds = append(n.Adds, AddNotice(*a.Add))
			n.DataChange = n.DataChange || a.Add.DataChange
		case a.Remove != nil:
			f := noticeFile(a.Remove.Path, a.Remove.PartitionValues, a.Remove.Size, a.Remove.Tags, a.Remove.DataChange)
			// A remove carries no stats: its days are known in a dated table.
			f.MinDate, f.MaxDate, _ = FileDays(a.Remove.PartitionValues, "")
			f.Rows = -1
			n.Removes = append(n.Removes, f)
			n.DataChange = n.DataChange || a.Remove.DataChange
		}
	}
	return n
}

// AddNotice describes a live file of a snapshot as a commit notice
// describes an add (rows from its stats, -1 when unknown), for a follower
// that starts from the table as of a version (delta.Table.SnapshotAt).
func AddNotice(a delta.Add) streams.NoticeFile {
	f := noticeFile(a.Path, a.PartitionValues, a.Size, a.Tags, a.DataChange)
	f.MinDate, f.MaxDate, _ = FileDays(a.PartitionValues, a.Stats)
	f.Rows = -1
	if st, err := delta.ParseStats(a.Stats); err == nil {
		f.Rows = st.NumRecords
	}
	return f
}

func noticeFile(path string, pv map[string]string, size int64, tags map[string]string, dataChange bool) streams.NoticeFile {
	return streams.NoticeFile{Path: path, Tenant: pv["tenant"], Date: pv["date"], Size: size, WAL: tags[streams.TagSeqs], DataChange: dataChange}
}

// FileReader reads single committed records files, with the templates
// table loaded once and reloaded when a file uses a template version it
// has not seen (the committer commits templates before the records that
// use them, so a reload finds them).
type FileReader struct {
	l      *Lake
	tpls   templateSet
	loaded bool
}

// NewFileReader returns a reader of l's records files. It does no I/O.
func (l *Lake) NewFileReader() *FileReader { return &FileReader{l: l} }

// Read returns every record of tenant's records file at path (relative to
// the records table root), in (wal_seq, record_index) order: the order of
// its rows, which it checks.
func (r *FileReader) Read(ctx context.Context, path, tenant string) ([]Record, error) {
	for attempt := 0; ; attempt++ {
		if !r.loaded || attempt > 0 {
			tpls, err := r.l.loadTemplates(ctx, "")
			if err != nil {
				return nil, err
			}
			r.tpls, r.loaded = tpls, true
		}
		recs, err := r.read(ctx, path, tenant)
		if errors.Is(err, ErrTemplateMissing) && attempt == 0 {
			continue
		}
		return recs, err
	}
}

func (r *FileReader) read(ctx context.Context, path, tenant string) ([]Record, error) {
	a := delta.Add{Path: path}
	src, err := r.l.openRecords(ctx, a, r.tpls.texts())
	if err != nil {
		return nil, err
	}
	c := &cursor{add: a, src: src, buf: make([]fileRow, 0, cursorBatch)}
	defer src.close()
	var out []Record
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ok, err := c.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		rec, _, err := Filter{}.record(c.row, delta.Add{Path: path, PartitionValues: map[string]string{"tenant": tenant}}, r.tpls)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
}

// Template is the text of template id at version, if loaded.
func (r *FileReader) Template(id uint64, version uint32) (string, bool) {
	return r.tpls.text(int64(id), int32(version))
}
