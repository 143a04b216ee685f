package lake

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
)

// Layout is how the records table is partitioned. It is fixed when the
// table is created (its metaData's partitionColumns) and read back from the
// log by every writer and reader: LayoutOf. This file is the one place that
// knows the layouts; the encoder, committer, compaction, retention, readers
// and followers ask it.
//
//   - Current (Dated false), tables created since issue 10: partitioned by
//     tenant only; date, the UTC day of ts, is a data column of every file
//     (recfile.WithDate), so a tenant's records of any number of days go to
//     one file. Files are pruned by their ts stats (FileTimeRange).
//   - Dated: tables created before, partitioned by (tenant, date); their
//     files hold one UTC day each and have no date column. Such a table
//     stays in its layout: it is read and appended as it is.
//
// The Delta schemaString is the same for both (lake.RecordsSchemaString(), date
// a column of type date), so `WHERE date = ...` works in any Delta reader.
type Layout struct {
	// Dated: partitioned by (tenant, date).
	Dated bool
}

// CurrentLayout is the layout of records tables created now.
var CurrentLayout = Layout{}

// DatedLayout is the layout of records tables created before issue 10.
var DatedLayout = Layout{Dated: true}

// LayoutOf is the layout of a records table with metadata md.
func LayoutOf(md delta.Metadata) Layout {
	return Layout{Dated: slices.Contains(md.PartitionColumns, "date")}
}

// ReadLayout reads the records table's layout from its Delta log; exists is
// false (and l CurrentLayout, the layout the committer will create it in)
// when the table has no log yet.
func ReadLayout(ctx context.Context, store objstore.Store) (l Layout, exists bool, err error) {
	snap, err := delta.OpenTable(store, RecordsTable).Snapshot(ctx)
	if err != nil {
		return CurrentLayout, false, fmt.Errorf("records snapshot: %w", err)
	}
	if snap.Version < 0 {
		return CurrentLayout, false, nil
	}
	return LayoutOf(snap.Metadata), true, nil
}

func (l Layout) String() string {
	if l.Dated {
		return "tenant,date"
	}
	return "tenant"
}

// PartitionColumns are the table's partition columns in layout l.
func (l Layout) PartitionColumns() []string {
	if l.Dated {
		return []string{"tenant", "date"}
	}
	return []string{"tenant"}
}

// DateColumn: files of layout l carry the date column (recfile.WithDate).
func (l Layout) DateColumn() bool { return !l.Dated }

// Part is a file's partition in layout l: the tenant and, for a dated
// layout, the day (yyyy-mm-dd); Date is empty otherwise.
type Part struct {
	Tenant, Date string
}

// PartOf is the partition a record of tenant at tsNanos goes to.
func (l Layout) PartOf(tenant string, tsNanos int64) Part {
	if l.Dated {
		return Part{tenant, Date(tsNanos)}
	}
	return Part{Tenant: tenant}
}

// FilePart is the partition of a file from its partition values.
func FilePart(pv map[string]string) Part {
	return Part{pv["tenant"], pv["date"]}
}

// PartitionValues are a file's partition values in partition p.
func (p Part) PartitionValues() map[string]string {
	if p.Date == "" {
		return map[string]string{"tenant": p.Tenant}
	}
	return map[string]string{"tenant": p.Tenant, "date": p.Date}
}

// FilePath is the path of a records data file relative to the table root:
// Hive-style partition directories with escaped values, as Delta expects.
func (p Part) FilePath(name string) string {
	if p.Date == "" {
		return path.Join("tenant="+url.PathEscape(p.Tenant), name)
	}
	return path.Join("tenant="+url.PathEscape(p.Tenant), "date="+url.PathEscape(p.Date), name)
}

func (p Part) String() string {
	if p.Date == "" {
		return p.Tenant
	}
	return p.Tenant + "/" + p.Date
}

// CheckPartitionValues returns an error unless pv are a records file's
// partition values in layout l: exactly its partition columns, each set
// (and date a yyyy-mm-dd day).
func (l Layout) CheckPartitionValues(pv map[string]string) error {
	cols := l.PartitionColumns()
	if keys := slices.Sorted(maps.Keys(pv)); !slices.Equal(keys, slices.Sorted(slices.Values(cols))) {
		return fmt.Errorf("partition values %v, the table is partitioned by %s", keys, l)
	}
	for _, c := range cols {
		if pv[c] == "" {
			return fmt.Errorf("partition value %s is empty", c)
		}
	}
	if l.Dated {
		if _, err := time.Parse(time.DateOnly, pv["date"]); err != nil {
			return fmt.Errorf("partition value date %q is not a day", pv["date"])
		}
	}
	return nil
}

// FileTimeRange is the range every row's ts of a records file lies in,
// from its add's ts stats: lo at or below the least, hi above the greatest
// (Delta stats keep milliseconds; the maximum is widened by one). ok is
// false without ts stats.
func FileTimeRange(stats string) (lo, hi time.Time, ok bool) {
	st, err := delta.ParseStats(stats)
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	return statsTimeRange(st)
}

func statsTimeRange(st delta.Stats) (lo, hi time.Time, ok bool) {
	lo, ok1 := statTime(st.MinValues["ts"])
	hi, ok2 := statTime(st.MaxValues["ts"])
	if !ok1 || !ok2 {
		return time.Time{}, time.Time{}, false
	}
	return lo, hi.Add(time.Millisecond), true
}

// FileDays are the first and last UTC day (yyyy-mm-dd) a records file's
// rows may fall on: its date partition in a dated table, else the days of
// FileTimeRange. ok is false when neither is known.
func FileDays(pv map[string]string, stats string) (first, last string, ok bool) {
	if d := pv["date"]; d != "" {
		return d, d, true
	}
	lo, hi, ok := FileTimeRange(stats)
	if !ok {
		return "", "", false
	}
	// hi is exclusive of the greatest ts (widened by a millisecond).
	return Date(lo.UnixNano()), Date(hi.Add(-time.Microsecond).UnixNano()), true
}

// FileInTimeRange reports whether a records file may hold a row with ts in
// [since, until) (a zero bound is open): false only when its date partition
// or its ts stats show it cannot.
func FileInTimeRange(pv map[string]string, st delta.Stats, since, until time.Time) bool {
	if d := pv["date"]; d != "" {
		if day, err := time.Parse(time.DateOnly, d); err == nil {
			if !since.IsZero() && !day.Add(24*time.Hour).After(since) {
				return false
			}
			if !until.IsZero() && !day.Before(until) {
				return false
			}
		}
	}
	lo, hi, ok := statsTimeRange(st)
	if !ok {
		return true
	}
	if !since.IsZero() && !hi.After(since) {
		return false
	}
	return until.IsZero() || lo.Before(until)
}

// FileWithinTimeRange reports whether every row of a records file has ts
// in [since, until), by its ts stats; false without them.
func FileWithinTimeRange(st delta.Stats, since, until time.Time) bool {
	if since.IsZero() && until.IsZero() {
		return true
	}
	lo, hi, ok := statsTimeRange(st)
	if !ok {
		return false
	}
	return (since.IsZero() || !lo.Before(since)) && (until.IsZero() || !hi.After(until))
}

// EncodeOptions are recfile's options for a records file of layout l.
func (l Layout) EncodeOptions() []recfile.Option {
	return []recfile.Option{recfile.WithDate(l.DateColumn())}
}
