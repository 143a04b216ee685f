package committer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqtest"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// testLake is a lake built by committing files directly (no NATS): records
// v3 files of one tenant's templates, and a held lease for commitJob.
type testLake struct {
	t     *testing.T
	ctx   context.Context
	store objstore.Store
	rec   *delta.Table
	tpl   *delta.Table
	hw    int64
	tpls  recfile.Templates
	files int
	// layout of the records table: lake.DatedLayout (newTestLake) or
	// lake.CurrentLayout (newTestLakeIn).
	layout lake.Layout
}

var testTemplates = map[recfile.Key]string{
	{ID: 1, Version: 1}: "<*> INFO took <*> ms user <*>",
	{ID: 2, Version: 1}: "<*>-<*>-<*>T<*>:<*>:<*>Z up <*>",
	{ID: 3, Version: 1}: "plain <*> and <*>",
}

func newTestLake(t *testing.T, store objstore.Store, tenants ...string) *testLake {
	t.Helper()
	return newTestLakeIn(t, lake.DatedLayout, store, tenants...)
}

// newTestLakeIn is newTestLake with the records table in layout.
func newTestLakeIn(t *testing.T, layout lake.Layout, store objstore.Store, tenants ...string) *testLake {
	t.Helper()
	ctx := context.Background()
	if store == nil {
		var err error
		if store, err = objstore.NewLocal(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	l := &testLake{t: t, ctx: ctx, store: store, rec: delta.OpenTable(store, lake.RecordsTable),
		tpl: delta.OpenTable(store, lake.TemplatesTable), tpls: recfile.Templates{}, layout: layout}
	for _, c := range []struct {
		t      *delta.Table
		schema string
		parts  []string
	}{{l.tpl, lake.TemplatesSchemaString, []string{}}, {l.rec, lake.RecordsSchemaString(), layout.PartitionColumns()}} {
		if err := c.t.Create(ctx, delta.Metadata{SchemaString: c.schema, PartitionColumns: c.parts}); err != nil {
			t.Fatal(err)
		}
	}
	var rows []lake.TemplateRow
	for _, tenant := range tenants {
		for k, text := range testTemplates {
			rows = append(rows, lake.TemplateRow{TemplateID: int64(k.ID), Tenant: tenant, Version: int32(k.Version), Template: text, Kind: "created", WALSeq: 1})
			l.tpls[k] = text
		}
	}
	data := pqtest.Write(t, rows)
	if err := store.Put(ctx, lake.TemplatesTable+"/tpl.zstd.parquet", data); err != nil {
		t.Fatal(err)
	}
	l.commit(l.tpl, delta.Add{Path: "tpl.zstd.parquet", Size: int64(len(data)), ModificationTime: 1, DataChange: true,
		Stats: delta.StatsJSON(int64(len(rows)), nil, nil, nil)}, 0)
	return l
}

func (l *testLake) commit(tbl *delta.Table, a delta.Add, hw int64) {
	l.t.Helper()
	snap, err := tbl.Snapshot(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := tbl.Commit(l.ctx, snap.Version+1, []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: AppID, Version: hw}}}); err != nil {
		l.t.Fatal(err)
	}
}

// addFile commits one records file of tenant and date holding three
// records for each seq (one per template, with a timestamp, typed and
// non-UTF-8 parameters and attributes), modified at mod. hw becomes at
// least the highest seq unless aboveHW.
func (l *testLake) addFile(tenant, date string, seqs []uint64, mod time.Time, aboveHW bool) {
	l.t.Helper()
	dates := make([]string, len(seqs))
	for i := range dates {
		dates[i] = date
	}
	l.addFileDays(tenant, dates, seqs, mod, aboveHW)
}

// addFileDays is addFile with the records of seqs[i] on dates[i] (the file
// in the partition of the first; several days only in lake.CurrentLayout).
func (l *testLake) addFileDays(tenant string, dates []string, seqs []uint64, mod time.Time, aboveHW bool) {
	l.t.Helper()
	var rows []recfile.Row
	for i, s := range seqs {
		day, err := time.Parse(time.DateOnly, dates[i])
		if err != nil {
			l.t.Fatal(err)
		}
		ts := day.Add(time.Duration(s) * time.Second).Add(123 * time.Millisecond)
		iso := ts.UTC().Format("2006-01-02T15:04:05.000Z")
		sec := ts.Truncate(time.Second).UnixNano()
		rows = append(rows,
			recfile.Row{WALSeq: s, Index: 0, TS: ts.UnixNano(), TemplateID: 1, TemplateVersion: 1,
				Params: []string{iso, fmt.Sprint(s * 7), "m\xfcller"}, Source: "file:/a"},
			recfile.Row{WALSeq: s, Index: 1, TS: sec, TemplateID: 2, TemplateVersion: 1,
				Params: []string{ts2(sec, 0), ts2(sec, 1), ts2(sec, 2), ts2(sec, 3), ts2(sec, 4), ts2(sec, 5), fmt.Sprintf("%x", s+0xabc)},
				Source: "file:/b", Attrs: []streams.Attr{{Key: "op", Value: "insert"}, {Key: "a", Value: fmt.Sprint(s)}}},
			recfile.Row{WALSeq: s, Index: 2, TS: ts.UnixNano(), TemplateID: 3, TemplateVersion: 1,
				Params: []string{"10.0.0." + fmt.Sprint(s%256), "1.50"}, Source: "file:/a"},
		)
	}
	f, err := recfile.Encode(rows, l.tpls, l.layout.EncodeOptions()...)
	if err != nil {
		l.t.Fatal(err)
	}
	l.files++
	part := l.layout.PartOf(tenant, rows[0].TS)
	path := part.FilePath(lake.FileName(seqs[0], seqs[len(seqs)-1], fmt.Sprintf("enc%d", l.files)))
	if err := l.store.Put(l.ctx, lake.RecordsTable+"/"+path, f.Data); err != nil {
		l.t.Fatal(err)
	}
	if !aboveHW {
		l.hw = max(l.hw, int64(seqs[len(seqs)-1]))
	}
	l.commit(l.rec, delta.Add{Path: path, PartitionValues: part.PartitionValues(),
		Size: int64(len(f.Data)), ModificationTime: mod.UnixMilli(), DataChange: true, Stats: f.Stats,
		Tags: map[string]string{TagReport: fmt.Sprintf("r%d", l.files), TagSeqs: formatSeqs(seqs)}}, l.hw)
}

// ts2 is field i of the UTC time ts (nanoseconds) as "2026-01-02T15:04:05Z"
// splits it at -, T and :.
func ts2(ts int64, i int) string {
	s := time.Unix(0, ts).UTC().Format("2006-01-02T15:04:05")
	return strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == 'T' || r == ':' })[i]
}

// maint is a maintainer over l with a clock at now and a commit path that
// commits directly under a held lease, as the term does.
func (l *testLake) maint(cfg Config, now time.Time) (*maintainer, func(context.Context, *job) error) {
	l.t.Helper()
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		l.t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("COMMITTER_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	m := newMaintainer(cfg, l.store, log, func() time.Time { return now })
	snap, err := l.rec.Snapshot(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	tsnap, err := l.tpl.Snapshot(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	ls := &lease{validUntil: time.Now().Add(time.Hour)}
	return m, submitTo(newTableState(lake.RecordsTable, l.rec, snap), newTableState(lake.TemplatesTable, l.tpl, tsnap), ls, "test", time.Minute)
}

// rowSet is the multiset of every committed record: (wal_seq,
// record_index, line bytes, ts, template, attrs, source).
func (l *testLake) rowSet() []string {
	l.t.Helper()
	var out []string
	err := lake.Open(l.store).Query(l.ctx, lake.Filter{}, func(r lake.Record) error {
		keys := make([]string, 0, len(r.Attrs))
		for k, v := range r.Attrs {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out = append(out, fmt.Sprintf("%s|%d|%d|%q|%d|%d.%d|%v|%s", r.Tenant, r.WALSeq, r.Index, r.Line, r.TS.UnixNano(),
			r.TemplateID, r.TemplateVersion, keys, r.Source))
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// partitions counts the live files per "tenant/date".
func (l *testLake) partitions() (map[string]int, *delta.Snapshot) {
	l.t.Helper()
	snap, err := delta.OpenTable(l.store, lake.RecordsTable).Snapshot(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range snap.Files {
		out[f.PartitionValues["tenant"]+"/"+f.PartitionValues["date"]]++
	}
	return out, snap
}

// checkIndependently reads the lake with the Arrow-based check and the
// independent log replay: every live file readable, none twice.
func (l *testLake) checkIndependently() {
	l.t.Helper()
	if err := laketest.CheckWithArrow(l.ctx, l.store); err != nil {
		l.t.Fatalf("arrow check: %v", err)
	}
	files, _, err := laketest.Replay(l.ctx, l.store, lake.RecordsTable)
	if err != nil {
		l.t.Fatalf("replay: %v", err)
	}
	_, snap := l.partitions()
	if len(files) != len(snap.Files) {
		l.t.Fatalf("independent replay sees %d live files, quarry %d", len(files), len(snap.Files))
	}
	if err := delta.ValidateLog(l.ctx, l.store, lake.RecordsTable); err != nil {
		l.t.Fatal(err)
	}
}

func TestRetentionKeepsThirtyDays(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	l := newTestLake(t, nil, "acme", "short", "forever")
	seq := uint64(0)
	for d := 39; d >= 0; d-- {
		date := now.AddDate(0, 0, -d).Format(time.DateOnly)
		for _, tenant := range []string{"acme", "short", "forever"} {
			seq++
			l.addFile(tenant, date, []uint64{seq}, now, false)
		}
	}
	before, snapBefore := l.partitions()
	if len(before) != 120 {
		t.Fatalf("%d partitions built, want 120", len(before))
	}
	cfg := testConfig("c1")
	cfg.Retention = Retention{Default: Age(30 * 24 * time.Hour), Tenants: map[string]Age{"short": Age(7 * 24 * time.Hour), "forever": 0}}
	off := false
	cfg.Compaction.Enabled = &off
	m, submit := l.maint(cfg, now)
	res, err := m.pass(l.ctx, passSpec{retain: true}, submit)
	if err != nil {
		t.Fatal(err)
	}
	after, snap := l.partitions()
	count := map[string]int{}
	oldest := map[string]string{}
	for p := range after {
		tenant, date, _ := strings.Cut(p, "/")
		count[tenant]++
		if o, ok := oldest[tenant]; !ok || date < o {
			oldest[tenant] = date
		}
	}
	if count["acme"] != 30 || count["short"] != 7 || count["forever"] != 40 || res.Expired != 33+10 {
		t.Fatalf("dates kept %v (removed %d files), want acme 30, short 7, forever 40", count, res.Expired)
	}
	if oldest["acme"] != "2026-02-09" || oldest["short"] != "2026-03-04" {
		t.Fatalf("oldest dates kept %v", oldest)
	}
	// One commit, every remove with dataChange=true, high-water unchanged.
	if snap.Version != snapBefore.Version+1 || snap.Txns[AppID] != snapBefore.Txns[AppID] {
		t.Fatalf("version %d -> %d, txn %d -> %d", snapBefore.Version, snap.Version, snapBefore.Txns[AppID], snap.Txns[AppID])
	}
	actions := l.log(snap.Version)
	for _, a := range actions {
		if a.Remove != nil && !a.Remove.DataChange || a.Add != nil || a.Txn != nil {
			t.Fatalf("retention commit action %+v", a)
		}
	}
	if len(snap.Tombstones) != 43 {
		t.Fatalf("%d tombstones, want 43", len(snap.Tombstones))
	}
	// A second pass finds nothing to do.
	if res, err := m.pass(l.ctx, passSpec{retain: true}, submit); err != nil || res.Expired != 0 {
		t.Fatalf("second pass: %+v, %v", res, err)
	}
	l.checkIndependently()
	// The removed files stay until vacuum's grace has passed.
	lk := lake.Open(l.store)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return now.Add(d) } }
	if gone, err := lk.Vacuum(l.ctx, lake.VacuumOptions{Retention: 365 * 24 * time.Hour, Now: at(time.Hour)}); err != nil || len(gone) != 0 {
		t.Fatalf("vacuum within the grace: %v, %v", gone, err)
	}
	gone, err := lk.Vacuum(l.ctx, lake.VacuumOptions{Retention: 365 * 24 * time.Hour, Now: at(8 * 24 * time.Hour)})
	if err != nil || len(gone) != 43 {
		t.Fatalf("vacuum after the grace deleted %d files, %v; want 43", len(gone), err)
	}
	l.checkIndependently()
}

func (l *testLake) log(version int64) []delta.Action {
	l.t.Helper()
	data, err := l.store.Get(l.ctx, l.rec.CommitKey(version))
	if err != nil {
		l.t.Fatal(err)
	}
	actions, err := delta.DecodeCommit(data)
	if err != nil {
		l.t.Fatal(err)
	}
	return actions
}

func TestRetentionConfig(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{{"30d", 30 * 24 * time.Hour, false}, {"none", 0, false}, {"", 0, false}, {"36h", 36 * time.Hour, false},
		{"-1d", 0, true}, {"3w", 0, true}, {"d", 0, true},
		{"106751d", 106751 * 24 * time.Hour, false},
		// Days past what a duration holds wrapped around: 213505d to
		// about a day (records removed after it), 999999d to a negative age.
		{"106752d", 0, true}, {"213505d", 0, true}, {"999999d", 0, true}} {
		a, err := ParseAge(tc.in)
		if (err != nil) != tc.bad || time.Duration(a) != tc.want {
			t.Errorf("ParseAge(%q) = %v, %v", tc.in, a, err)
		}
	}
	err := Config{Retention: Retention{Default: Age(time.Hour), Tenants: map[string]Age{"x": Age(2 * time.Hour)}}}.Defaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "committer.retention.default") || !strings.Contains(err.Error(), "committer.retention.tenants.x") {
		t.Fatalf("validate: %v", err)
	}
	err = Config{Compaction: Compaction{TargetBytes: 10, Idle: -1}}.Defaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "committer.compaction.target_bytes") || !strings.Contains(err.Error(), "committer.compaction.idle") {
		t.Fatalf("validate: %v", err)
	}
	c := Config{}.Defaults().Compaction
	if !c.enabled() || c.TargetBytes != 128<<20 || c.Idle != time.Hour {
		t.Fatalf("compaction defaults %+v", c)
	}
}

// TestCompactionKeepsRows compacts a closed (ended) partition, an idle one
// of today, and leaves a busy one of today and a file above the high-water
// alone. Every row keeps its content (multiset before = after), the files
// are near the target, the commit is remove+add with dataChange=false and
// no txn, and the lake reads the same with the independent check.
func TestCompactionKeepsRows(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	l := newTestLake(t, nil, "acme")
	seq := uint64(0)
	next := func(n int) []uint64 {
		var s []uint64
		for range n {
			seq++
			s = append(s, seq)
		}
		return s
	}
	for range 12 {
		l.addFile("acme", "2026-03-09", next(3), now.Add(-10*time.Minute), false) // closed: ended
	}
	for range 4 {
		l.addFile("acme", "2026-03-10", next(2), now.Add(-10*time.Minute), false) // busy: today, recent
	}
	l.addFile("idle", "2026-03-10", next(2), now.Add(-2*time.Hour), false)
	l.addFile("idle", "2026-03-10", next(2), now.Add(-2*time.Hour), false)
	l.addFile("acme", "2026-03-09", next(2), now.Add(-time.Minute), true) // above the high-water
	// (tenant idle has no templates: its rewrite is skipped, not fatal.)
	_, snapBefore := l.partitions()
	var small int64
	for _, f := range snapBefore.Files {
		if f.PartitionValues["date"] == "2026-03-09" {
			small = max(small, f.Size)
		}
	}
	rowsBefore := l.rowSet()
	cfg := testConfig("c1")
	cfg.Compaction.TargetBytes = 5 * small // about 5 files a bin: 12 -> 3 files
	m, submit := l.maint(cfg, now)
	res, err := m.pass(l.ctx, passSpec{retain: true, compact: true}, submit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 1 || res.Compacted != 12 || res.Written != 3 || res.Skipped != 1 {
		t.Fatalf("pass: %+v, want 1 partition, 12 files into 3, 1 skipped", res)
	}
	parts, snap := l.partitions()
	if parts["acme/2026-03-09"] != 3+1 || parts["acme/2026-03-10"] != 4 || parts["idle/2026-03-10"] != 2 {
		t.Fatalf("files per partition after compaction: %v", parts)
	}
	if snap.Version != snapBefore.Version+1 || snap.Txns[AppID] != snapBefore.Txns[AppID] {
		t.Fatalf("version %d -> %d, txn %d -> %d", snapBefore.Version, snap.Version, snapBefore.Txns[AppID], snap.Txns[AppID])
	}
	var removes, adds int
	for _, a := range l.log(snap.Version) {
		switch {
		case a.Txn != nil:
			t.Fatal("compaction commit has a txn action")
		case a.Remove != nil:
			removes++
			if a.Remove.DataChange || !strings.HasPrefix(a.Remove.Path, "tenant=acme/date=2026-03-09/part-") {
				t.Fatalf("remove %+v", a.Remove)
			}
		case a.Add != nil:
			adds++
			name := a.Add.Path[strings.LastIndex(a.Add.Path, "/")+1:]
			if a.Add.DataChange || !strings.HasPrefix(name, "compact-") || a.Add.Size > 2*cfg.Compaction.TargetBytes {
				t.Fatalf("add %+v", a.Add)
			}
			if ids := strings.Split(a.Add.Tags[TagReports], ","); len(ids) < 2 || !slices.IsSorted(ids) {
				t.Fatalf("compacted file lists reports %q", a.Add.Tags[TagReports])
			}
			// A rewrite is written once and kept: compressed harder.
			data, err := l.store.Get(l.ctx, l.rec.FileKey(a.Add.Path))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := lake.Open(l.store).ReadRows(l.ctx, *a.Add, l.tpls)
			if err != nil {
				t.Fatal(err)
			}
			want, err := recfile.Encode(rows, l.tpls, append(l.layout.EncodeOptions(), recfile.WithHighCompression(true))...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, want.Data) {
				t.Fatalf("compacted file %s: %d bytes, not its rows encoded WithHighCompression (%d)", a.Add.Path, len(data), len(want.Data))
			}
		}
	}
	if removes != 12 || adds != 3 {
		t.Fatalf("compaction commit: %d removes, %d adds", removes, adds)
	}
	if got := l.rowSet(); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows changed by compaction: %d rows before, %d after\nfirst before %q\nfirst after  %q", len(rowsBefore), len(got), rowsBefore[0], got[0])
	}
	l.checkIndependently()
	// Later passes merge the compacted files while they are still below
	// the target together (merged rows compress better), then stop; the
	// rows stay.
	var submit2 func(context.Context, *job) error
	for pass := 2; ; pass++ {
		var m2 *maintainer
		m2, submit2 = l.maint(cfg, now)
		res, err := m2.pass(l.ctx, passSpec{retain: true, compact: true}, submit2)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.rowSet(); !slices.Equal(got, rowsBefore) {
			t.Fatalf("rows changed by compaction pass %d", pass)
		}
		if res.Partitions == 0 {
			break
		}
		if pass > 4 {
			t.Fatalf("compaction does not settle: pass %d still rewrote %+v", pass, res)
		}
	}
	l.checkIndependently()
	_, snap = l.partitions()
	// A plan that went stale (a file it removes is gone) commits nothing.
	stale := &job{op: "OPTIMIZE", actions: []delta.Action{{Remove: &delta.Remove{Path: snapBefore.Files[0].Path}}}}
	if err := submit2(l.ctx, stale); !isStale(err) {
		t.Fatalf("stale plan: %v", err)
	}
	// The rebuilt arbiter still knows every compacted report as committed.
	arb := newArbiter(uint64(snap.Txns[AppID]))
	loadRemoved(arb, snap)
	for i := 1; i <= 12; i++ {
		if _, ok := arb.committed[fmt.Sprintf("r%d", i)]; !ok {
			t.Fatalf("report r%d not known as committed after compaction", i)
		}
	}
}

func isStale(err error) bool { return err != nil && strings.Contains(err.Error(), errStale.Error()) }

// crashLakeEnv makes TestCompactionCrashChild compact the lake in that
// directory (with a crash point armed by its parent).
const crashLakeEnv = "QUARRY_TEST_COMPACT_LAKE"

// crashRetainEnv makes TestCompactionCrashChild run retention (30 days)
// instead of compaction.
const crashRetainEnv = "QUARRY_TEST_RETAIN"

var crashNow = time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)

func TestCompactionCrashChild(t *testing.T) {
	dir := os.Getenv(crashLakeEnv)
	if dir == "" {
		t.Skip("run by TestCompactionCrash")
	}
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := &testLake{t: t, ctx: context.Background(), store: store, rec: delta.OpenTable(store, lake.RecordsTable), tpl: delta.OpenTable(store, lake.TemplatesTable)}
	cfg := testConfig("child")
	if os.Getenv(crashRetainEnv) != "" {
		cfg.Retention = Retention{Default: Age(30 * 24 * time.Hour)}
		off := false
		cfg.Compaction.Enabled = &off
	}
	m, submit := l.maint(cfg, crashNow)
	if _, err := m.pass(l.ctx, passSpec{retain: true, compact: true}, submit); err != nil {
		t.Fatal(err)
	}
}

// crashChild runs TestCompactionCrashChild over the lake in dir with the
// crash point set (env: more variables) and wants it killed there.
func crashChild(t *testing.T, dir, point string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompactionCrashChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), crashLakeEnv+"="+dir, crashpoint.Env+"="+point), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != crashpoint.ExitCode {
		t.Fatalf("child: %v, want exit %d\n%s", err, crashpoint.ExitCode, out)
	}
}

// vacuumOrphans is what vacuum would delete from the lake in store after a
// crash at a maintenance commit: by the real clock when the commit was not
// written, else by the log's (crashNow) plus an hour, inside the grace.
func vacuumOrphans(t *testing.T, store objstore.Store, committed bool) []string {
	t.Helper()
	clock := time.Now
	if committed {
		clock = func() time.Time { return crashNow.Add(time.Hour) }
	}
	orphans, err := lake.Open(store).Vacuum(context.Background(), lake.VacuumOptions{DryRun: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return orphans
}

// TestCompactionCrash kills a compacting process after it wrote the new
// files and before its commit, and right after the commit: the lake then
// references either the old files or the new ones (every row exactly once
// by quarry's reader and the independent check), and the unreferenced
// files of the first case are vacuum's.
func TestCompactionCrash(t *testing.T) {
	for _, tc := range []struct {
		point     string
		committed bool
	}{{CrashCompactBeforeCommit, false}, {CrashCompactAfterCommit, true}} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			store, err := objstore.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := newTestLake(t, store, "acme")
			seq := uint64(0)
			for range 6 {
				seq += 2
				l.addFile("acme", "2026-03-09", []uint64{seq - 1, seq}, crashNow.Add(-time.Hour), false)
			}
			_, before := l.partitions()
			rows := l.rowSet()
			crashChild(t, dir, tc.point)
			_, after := l.partitions()
			compacted := 0
			for _, f := range after.Files {
				if strings.Contains(f.Path, "/compact-") {
					compacted++
				}
			}
			switch {
			case !tc.committed && (after.Version != before.Version || compacted != 0 || len(after.Files) != 6):
				t.Fatalf("crash before the commit: version %d -> %d, %d files (%d compacted)", before.Version, after.Version, len(after.Files), compacted)
			case tc.committed && (after.Version != before.Version+1 || compacted != 1 || len(after.Files) != 1):
				t.Fatalf("crash after the commit: version %d -> %d, %d files (%d compacted)", before.Version, after.Version, len(after.Files), compacted)
			}
			if got := l.rowSet(); !slices.Equal(got, rows) {
				t.Fatalf("rows after the crash: %d, want %d", len(got), len(rows))
			}
			l.checkIndependently()
			orphans := vacuumOrphans(t, store, tc.committed)
			if !tc.committed && (len(orphans) != 1 || !strings.Contains(orphans[0], "/compact-")) {
				t.Fatalf("orphans vacuum would delete: %v, want the one compacted file", orphans)
			}
			if tc.committed && len(orphans) != 0 {
				t.Fatalf("vacuum would delete %v right after the commit (grace)", orphans)
			}
		})
	}
}

// TestTemplatesCompactionCrash kills a process compacting the templates
// table after it wrote the merged file and before its commit, and right
// after the commit: the table then holds the old files or the merged one,
// the same template rows either way, and the merged file of the first case
// is vacuum's.
func TestTemplatesCompactionCrash(t *testing.T) {
	for _, tc := range []struct {
		point     string
		committed bool
	}{{CrashCompactTemplatesBeforeCommit, false}, {CrashCompactTemplatesAfterCommit, true}} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			store, err := objstore.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := newTestLake(t, store, "acme")
			l.addFile("acme", "2026-03-09", []uint64{1, 2, 3}, crashNow.Add(-2*time.Hour), false)
			l.addTemplatesFiles(1, 2, 3)
			tplSnap := func() *delta.Snapshot {
				snap, err := l.tpl.Snapshot(l.ctx)
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
			templates := func() []lake.TemplateInfo {
				ts, err := lake.Open(store).Templates(l.ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				return ts
			}
			before, rows := tplSnap(), templates()
			crashChild(t, dir, tc.point)
			after := tplSnap()
			merged := 0
			for _, f := range after.Files {
				if strings.HasPrefix(f.Path, "compact-") {
					merged++
				}
			}
			switch {
			case !tc.committed && (after.Version != before.Version || merged != 0 || len(after.Files) != 4):
				t.Fatalf("crash before the commit: version %d -> %d, %d files (%d merged)", before.Version, after.Version, len(after.Files), merged)
			case tc.committed && (after.Version != before.Version+1 || merged != 1 || len(after.Files) != 2):
				t.Fatalf("crash after the commit: version %d -> %d, %d files (%d merged)", before.Version, after.Version, len(after.Files), merged)
			}
			if got := templates(); !reflect.DeepEqual(got, rows) {
				t.Fatalf("templates after the crash:\n%+v\nwant\n%+v", got, rows)
			}
			orphans := vacuumOrphans(t, store, tc.committed)
			if !tc.committed && (len(orphans) != 1 || !strings.Contains(orphans[0], "templates/compact-")) {
				t.Fatalf("orphans vacuum would delete: %v, want the merged templates file", orphans)
			}
			if tc.committed && len(orphans) != 0 {
				t.Fatalf("vacuum would delete %v right after the commit (grace)", orphans)
			}
		})
	}
}

// addTemplatesFiles commits a templates file for each of seqs (one new
// template each, by a flush of that WAL sequence, part-<i>.zstd.parquet),
// modified two hours before crashNow. The test lake's own templates file
// has no stats, so no WAL range: compaction never takes it.
func (l *testLake) addTemplatesFiles(seqs ...int64) {
	l.t.Helper()
	for i, seq := range seqs {
		rows := []lake.TemplateRow{{TemplateID: 10 + int64(i), Tenant: "acme", Version: 1, Template: fmt.Sprintf("job <*> step %d", i), Kind: "created", WALSeq: seq}}
		data, err := lake.EncodeTemplates(rows, false)
		if err != nil {
			l.t.Fatal(err)
		}
		name := fmt.Sprintf("part-%d.zstd.parquet", i)
		if err := l.store.Put(l.ctx, lake.TemplatesTable+"/"+name, data); err != nil {
			l.t.Fatal(err)
		}
		l.commit(l.tpl, delta.Add{Path: name, Size: int64(len(data)), ModificationTime: crashNow.Add(-2 * time.Hour).UnixMilli(), DataChange: true,
			Stats: lake.TemplateStats(rows), Tags: map[string]string{TagReport: fmt.Sprintf("t%d", i), TagSeqs: fmt.Sprint(seq)}}, seq)
	}
}

// TestTemplatesCompactionSkipsDamaged: a templates file that cannot be
// read leaves the table as it was (the pass counts it skipped and goes
// on); once the file reads again, the next pass merges the three.
func TestTemplatesCompactionSkipsDamaged(t *testing.T) {
	l := newTestLake(t, nil, "acme")
	l.addFile("acme", "2026-03-09", []uint64{1, 2, 3}, crashNow.Add(-2*time.Hour), false)
	l.addTemplatesFiles(1, 2, 3)
	good, err := l.store.Get(l.ctx, lake.TemplatesTable+"/part-1.zstd.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.store.Put(l.ctx, lake.TemplatesTable+"/part-1.zstd.parquet", []byte("not parquet")); err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		snap, err := l.tpl.Snapshot(l.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Version
	}
	before := version()
	m, submit := l.maint(testConfig("c"), crashNow)
	res, err := m.pass(l.ctx, passSpec{compact: true}, submit)
	if err != nil || res.Skipped != 1 || res.TemplateFiles != 0 || version() != before {
		t.Fatalf("a pass over a damaged templates file: %+v, %v, version %d -> %d; want it skipped, the table unchanged", res, err, before, version())
	}
	if err := l.store.Put(l.ctx, lake.TemplatesTable+"/part-1.zstd.parquet", good); err != nil {
		t.Fatal(err)
	}
	m, submit = l.maint(testConfig("c"), crashNow)
	if res, err := m.pass(l.ctx, passSpec{compact: true}, submit); err != nil || res.TemplateFiles != 3 || version() != before+1 {
		t.Fatalf("the pass after the repair: %+v, %v; want the 3 files merged in one commit", res, err)
	}
}

// encodeV3 uploads a records v3 file (template 1 version 1 of tenant acme,
// rows of 2026-01-01, in the current layout the committer creates) and a
// templates file for bs and returns the report, unpublished.
func (e *env) encodeV3(id string, bs ...batch) *streams.Report {
	e.t.Helper()
	return e.encodeV3At(id, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), bs...)
}

// encodeV3At is encodeV3 with the records on day (batch seq s at s seconds
// past its start).
func (e *env) encodeV3At(id string, day time.Time, bs ...batch) *streams.Report {
	e.t.Helper()
	ctx := context.Background()
	tpls := recfile.Templates{{ID: 1, Version: 1}: "x <*> y <*>"}
	r := &streams.Report{ID: id, Encoder: "e1", CreatedAt: time.Now()}
	var rows []recfile.Row
	first, last := bs[0].seq, bs[0].seq
	for _, b := range bs {
		r.Batches = append(r.Batches, streams.BatchRef{Seq: b.seq, Prev: b.prev, Records: 1})
		rows = append(rows, recfile.Row{WALSeq: b.seq, TS: day.Add(time.Duration(b.seq) * time.Second).UnixNano(),
			TemplateID: 1, TemplateVersion: 1, Params: []string{id, fmt.Sprint(b.seq)}, Source: "s"})
		first, last = min(first, b.seq), max(last, b.seq)
	}
	f, err := recfile.Encode(rows, tpls, lake.CurrentLayout.EncodeOptions()...)
	if err != nil {
		e.t.Fatal(err)
	}
	tplData := pqtest.Write(e.t, []lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "x <*> y <*>", Kind: "created", WALSeq: int64(first)}})
	name := lake.FileName(first, last, strings.ReplaceAll(id, ".", "-"))
	for _, x := range []struct {
		table, path string
		data        []byte
		pv          map[string]string
		stats       string
	}{
		{streams.TableRecords, lake.RecordsFilePath("acme", "", name), f.Data, map[string]string{"tenant": "acme"}, f.Stats},
		{streams.TableTemplates, name, tplData, nil, delta.StatsJSON(1, nil, nil, nil)},
	} {
		if err := e.local.Put(ctx, x.table+"/"+x.path, x.data); err != nil {
			e.t.Fatal(err)
		}
		r.Files = append(r.Files, streams.FileInfo{Table: x.table, Path: x.path, Size: int64(len(x.data)),
			PartitionValues: x.pv, NumRecords: int64(len(bs)), ModificationTime: time.Now().UnixMilli(), Stats: x.stats})
	}
	return r
}

// walSeqs is every committed record's wal_seq, sorted, by quarry's reader.
func (e *env) walSeqs() []uint64 {
	e.t.Helper()
	var out []uint64
	if err := lake.Open(e.local).Query(context.Background(), lake.Filter{}, func(r lake.Record) error {
		out = append(out, r.WALSeq)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestCommitterCompactsInBackground: the active committer compacts a
// closed partition between its advances, keeps committing after it, and a
// new committer that replays the whole report stream over the compacted
// table still knows the compacted reports as committed (no conflict, no
// dead letter, no duplicate).
func TestCommitterCompactsInBackground(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.Compaction.Interval = 20 * time.Millisecond
	r := e.start(cfg, nil)
	for s := uint64(1); s <= 6; s++ {
		e.publish(e.encodeV3(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
	}
	e.waitHW(r.c, 6)
	compacted := func() (int, int) {
		snap, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range snap.Files {
			if strings.Contains(f.Path, "/compact-") {
				n++
			}
		}
		return n, len(snap.Files)
	}
	eventually(t, 15*time.Second, "a compacted file", func() bool { n, _ := compacted(); return n > 0 })
	eventually(t, 15*time.Second, "the compaction counted", func() bool {
		return testutil.ToFloat64(r.c.m.maintFiles.WithLabelValues("written")) >= 1 &&
			testutil.ToFloat64(r.c.m.maintFiles.WithLabelValues("compacted")) >= 2
	})
	e.publish(e.encodeV3("a.7", batch{7, 6}))
	e.waitHW(r.c, 7)
	r.stop(t)
	if got := e.walSeqs(); !slices.Equal(got, seqRange(1, 7)) {
		t.Fatalf("committed seqs %v", got)
	}
	if v := e.table(lake.RecordsTable); v.txn != 7 {
		t.Fatalf("records txn %d, want 7", v.txn)
	}
	// A new committer replays all seven reports over the compacted table.
	cfg2 := testConfig("c2")
	off := false
	cfg2.Compaction.Enabled = &off
	r2 := e.start(cfg2, nil)
	e.waitHW(r2.c, 7)
	eventually(t, 15*time.Second, "c2 caught up", func() bool { return r2.c.Ready() == nil })
	e.publish(e.encodeV3("a.8", batch{8, 7}))
	e.waitHW(r2.c, 8)
	if n := testutil.ToFloat64(r2.c.m.reports.WithLabelValues("conflict")); n != 0 {
		t.Fatalf("%v replayed reports conflicted with the compacted table", n)
	}
	r2.stop(t)
	if got := e.walSeqs(); !slices.Equal(got, seqRange(1, 8)) {
		t.Fatalf("committed seqs after the takeover %v", got)
	}
	if err := laketest.CheckWithArrow(context.Background(), e.local); err != nil {
		t.Fatal(err)
	}
}

// TestCommitterMaintain: Maintain runs a pass at once through the active
// term (the background pass's interval is an hour here). Today's
// partition is open, so a plain pass leaves its files; with AllClosed
// (quarry run --compact) they become one, every row kept, and the
// committer goes on committing. A committer that holds no term, before it
// starts and after it stops, answers ErrNotActive.
func TestCommitterMaintain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := testConfig("c1")
	cfg.Compaction.Interval = time.Hour
	c, err := New(cfg, Deps{JS: e.js, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Maintain(ctx, MaintainOptions{AllClosed: true}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("Maintain before Run: %v, want ErrNotActive", err)
	}
	r := runCommitter(t, c)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for s := uint64(1); s <= 4; s++ {
		e.publish(e.encodeV3At(fmt.Sprintf("a.%d", s), today, batch{s, s - 1}))
	}
	e.waitHW(c, 4)
	files := func() (live, compacted int) {
		snap, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Files {
			if strings.Contains(f.Path, "/compact-") {
				compacted++
			}
		}
		return len(snap.Files), compacted
	}
	tplFiles := func() int {
		snap, err := delta.OpenTable(e.local, lake.TemplatesTable).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(snap.Files)
	}
	templates := func() []lake.TemplateInfo {
		ts, err := lake.Open(e.local).Templates(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	before := templates()
	if res, err := c.Maintain(ctx, MaintainOptions{}); err != nil || res.Compacted != 0 || res.TemplateFiles != 0 {
		t.Fatalf("a pass over today's open partition: %+v, %v; want nothing compacted", res, err)
	}
	if live, _ := files(); live != 4 || tplFiles() != 4 {
		t.Fatalf("%d live records files and %d templates files after the plain pass, want 4 and 4", live, tplFiles())
	}
	res, err := c.Maintain(ctx, MaintainOptions{AllClosed: true})
	if err != nil || res.Compacted != 4 || res.Written != 1 || res.Partitions != 1 || res.TemplateFiles != 4 {
		t.Fatalf("a pass with AllClosed: %+v, %v; want 4 files into 1 in each table", res, err)
	}
	if live, compacted := files(); live != 1 || compacted != 1 || tplFiles() != 1 {
		t.Fatalf("%d live records files (%d compacted) and %d templates files after AllClosed, want 1 and 1", live, compacted, tplFiles())
	}
	if after := templates(); !reflect.DeepEqual(after, before) {
		t.Fatalf("templates after the compaction:\n%+v\nbefore:\n%+v", after, before)
	}
	if n := testutil.ToFloat64(c.m.maintFiles.WithLabelValues("compacted")); n != 8 {
		t.Fatalf("quarry_committer maintenance files compacted %v, want 8 (4 records, 4 templates)", n)
	}
	e.publish(e.encodeV3At("a.5", today, batch{5, 4}))
	e.waitHW(c, 5)
	r.stop(t)
	if got := e.walSeqs(); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("committed seqs %v", got)
	}
	if _, err := c.Maintain(ctx, MaintainOptions{AllClosed: true}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("Maintain after Run: %v, want ErrNotActive", err)
	}
	// A new committer replays the five reports over both compacted
	// tables: it knows them as committed, adds no file again.
	cfg2 := testConfig("c2")
	off := false
	cfg2.Compaction.Enabled = &off
	r2 := e.start(cfg2, nil)
	e.waitHW(r2.c, 5)
	eventually(t, 15*time.Second, "c2 caught up", func() bool { return r2.c.Ready() == nil })
	e.publish(e.encodeV3At("a.6", today, batch{6, 5}))
	e.waitHW(r2.c, 6)
	if n := testutil.ToFloat64(r2.c.m.reports.WithLabelValues("conflict")); n != 0 {
		t.Fatalf("%v replayed reports conflicted with the compacted tables", n)
	}
	r2.stop(t)
	if got := e.walSeqs(); !slices.Equal(got, seqRange(1, 6)) {
		t.Fatalf("committed seqs after the takeover %v", got)
	}
	if n := tplFiles(); n != 3 { // the merged file, a.5's and a.6's
		t.Fatalf("%d templates files after the takeover, want 3 (none added again)", n)
	}
	if err := laketest.CheckWithArrow(ctx, e.local); err != nil {
		t.Fatal(err)
	}
}

// TestCommitterRetentionReplay: the active committer removes the expired
// partition of each advance in the background; a new committer replaying
// the report stream (accepted verdicts still stored) over the table knows
// the removed files' reports as committed: no conflict, nothing re-added.
func TestCommitterRetentionReplay(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.Compaction.Interval = 20 * time.Millisecond
	off := false
	cfg.Compaction.Enabled = &off
	cfg.Retention.Default = Age(24 * time.Hour) // 2026-01-01 is long past
	r := e.start(cfg, nil)
	live := func() int {
		snap, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(snap.Files)
	}
	for s := uint64(1); s <= 3; s++ {
		e.publish(e.encodeV3(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
	}
	e.waitHW(r.c, 3)
	eventually(t, 15*time.Second, "the expired files removed", func() bool { return live() == 0 })
	e.publish(e.encodeV3("a.4", batch{4, 3}))
	e.waitHW(r.c, 4)
	eventually(t, 15*time.Second, "the expired file of a.4 removed", func() bool { return live() == 0 })
	r.stop(t)
	cfg2 := testConfig("c2")
	cfg2.Compaction.Enabled = &off
	r2 := e.start(cfg2, nil)
	e.waitHW(r2.c, 4)
	eventually(t, 15*time.Second, "c2 caught up", func() bool { return r2.c.Ready() == nil })
	if n := testutil.ToFloat64(r2.c.m.reports.WithLabelValues("conflict")); n != 0 {
		t.Fatalf("%v replayed reports conflicted with the removed files", n)
	}
	r2.stop(t)
	if n := live(); n != 0 {
		t.Fatalf("%d files re-added after retention", n)
	}
	if v := e.table(lake.RecordsTable); v.txn != 4 {
		t.Fatalf("records txn %d, want 4", v.txn)
	}
}

// TestTemplatesPlan: the templates table's small files at or below the
// high-water are merged once the table is idle, or holds
// templatesMergeFiles of them though it is not, or with allClosed; a file
// above the high-water, a large one or one without a WAL range stays.
func TestTemplatesPlan(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	cfg := Compaction{}.Defaults()
	files := func(n int, mod time.Time) []delta.Add {
		var out []delta.Add
		for i := range n {
			seq := int64(i + 1)
			out = append(out, delta.Add{Path: fmt.Sprintf("part-%d.zstd.parquet", i), Size: 1000, ModificationTime: mod.UnixMilli(),
				Stats: delta.StatsJSON(1, map[string]any{"wal_seq": seq}, map[string]any{"wal_seq": seq}, nil)})
		}
		return out
	}
	recent, old := now.Add(-time.Minute), now.Add(-2*time.Hour)
	for _, tc := range []struct {
		name      string
		files     []delta.Add
		hw        int64
		allClosed bool
		want      int
	}{
		{"recent, a few", files(5, recent), 100, false, 0},
		{"recent, a few, all closed", files(5, recent), 100, true, 5},
		{"idle", files(5, old), 100, false, 5},
		{"recent, just under the count", files(templatesMergeFiles-1, recent), 100, false, 0},
		{"recent, the count", files(templatesMergeFiles, recent), 100, false, templatesMergeFiles},
		{"idle, above the high-water", files(5, old), 3, false, 3},
		{"idle, one at or below the high-water", files(5, old), 1, false, 0},
		{"idle, one large", append(files(2, old), delta.Add{Path: "big", Size: cfg.TargetBytes, ModificationTime: old.UnixMilli(),
			Stats: delta.StatsJSON(1, map[string]any{"wal_seq": 1}, map[string]any{"wal_seq": 1}, nil)}), 100, false, 2},
		{"idle, one without a WAL range", append(files(2, old), delta.Add{Path: "x", Size: 10, ModificationTime: old.UnixMilli()}), 100, false, 2},
	} {
		got := templatesPlan(&delta.Snapshot{Files: tc.files}, tc.hw, cfg, tc.allClosed, now)
		if len(got) != tc.want {
			t.Errorf("%s: %d files planned, want %d", tc.name, len(got), tc.want)
		}
	}
}

// A parsed age is never negative, and "<n>d" is n whole days exactly.
func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"30d", "none", "36h", "213505d", "2562047h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAge(s)
		if err != nil {
			return
		}
		if a < 0 {
			t.Fatalf("ParseAge(%q) = %d: negative", s, a)
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(s), "d")); err == nil && strings.HasSuffix(strings.TrimSpace(s), "d") {
			if time.Duration(a)/(24*time.Hour) != time.Duration(n) || time.Duration(a)%(24*time.Hour) != 0 {
				t.Fatalf("ParseAge(%q) = %s, not %d days", s, time.Duration(a), n)
			}
		}
	})
}
