package committer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// TestRetentionCurrentLayout: in a records table partitioned by tenant,
// retention removes the files whose every row is past the cut
// (dataChange=true) and rewrites a file that straddles it: its remove
// (dataChange=true) and an add (dataChange=false) of only its kept rows, in
// one commit with no txn. The multiset of rows after is the one before less
// exactly the expired rows; a second pass does nothing.
func TestRetentionCurrentLayout(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	l := newTestLakeIn(t, lake.CurrentLayout, nil, "acme", "forever")
	day := func(d int) string { return now.AddDate(0, 0, -d).Format(time.DateOnly) }
	seq := uint64(0)
	for d := 40; d >= 0; d -= 5 { // one-day files
		for _, tenant := range []string{"acme", "forever"} {
			seq++
			l.addFile(tenant, day(d), []uint64{seq}, now, false)
		}
	}
	// Straddling files: days 33 to 27 (acme's cut is day 30).
	var seqs []uint64
	var days []string
	for d := 33; d >= 27; d-- {
		seq++
		seqs = append(seqs, seq)
		days = append(days, day(d))
	}
	l.addFileDays("acme", days, seqs, now, false)
	l.addFileDays("forever", days, slices.Clone(seqs), now, false)
	before := l.rowSet()
	_, snapBefore := l.partitions()
	cfg := testConfig("c1")
	cfg.Retention = Retention{Default: Age(30 * 24 * time.Hour), Tenants: map[string]Age{"forever": 0}}
	off := false
	cfg.Compaction.Enabled = &off
	m, submit := l.maint(cfg, now)
	res, err := m.pass(l.ctx, passSpec{retain: true}, submit)
	if err != nil {
		t.Fatal(err)
	}
	// acme: days 40, 35 and 30 wholly, the straddler rewritten.
	if res.Expired != 4 || res.Rewritten != 1 {
		t.Fatalf("pass %+v, want 4 files removed (one of them rewritten)", res)
	}
	cut := day(30)
	var want []string
	for _, r := range before {
		// rowSet: tenant|seq|index|line|ts ns|...
		f := strings.Split(r, "|")
		if f[0] == "acme" && dayOfRow(t, f[4]) <= cut {
			continue
		}
		want = append(want, r)
	}
	if got := l.rowSet(); !slices.Equal(got, want) {
		t.Fatalf("rows after retention: %d, want %d (of %d)", len(got), len(want), len(before))
	}
	_, snap := l.partitions()
	if snap.Version != snapBefore.Version+1 || snap.Txns[AppID] != snapBefore.Txns[AppID] {
		t.Fatalf("version %d -> %d, txn %d -> %d", snapBefore.Version, snap.Version, snapBefore.Txns[AppID], snap.Txns[AppID])
	}
	var removes, adds int
	for _, a := range l.log(snap.Version) {
		switch {
		case a.Txn != nil:
			t.Fatal("retention commit has a txn action")
		case a.Remove != nil:
			removes++
			if !a.Remove.DataChange || !strings.HasPrefix(a.Remove.Path, "tenant=acme/part-") {
				t.Fatalf("remove %+v", a.Remove)
			}
		case a.Add != nil:
			adds++
			if a.Add.DataChange || !strings.HasPrefix(a.Add.Path, "tenant=acme/retain-") || a.Add.Tags[TagReports] == "" {
				t.Fatalf("add %+v", a.Add)
			}
			if first, _, _ := lake.FileDays(a.Add.PartitionValues, a.Add.Stats); first <= cut {
				t.Fatalf("rewritten file starts on %s, at or before the cut %s", first, cut)
			}
		}
	}
	if removes != 4 || adds != 1 {
		t.Fatalf("retention commit: %d removes, %d adds", removes, adds)
	}
	if res, err := m.pass(l.ctx, passSpec{retain: true}, submit); err != nil || res.Expired != 0 || res.Rewritten != 0 {
		t.Fatalf("second pass: %+v, %v", res, err)
	}
	l.checkIndependently()
}

// dayOfRow is the UTC day of a rowSet entry's ts (nanoseconds).
func dayOfRow(t *testing.T, ns string) string {
	t.Helper()
	var n int64
	for _, c := range ns {
		if c < '0' || c > '9' {
			t.Fatalf("ts %q", ns)
		}
		n = n*10 + int64(c-'0')
	}
	return lake.Date(n)
}

// TestCompactionCurrentLayout: in a records table partitioned by tenant, a
// tenant's small files are closed when every day of their rows has ended
// (or the tenant is idle) and are rewritten into files near the target,
// with the date column; a busy tenant's files of today are left alone while
// its files of past days are compacted. Rows are kept exactly (multiset).
func TestCompactionCurrentLayout(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	l := newTestLakeIn(t, lake.CurrentLayout, nil, "acme", "live")
	seq := uint64(0)
	next := func(n int) []uint64 {
		var s []uint64
		for range n {
			seq++
			s = append(s, seq)
		}
		return s
	}
	for i := range 12 { // days ended, modified a minute ago: closed by the days
		l.addFile("acme", now.AddDate(0, 0, -1-i%3).Format(time.DateOnly), next(3), now.Add(-time.Minute), false)
	}
	for range 3 { // rows of today, modified a minute ago: open
		l.addFile("live", now.Format(time.DateOnly), next(2), now.Add(-time.Minute), false)
	}
	for range 2 { // the busy tenant's rows of yesterday: closed
		l.addFile("live", now.AddDate(0, 0, -1).Format(time.DateOnly), next(2), now.Add(-time.Minute), false)
	}
	_, snapBefore := l.partitions()
	var small int64
	for _, f := range snapBefore.Files {
		small = max(small, f.Size)
	}
	rowsBefore := l.rowSet()
	cfg := testConfig("c1")
	cfg.Compaction.TargetBytes = 5 * small
	m, submit := l.maint(cfg, now)
	res, err := m.pass(l.ctx, passSpec{compact: true}, submit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 2 || res.Compacted != 14 || res.Written != 4 {
		t.Fatalf("pass: %+v, want tenant acme's 12 files into 3 and live's 2 of yesterday into 1", res)
	}
	parts, snap := l.partitions()
	if parts["acme/"] != 3 || parts["live/"] != 3+1 {
		t.Fatalf("files per partition after compaction: %v", parts)
	}
	for _, a := range l.log(snap.Version) {
		if a.Add != nil && (a.Add.DataChange || !strings.Contains(a.Add.Path, "/compact-") || a.Add.Size > 2*cfg.Compaction.TargetBytes) {
			t.Fatalf("add %+v", a.Add)
		}
		if a.Remove != nil && a.Remove.DataChange {
			t.Fatalf("remove %+v", a.Remove)
		}
	}
	if got := l.rowSet(); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows changed by compaction: %d before, %d after", len(rowsBefore), len(got))
	}
	l.checkIndependently() // the date column of the rewritten files, by Arrow
	// Idle: the live tenant's files are compacted once idle long enough.
	m2, submit2 := l.maint(cfg, now.Add(2*time.Hour))
	if res, err := m2.pass(l.ctx, passSpec{only: Partition{Tenant: "live"}, compact: true}, submit2); err != nil || res.Compacted != 4 {
		t.Fatalf("idle pass: %+v, %v", res, err)
	}
	if got := l.rowSet(); !slices.Equal(got, rowsBefore) {
		t.Fatal("rows changed by the idle compaction")
	}
	l.checkIndependently()
}

// TestRetentionCrash kills a process running retention after it wrote the
// rewrite of a file that straddles the cut and before its commit, and right
// after the commit: the lake then references the old files or the new
// ones, never both and never neither (the multiset of rows is the one before,
// or the one before less exactly the expired rows), the independent check
// agrees, and the unreferenced rewrite of the first case is vacuum's.
func TestRetentionCrash(t *testing.T) {
	for _, tc := range []struct {
		point     string
		committed bool
	}{{CrashRetainBeforeCommit, false}, {CrashRetainAfterCommit, true}} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			store, err := objstore.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := newTestLakeIn(t, lake.CurrentLayout, store, "acme")
			day := func(d int) string { return crashNow.AddDate(0, 0, -d).Format(time.DateOnly) }
			l.addFile("acme", day(40), []uint64{1}, crashNow, false)
			l.addFile("acme", day(10), []uint64{2}, crashNow, false)
			l.addFileDays("acme", []string{day(32), day(31), day(30), day(29), day(28)}, []uint64{3, 4, 5, 6, 7}, crashNow, false)
			_, before := l.partitions()
			rows := l.rowSet()
			cut := day(30)
			var kept []string
			for _, r := range rows {
				if dayOfRow(t, strings.Split(r, "|")[4]) > cut {
					kept = append(kept, r)
				}
			}
			if len(kept) == 0 || len(kept) == len(rows) {
				t.Fatalf("the setup expires %d of %d rows", len(rows)-len(kept), len(rows))
			}
			crashChild(t, dir, tc.point, crashRetainEnv+"=1")
			_, after := l.partitions()
			retained := 0
			for _, f := range after.Files {
				if strings.Contains(f.Path, "/retain-") {
					retained++
				}
			}
			want := rows
			switch {
			case !tc.committed && (after.Version != before.Version || retained != 0 || len(after.Files) != 3):
				t.Fatalf("crash before the commit: version %d -> %d, %d files (%d rewritten)", before.Version, after.Version, len(after.Files), retained)
			case tc.committed && (after.Version != before.Version+1 || retained != 1 || len(after.Files) != 2):
				t.Fatalf("crash after the commit: version %d -> %d, %d files (%d rewritten)", before.Version, after.Version, len(after.Files), retained)
			case tc.committed:
				want = kept
			}
			if got := l.rowSet(); !slices.Equal(got, want) {
				t.Fatalf("rows after the crash: %d, want %d", len(got), len(want))
			}
			l.checkIndependently()
			orphans := vacuumOrphans(t, store, false) // the real clock; checked when not committed
			if !tc.committed && (len(orphans) != 1 || !strings.Contains(orphans[0], "/retain-")) {
				t.Fatalf("orphans vacuum would delete: %v, want the one rewrite", orphans)
			}
		})
	}
}
