package lake_test

import (
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

func TestLayout(t *testing.T) {
	if l := lake.LayoutOf(delta.Metadata{PartitionColumns: []string{"tenant", "date"}}); !l.Dated {
		t.Error("(tenant, date) is not the dated layout")
	}
	if l := lake.LayoutOf(delta.Metadata{PartitionColumns: []string{"tenant"}}); l.Dated || !l.DateColumn() {
		t.Error("tenant alone is not the current layout")
	}
	ts := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC).UnixNano()
	cur, old := lake.CurrentLayout.PartOf("a b", ts), lake.DatedLayout.PartOf("a b", ts)
	if got := cur.FilePath("f.parquet"); got != "tenant=a%20b/f.parquet" {
		t.Errorf("current path %s", got)
	}
	if got := old.FilePath("f.parquet"); got != "tenant=a%20b/date=2026-11-29/f.parquet" {
		t.Errorf("dated path %s", got)
	}
	for _, c := range []struct {
		l   lake.Layout
		pv  map[string]string
		bad bool
	}{
		{lake.CurrentLayout, cur.PartitionValues(), false},
		{lake.DatedLayout, old.PartitionValues(), false},
		{lake.CurrentLayout, old.PartitionValues(), true},
		{lake.DatedLayout, cur.PartitionValues(), true},
		{lake.CurrentLayout, map[string]string{"tenant": ""}, true},
		{lake.DatedLayout, map[string]string{"tenant": "a", "date": "29.11.2026"}, true},
		{lake.CurrentLayout, map[string]string{"tenant": "a", "x": "1"}, true},
	} {
		if err := c.l.CheckPartitionValues(c.pv); (err != nil) != c.bad {
			t.Errorf("%s %v: %v", c.l, c.pv, err)
		}
	}
	if lake.FilePart(old.PartitionValues()) != old || lake.FilePart(cur.PartitionValues()) != cur {
		t.Error("FilePart does not invert PartitionValues")
	}
}

func TestFileTimeRange(t *testing.T) {
	stats := delta.StatsJSON(2, map[string]any{"ts": time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)},
		map[string]any{"ts": time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}, nil)
	lo, hi, ok := lake.FileTimeRange(stats)
	if !ok || !lo.Equal(time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)) || !hi.Equal(time.Date(2026, 11, 30, 0, 0, 0, 1e6, time.UTC)) {
		t.Errorf("range %v %v %v", lo, hi, ok)
	}
	if f, l, ok := lake.FileDays(map[string]string{"tenant": "a"}, stats); !ok || f != "2026-11-28" || l != "2026-11-30" {
		t.Errorf("days %s %s %v", f, l, ok)
	}
	if f, l, ok := lake.FileDays(map[string]string{"tenant": "a", "date": "2026-01-01"}, ""); !ok || f != "2026-01-01" || l != f {
		t.Errorf("dated days %s %s %v", f, l, ok)
	}
	if _, _, ok := lake.FileDays(map[string]string{"tenant": "a"}, ""); ok {
		t.Error("days without stats")
	}
	st, _ := delta.ParseStats(stats)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		since, until time.Time
		in, within   bool
	}{
		{time.Time{}, time.Time{}, true, true},
		{day(30).Add(time.Millisecond), time.Time{}, false, false},
		{day(30), time.Time{}, true, false},
		{time.Time{}, day(28).Add(23*time.Hour + 59*time.Minute), false, false},
		{day(28), day(30).Add(2 * time.Millisecond), true, true},
		{day(29), day(29).Add(time.Hour), true, false},
	} {
		if got := lake.FileInTimeRange(map[string]string{"tenant": "a"}, st, c.since, c.until); got != c.in {
			t.Errorf("[%v, %v): in %v", c.since, c.until, got)
		}
		if got := lake.FileWithinTimeRange(st, c.since, c.until); got != c.within {
			t.Errorf("[%v, %v): within %v", c.since, c.until, got)
		}
	}
}

// TestNoticeDates: a notice names each file's first and last day: from the
// ts stats in a table partitioned by tenant, from the date partition (also
// still in date) in a dated one; a remove, without stats, only there.
func TestNoticeDates(t *testing.T) {
	stats := delta.StatsJSON(2, map[string]any{"ts": time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)},
		map[string]any{"ts": time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)}, nil)
	n := lake.NoticeOf("records", 3, []delta.Action{
		{Add: &delta.Add{Path: "tenant=a/f1", PartitionValues: map[string]string{"tenant": "a"}, Stats: stats, DataChange: true}},
		{Add: &delta.Add{Path: "tenant=a/date=2026-01-02/f2", PartitionValues: map[string]string{"tenant": "a", "date": "2026-01-02"}, DataChange: true}},
		{Remove: &delta.Remove{Path: "tenant=a/f0", PartitionValues: map[string]string{"tenant": "a"}, DataChange: true}},
		{Remove: &delta.Remove{Path: "tenant=a/date=2026-01-01/f", PartitionValues: map[string]string{"tenant": "a", "date": "2026-01-01"}, DataChange: true}},
	})
	got := func(f streams.NoticeFile) string { return f.Date + "|" + f.MinDate + "|" + f.MaxDate }
	for i, want := range []string{"|2026-11-28|2026-11-29", "2026-01-02|2026-01-02|2026-01-02"} {
		if g := got(n.Adds[i]); g != want {
			t.Errorf("add %d: %s, want %s", i, g, want)
		}
	}
	for i, want := range []string{"||", "2026-01-01|2026-01-01|2026-01-01"} {
		if g := got(n.Removes[i]); g != want {
			t.Errorf("remove %d: %s, want %s", i, g, want)
		}
	}
}
