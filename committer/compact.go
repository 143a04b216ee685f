package committer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
)

// Tags of a records file a compaction wrote.
const (
	// TagCompaction is the table version the compaction was planned from.
	TagCompaction = "quarry.compaction"
	// TagReports lists the ids of the reports whose files it replaced,
	// comma-separated and sorted, so a committer rebuilding its state still
	// knows them as committed.
	TagReports = "quarry.reports"
)

// maxBinReports bounds the report ids one compacted file lists (and so the
// size of its add action): about 30 bytes each.
const maxBinReports = 2048

// reportsOf are the report ids a records file's tags name.
func reportsOf(f delta.Add) []string {
	var out []string
	if id := f.Tags[TagReport]; id != "" {
		out = append(out, id)
	}
	if ids := f.Tags[TagReports]; ids != "" {
		out = append(out, strings.Split(ids, ",")...)
	}
	return out
}

// loadRemoved marks as committed the reports of files a compaction or the
// retention took out of the table: those a compacted live file lists, and
// those of the tombstones. Their stored accepted verdicts then stay
// consistent with the table when the report stream is replayed.
func loadRemoved(arb *arbiter, snap *delta.Snapshot) {
	mark := func(tags map[string]string) {
		if id := tags[TagReport]; id != "" {
			arb.markCommitted(id)
		}
		for _, id := range strings.Split(tags[TagReports], ",") {
			if id != "" {
				arb.markCommitted(id)
			}
		}
	}
	for _, f := range snap.Files {
		mark(f.Tags)
	}
	for _, r := range snap.Tombstones {
		mark(r.Tags)
	}
}

// Compaction configures the rewrite of closed files: in a partition (a
// tenant, or a (tenant, date) in a table of lake.DatedLayout) that got no
// new file for Idle every file is closed, else those whose rows' UTC days
// have all ended (a dated partition: its date). Its closed files smaller
// than half of TargetBytes are rewritten (a file
// of half the target or more is final, so a partition that keeps getting
// late files does not rewrite its big files again and again), in WAL order,
// into records v3 files of about TargetBytes (recfile's compact encoding),
// committed as one Delta commit of remove + add actions, both with
// dataChange=false. Only files whose WAL sequences are all at or below the
// high-water are taken. The commit carries no txn action: the high-water
// and the txn version stay what they were.
type Compaction struct {
	// Enabled runs compaction in the background of the active committer.
	// Default true.
	Enabled *bool `yaml:"enabled"`
	// TargetBytes is the size the rewritten files aim at (by the size of
	// the files they replace). Default 128 MiB.
	TargetBytes int64 `yaml:"target_bytes"`
	// Idle closes a partition of today when it got no new file for this
	// long. Default 1h.
	Idle time.Duration `yaml:"idle"`
	// Interval is the time between two background passes (compaction and
	// retention). Default 5m.
	Interval time.Duration `yaml:"interval"`
}

// Defaults returns c with unset fields set.
func (c Compaction) Defaults() Compaction {
	if c.Enabled == nil {
		t := true
		c.Enabled = &t
	}
	if c.TargetBytes == 0 {
		c.TargetBytes = 128 << 20
	}
	if c.Idle == 0 {
		c.Idle = time.Hour
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Minute
	}
	return c
}

// Validate reports every problem with c (after Defaults).
func (c Compaction) Validate() error {
	var errs []error
	if c.TargetBytes < 1<<10 || c.TargetBytes > 4<<30 {
		errs = append(errs, fmt.Errorf("committer.compaction.target_bytes %d: must be 1 KiB to 4 GiB", c.TargetBytes))
	}
	if c.Idle <= 0 {
		errs = append(errs, fmt.Errorf("committer.compaction.idle %s: must be positive", c.Idle))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("committer.compaction.interval %s: must be positive", c.Interval))
	}
	return errors.Join(errs...)
}

func (c Compaction) enabled() bool { return c.Enabled == nil || *c.Enabled }

// Partition names one records partition (lake.Part: the tenant and, in a
// table of lake.DatedLayout, the date); an empty field matches any.
type Partition struct {
	Tenant string
	Date   string
}

// partOf is the partition of a records file.
func partOf(pv map[string]string) Partition { return Partition(lake.FilePart(pv)) }

func (p Partition) String() string { return lake.Part(p).String() }

func (p Partition) match(q Partition) bool {
	return (p.Tenant == "" || p.Tenant == q.Tenant) && (p.Date == "" || p.Date == q.Date)
}

// compactGroup is one partition's rewrite: bins of files, each becoming
// one new file.
type compactGroup struct {
	part   Partition
	layout lake.Layout
	bins   [][]delta.Add
}

// compactionPlan picks, per closed partition matching only (every one when
// allClosed), the live files smaller than half the target whose WAL
// sequences are all at or below hw, in WAL order, cut into bins of about
// TargetBytes. A bin of one file is not rewritten.
func compactionPlan(snap *delta.Snapshot, hw int64, c Compaction, only Partition, allClosed bool, now time.Time) []compactGroup {
	type partFiles struct {
		newest int64       // newest modificationTime of any file (ms)
		small  []delta.Add // small files below the high-water
		ended  []delta.Add // those of them whose rows' days have all ended
	}
	layout := lake.LayoutOf(snap.Metadata)
	today := now.UTC().Format(time.DateOnly)
	parts := map[Partition]*partFiles{}
	for _, f := range snap.Files {
		p := partOf(f.PartitionValues)
		if !only.match(p) {
			continue
		}
		pf := parts[p]
		if pf == nil {
			pf = &partFiles{}
			parts[p] = pf
		}
		pf.newest = max(pf.newest, f.ModificationTime)
		_, hi, ok := walRange(f)
		if !ok || hi > hw || f.Size >= c.TargetBytes/2 {
			continue
		}
		pf.small = append(pf.small, f)
		if _, last, ok := lake.FileDays(f.PartitionValues, f.Stats); ok && last < today {
			pf.ended = append(pf.ended, f)
		}
	}
	var out []compactGroup
	for p, pf := range parts {
		// Closed: no new file came for Idle (every small file is taken),
		// else the small files whose rows' days have all ended: in a dated
		// partition all or none (its date), in a tenant's (layout 2) those
		// of past days, while today's keep coming.
		if !allClosed && now.Sub(time.UnixMilli(pf.newest)) < c.Idle {
			pf.small = pf.ended
		}
		if len(pf.small) < 2 {
			continue
		}
		sort.Slice(pf.small, func(i, j int) bool {
			a, _, _ := walRange(pf.small[i])
			b, _, _ := walRange(pf.small[j])
			if a != b {
				return a < b
			}
			return pf.small[i].Path < pf.small[j].Path
		})
		g := compactGroup{part: p, layout: layout}
		var bin []delta.Add
		var size int64
		var reports int
		flush := func() {
			if len(bin) > 1 {
				g.bins = append(g.bins, bin)
			}
			bin, size, reports = nil, 0, 0
		}
		for _, f := range pf.small {
			n := len(reportsOf(f))
			if len(bin) > 0 && (size+f.Size > c.TargetBytes || reports+n > maxBinReports) {
				flush()
			}
			bin = append(bin, f)
			size += f.Size
			reports += n
		}
		flush()
		if len(g.bins) > 0 {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].part.Tenant != out[j].part.Tenant {
			return out[i].part.Tenant < out[j].part.Tenant
		}
		return out[i].part.Date < out[j].part.Date
	})
	return out
}

// templatesMergeFiles is how many small templates files a table may hold
// before they are merged though it keeps getting new ones. Every query
// reads every templates file: 200 of them cost a query 70-140 ms of CPU
// (docs/benchmarks.md, "Lake size: an import ends compacted, templates
// included"), 16 under a tenth of that. A merge rewrites the whole small
// table (KBs of template texts), about once per this many flushes with
// new template versions.
const templatesMergeFiles = 16

// templatesPlan picks the templates table's live files smaller than half
// the target whose WAL sequences are all at or below hw (the records
// table's high-water: their reports are committed in both tables), in WAL
// order, at most TargetBytes and maxBinReports reports of them, when the
// table got no new file for Idle, or holds templatesMergeFiles such files,
// or allClosed. Nil unless two or more. A template version is written
// once, by the flush that saw it first, so the table keeps getting files
// while the miner finds new ones.
func templatesPlan(snap *delta.Snapshot, hw int64, c Compaction, allClosed bool, now time.Time) []delta.Add {
	var newest int64
	var small []delta.Add
	for _, f := range snap.Files {
		newest = max(newest, f.ModificationTime)
		_, hi, ok := walRange(f)
		if ok && hi <= hw && f.Size < c.TargetBytes/2 {
			small = append(small, f)
		}
	}
	if !allClosed && now.Sub(time.UnixMilli(newest)) < c.Idle && len(small) < templatesMergeFiles {
		return nil
	}
	sort.Slice(small, func(i, j int) bool {
		a, _, _ := walRange(small[i])
		b, _, _ := walRange(small[j])
		if a != b {
			return a < b
		}
		return small[i].Path < small[j].Path
	})
	var size int64
	var reports, n int
	for ; n < len(small); n++ {
		k := len(reportsOf(small[n]))
		if n > 0 && (size+small[n].Size > c.TargetBytes || reports+k > maxBinReports) {
			break
		}
		size += small[n].Size
		reports += k
	}
	if n < 2 {
		return nil
	}
	return small[:n]
}

// walRange is the WAL sequence range of a records file: from its stats,
// else from its seqs tag.
func walRange(f delta.Add) (lo, hi int64, ok bool) {
	if st, err := delta.ParseStats(f.Stats); err == nil {
		l, ok1 := st.MinValues["wal_seq"].(float64)
		h, ok2 := st.MaxValues["wal_seq"].(float64)
		if ok1 && ok2 && l <= h && h < math.MaxInt64 {
			return int64(l), int64(h), true
		}
	}
	if seqs, err := parseSeqs(f.Tags[TagSeqs]); err == nil && len(seqs) > 0 {
		return int64(seqs[0]), int64(seqs[len(seqs)-1]), true
	}
	return 0, 0, false
}

// rewriter writes the files of compactions.
type rewriter struct {
	lake    *lake.Lake
	records *delta.Table
	token   string // random per process: names never collide across runs
	texts   map[string]recfile.Templates
}

// rewrite reads one bin's rows (in WAL order) and writes them as the
// compaction's n-th file; base is the version the plan was made from. The
// file is not referenced until the commit: a crash leaves it an orphan for
// vacuum.
func (rw *rewriter) rewrite(ctx context.Context, base int64, n int, p Partition, layout lake.Layout, bin []delta.Add, now time.Time) (delta.Add, error) {
	add, _, err := rw.write(ctx, base, lake.CompactFileName(base, rw.token, n), p, layout, bin, nil, now)
	return add, err
}

// write reads the rows of files (in WAL order) that keep keeps (every row
// when nil) and writes them as one records file named name in partition p,
// unless none is kept (kept 0, no file). The add has dataChange=false and
// names the reports of files (TagReports) and base (TagCompaction).
func (rw *rewriter) write(ctx context.Context, base int64, name string, p Partition, layout lake.Layout, files []delta.Add, keep func(*recfile.Row) bool, now time.Time) (add delta.Add, kept int, err error) {
	texts, ok := rw.texts[p.Tenant]
	if !ok {
		var err error
		if texts, err = rw.lake.TemplateTexts(ctx, p.Tenant); err != nil {
			return delta.Add{}, 0, fmt.Errorf("templates of tenant %s: %w", p.Tenant, err)
		}
		rw.texts[p.Tenant] = texts
	}
	var rows []recfile.Row
	var ids []string
	for _, f := range files {
		ids = append(ids, reportsOf(f)...)
		r, err := rw.lake.ReadRows(ctx, f, texts)
		if err != nil {
			return delta.Add{}, 0, err
		}
		if keep != nil {
			r = slices.DeleteFunc(r, func(row recfile.Row) bool { return !keep(&row) })
		}
		rows = append(rows, r...)
	}
	if len(rows) == 0 {
		return delta.Add{}, 0, nil
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].WALSeq != rows[j].WALSeq {
			return rows[i].WALSeq < rows[j].WALSeq
		}
		return rows[i].Index < rows[j].Index
	})
	// Written once and kept: compressed harder than the encoder's files
	// (zstd best, 7-9% fewer bytes for 2.6 times the encode CPU).
	f, err := recfile.Encode(rows, texts, append(layout.EncodeOptions(), recfile.WithHighCompression(true))...)
	if err != nil {
		return delta.Add{}, 0, fmt.Errorf("encode rewrite of %s: %w", p, err)
	}
	path := lake.Part(p).FilePath(name)
	if err := rw.records.Store().Put(ctx, rw.records.FileKey(path), f.Data); err != nil {
		return delta.Add{}, 0, fmt.Errorf("upload %s: %w", path, err)
	}
	return delta.Add{
		Path: path, PartitionValues: lake.Part(p).PartitionValues(),
		Size: int64(len(f.Data)), ModificationTime: now.UnixMilli(), DataChange: false, Stats: f.Stats,
		Tags: compactTags(base, ids),
	}, len(rows), nil
}

// compactTags are the tags of a file a compaction planned from table
// version base wrote: base, and the reports of the files it replaces
// (ids, sorted and without repeats).
func compactTags(base int64, ids []string) map[string]string {
	return map[string]string{TagCompaction: fmt.Sprint(base), TagReports: strings.Join(slices.Compact(slices.Sorted(slices.Values(ids))), ",")}
}

// compactRemove is the remove of a file a compaction replaces, at ms:
// dataChange=false, with the file's partition values, size and tags.
func compactRemove(f delta.Add, ms int64) delta.Action {
	return delta.Action{Remove: &delta.Remove{
		Path: f.Path, DeletionTimestamp: ms, DataChange: false, ExtendedFileMetadata: true,
		PartitionValues: f.PartitionValues, Size: f.Size, Tags: f.Tags,
	}}
}
